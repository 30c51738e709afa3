package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// The S3 server of the bench: a versity gateway (posix backend) on
// 127.0.0.1, reached through a counting reverse proxy, so that the
// requests and bytes a command costs are what crossed the wire, counted
// outside reynfs.

const (
	access = "reynfsbench"
	secret = "reynfsbenchsecret0123456789"
)

type server struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	backend string // the gateway's host:port
	proxy   *http.Server
	Addr    string // the proxy's host:port: what reynfs talks to
	client  *minio.Client

	requests, up, down atomic.Int64
}

// counts is what the proxy saw since the last reset.
type counts struct {
	Requests int64
	Up, Down int64 // request and response body bytes
}

func (s *server) reset() counts {
	return counts{s.requests.Swap(0), s.up.Swap(0), s.down.Swap(0)}
}

// startServer starts bin (versitygw) on a free port with its data in
// dir, and the counting proxy before it; it returns once a signed PUT
// through the proxy succeeds.
func startServer(bin, dir string) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{backend: l.Addr().String(), exited: make(chan struct{})}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l.Close()
	logf, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, "--access", access, "--secret", secret, "--port", s.backend, "--quiet", "posix", data)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()

	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.stop()
		return nil, err
	}
	s.Addr = pl.Addr().String()
	target := &url.URL{Scheme: "http", Host: s.backend}
	rp := httputil.NewSingleHostReverseProxy(target)
	// Keep the Host the client signed (the proxy's): SigV4 covers it.
	rp.Director = func(r *http.Request) {
		r.URL.Scheme, r.URL.Host = target.Scheme, target.Host
	}
	s.proxy = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if r.Body != nil {
			r.Body = &countReader{r.Body, &s.up}
		}
		rp.ServeHTTP(&countWriter{w, &s.down}, r)
	})}
	go s.proxy.Serve(pl)

	s.client, err = minio.New(s.Addr, &minio.Options{
		Creds: credentials.NewStaticV4(access, secret, ""), BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
	if err != nil {
		s.stop()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		err = s.makeBucket(ctx, "reynfs-bench-probe")
		if err == nil {
			_, err = s.client.PutObject(ctx, "reynfs-bench-probe", "ready", strings.NewReader("ok"), 2, minio.PutObjectOptions{})
		}
		if err == nil {
			s.reset()
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("versitygw exited before serving (see %s)", logf.Name())
		case <-ctx.Done():
			s.stop()
			return nil, fmt.Errorf("versitygw: no signed PUT succeeded within 30 s: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *server) makeBucket(ctx context.Context, name string) error {
	err := s.client.MakeBucket(ctx, name, minio.MakeBucketOptions{})
	if err != nil && minio.ToErrorResponse(err).Code == "BucketAlreadyOwnedByYou" {
		return nil
	}
	return err
}

// bucket makes a new bucket and returns its reynfs remote URL.
func (s *server) bucket(name string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.makeBucket(ctx, name); err != nil {
		return "", fmt.Errorf("make bucket %s: %w", name, err)
	}
	s.reset()
	return "s3+http://" + s.Addr + "/" + name, nil
}

// env is the environment of the reynfs commands: the gateway's
// credentials and no profile file.
func (s *server) env() []string {
	return append(os.Environ(), "AWS_ACCESS_KEY_ID="+access, "AWS_SECRET_ACCESS_KEY="+secret,
		"AWS_SESSION_TOKEN=", "AWS_REGION=us-east-1", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent/reynfs-bench")
}

func (s *server) stop() {
	if s.proxy != nil {
		s.proxy.Close()
	}
	if s.cmd.Process.Signal(syscall.SIGTERM) == nil {
		select {
		case <-s.exited:
			return
		case <-time.After(5 * time.Second):
		}
	}
	s.cmd.Process.Kill()
	<-s.exited
}

type countReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

type countWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
