package objstoretest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// VersityVersion is the versity gateway the tests run against;
// scripts/install.sh installs it into bin/.
const VersityVersion = "v1.8.0"

// S3Server is an S3 server started for one test on 127.0.0.1, with its
// own data directory: a versity gateway (versitygw, posix backend), or
// with REYNFS_S3_SERVER=seaweedfs a SeaweedFS `weed mini` (the --full
// mode of scripts/test.sh runs the S3 tests on both).
type S3Server struct {
	Kind     string // "versitygw" or "seaweedfs"
	Endpoint string // 127.0.0.1:port
	Access   string
	Secret   string
	Dir      string // the server's data directory
	client   *minio.Client
	nbuckets atomic.Int32
	// argv, env: how the server was started (Restart starts it so
	// again); kill ends the running process with SIGKILL and waits.
	argv, env []string
	kill      func()
}

// ServerEnv names the S3 server the tests start: versitygw (the
// default) or seaweedfs.
const ServerEnv = "REYNFS_S3_SERVER"

// StartS3 starts the S3 server $REYNFS_S3_SERVER names (versitygw by
// default) for t and stops it, by its PID, when t ends. Without its
// binary the test is skipped, or fails under CI=true. It returns once a
// signed PUT succeeds, not when the port opens.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	switch k := os.Getenv(ServerEnv); k {
	case "", "versitygw":
		return startVersityGW(t)
	case "seaweedfs":
		return startSeaweed(t)
	default:
		t.Fatalf("%s=%s: want versitygw or seaweedfs", ServerEnv, k)
		return nil
	}
}

// missing skips t for a server binary that is not installed, or fails
// it under CI=true.
func missing(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %v", err)
	}
	t.Skip(err)
}

// FindVersityGW returns the versitygw binary: $REYNFS_VERSITYGW, else
// bin/versitygw in this module's checkout, else one on PATH.
func FindVersityGW() (string, error) {
	return findServer("versitygw", "REYNFS_VERSITYGW",
		"bash scripts/install.sh puts it in bin/; or go install github.com/versity/versitygw/cmd/versitygw@"+VersityVersion)
}

// findServer returns the binary name: $env, else bin/name in this
// module's checkout, else one on PATH.
func findServer(name, env, hint string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s is not installed: %s=%s: %v", name, env, p, err)
		}
		return p, nil
	}
	if dir, err := os.Getwd(); err == nil {
		for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
			mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			if err != nil {
				continue
			}
			if bytes.HasPrefix(mod, []byte("module github.com/reynfs/reynfs\n")) {
				p := filepath.Join(dir, "bin", name)
				if _, err := os.Stat(p); err == nil {
					return p, nil
				}
			}
			break
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not installed (%s)", name, hint)
	}
	return p, nil
}

func startVersityGW(t testing.TB) *S3Server {
	t.Helper()
	bin, err := FindVersityGW()
	if err != nil {
		missing(t, err)
	}
	g := &S3Server{Kind: "versitygw", Access: "reynfsaccess", Secret: "reynfssecret0123456789", Dir: t.TempDir()}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // the free port may be taken before the gateway binds it
		if lastErr = g.start(t, bin); lastErr == nil {
			return g
		}
	}
	t.Fatalf("versitygw: %v", lastErr)
	return nil
}

func (g *S3Server) start(t testing.TB, bin string) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	g.Endpoint = l.Addr().String()
	l.Close()
	return g.run(t, exec.Command(bin, "--access", g.Access, "--secret", g.Secret, "--port", g.Endpoint, "--quiet", "posix", g.Dir))
}

// run starts cmd (the server, set to serve g.Endpoint), its output in a
// log file, and waits until a signed PUT succeeds.
func (g *S3Server) run(t testing.TB, cmd *exec.Cmd) error {
	logPath := filepath.Join(t.TempDir(), g.Kind+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	g.argv, g.env = cmd.Args, cmd.Env
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		if cmd.Process.Signal(syscall.SIGTERM) == nil {
			select {
			case <-exited:
				return
			case <-time.After(5 * time.Second):
			}
		}
		cmd.Process.Kill()
		<-exited
	}
	g.kill = func() { cmd.Process.Kill(); <-exited }
	g.client, err = minio.New(g.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(g.Access, g.Secret, ""),
		BucketLookup: minio.BucketLookupPath,
		Region:       "us-east-1",
	})
	if err != nil {
		stop()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		err = g.probe(ctx)
		if err == nil {
			t.Cleanup(stop)
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before serving (pid %d): %s", cmd.Process.Pid, tail(logPath))
		case <-ctx.Done():
			stop()
			return fmt.Errorf("no signed PUT succeeded within 60s (%v): %s", err, tail(logPath))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill ends the server with SIGKILL: requests in flight are cut off,
// later ones find nothing listening. Revive starts it again.
func (g *S3Server) Kill() { g.kill() }

// Revive starts a killed server again on the same endpoint and data and
// returns once a signed PUT succeeds. It may run on any goroutine.
func (g *S3Server) Revive(t testing.TB) error {
	cmd := exec.Command(g.argv[0], g.argv[1:]...)
	cmd.Env = g.env
	if err := g.run(t, cmd); err != nil {
		return fmt.Errorf("%s: restart: %w", g.Kind, err)
	}
	return nil
}

// probe makes the probe bucket and PUTs into it, signed.
func (g *S3Server) probe(ctx context.Context) error {
	err := g.client.MakeBucket(ctx, "reynfs-probe", minio.MakeBucketOptions{})
	if err != nil && minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
		return err
	}
	_, err = g.client.PutObject(ctx, "reynfs-probe", "ready", strings.NewReader("ok"), 2, minio.PutObjectOptions{})
	return err
}

func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 5 {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return "(no output)"
	}
	return strings.Join(lines, " | ")
}

// NewBucket creates a new bucket and returns its s3+http URL.
func (g *S3Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("reynfs-test-%d", g.nbuckets.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.client.MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("%s: make bucket %s: %v", g.Kind, name, err)
	}
	return "s3+http://" + g.Endpoint + "/" + name
}

// SetEnv points the AWS variables of t's process at this gateway (and
// away from any profile file), as a user would.
func (g *S3Server) SetEnv(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", g.Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", g.Secret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(g.Dir, "no-such-credentials-file"))
}
