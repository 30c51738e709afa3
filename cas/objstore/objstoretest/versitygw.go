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

// VersityGW is a versity gateway (versitygw, posix backend) started for
// one test on 127.0.0.1, with its own data directory.
type VersityGW struct {
	Endpoint string // 127.0.0.1:port
	Access   string
	Secret   string
	Dir      string // the posix backend's root
	client   *minio.Client
	nbuckets atomic.Int32
}

// FindVersityGW returns the versitygw binary: $REYNFS_VERSITYGW, else
// bin/versitygw in this module's checkout, else one on PATH.
func FindVersityGW() (string, error) {
	if p := os.Getenv("REYNFS_VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("versitygw is not installed: REYNFS_VERSITYGW=%s: %v", p, err)
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
				p := filepath.Join(dir, "bin", "versitygw")
				if _, err := os.Stat(p); err == nil {
					return p, nil
				}
			}
			break
		}
	}
	p, err := exec.LookPath("versitygw")
	if err != nil {
		return "", fmt.Errorf("versitygw is not installed (bash scripts/install.sh puts it in bin/; or go install github.com/versity/versitygw/cmd/versitygw@%s)", VersityVersion)
	}
	return p, nil
}

// StartVersityGW starts a gateway for t and stops it (by its PID) when t
// ends. Without versitygw the test is skipped, or fails under CI=true.
// It returns once a signed PUT succeeds, not when the port opens.
func StartVersityGW(t testing.TB) *VersityGW {
	t.Helper()
	bin, err := FindVersityGW()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skip(err)
	}
	g := &VersityGW{Access: "reynfsaccess", Secret: "reynfssecret0123456789", Dir: t.TempDir()}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // the free port may be taken before the gateway binds it
		if lastErr = g.start(t, bin); lastErr == nil {
			return g
		}
	}
	t.Fatalf("versitygw: %v", lastErr)
	return nil
}

func (g *VersityGW) start(t testing.TB, bin string) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	g.Endpoint = l.Addr().String()
	l.Close()
	logPath := filepath.Join(t.TempDir(), "versitygw.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--access", g.Access, "--secret", g.Secret, "--port", g.Endpoint, "--quiet", "posix", g.Dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
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
	g.client, err = minio.New(g.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(g.Access, g.Secret, ""),
		BucketLookup: minio.BucketLookupPath,
		Region:       "us-east-1",
	})
	if err != nil {
		stop()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
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
			return fmt.Errorf("no signed PUT succeeded within 20s (%v): %s", err, tail(logPath))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// probe makes the probe bucket and PUTs into it, signed.
func (g *VersityGW) probe(ctx context.Context) error {
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
func (g *VersityGW) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("reynfs-test-%d", g.nbuckets.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.client.MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("versitygw: make bucket %s: %v", name, err)
	}
	return "s3+http://" + g.Endpoint + "/" + name
}

// SetEnv points the AWS variables of t's process at this gateway (and
// away from any profile file), as a user would.
func (g *VersityGW) SetEnv(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", g.Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", g.Secret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(g.Dir, "no-such-credentials-file"))
}
