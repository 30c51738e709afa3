package integration

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

// hangServer accepts connections on 127.0.0.1 and never answers: an S3
// server that hangs. open counts the connections its clients still hold.
type hangServer struct {
	ln       net.Listener
	mu       sync.Mutex
	accepted int
	open     int
}

func startHangServer(t *testing.T) *hangServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hangServer{ln: ln}
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.accepted++
			h.open++
			conns = append(conns, c)
			h.mu.Unlock()
			go func() {
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil { // the client closed it
						h.mu.Lock()
						h.open--
						h.mu.Unlock()
						return
					}
				}
			}()
		}
	}()
	return h
}

func (h *hangServer) counts() (accepted, open int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.accepted, h.open
}

// waitFor polls cond for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestMountedPushCancelledWithClient: a push or sync through the daemon
// to a server that never answers is cancelled when its CLI goes away
// (killed: its end of the control connection closes): the daemon drops
// its requests to the server (the server sees its connections closed),
// and the next command is served.
func TestMountedPushCancelledWithClient(t *testing.T) {
	requireFUSE(t)
	h := startHangServer(t)
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "README"), []byte("hang\n"), 0o644)
	m := mountProject(t, dir)
	// remote.add makes no request (the CLI's self-test would hang here).
	ctx := context.Background()
	if err := daemon.Call(ctx, m.Store, api.RemoteAddParams{Name: "hang", URL: "s3+http://" + h.ln.Addr().String() + "/bucket"}, nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"push", "hang"}, {"sync", "hang"}} {
		before, _ := h.counts()
		cmd := exec.Command(reynfsBin, append(args, "--dir", m.Dir)...)
		cmd.Env, cmd.Dir = m.env, "/"
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if !waitFor(20*time.Second, func() bool { a, _ := h.counts(); return a > before }) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("reynfs %v: the daemon never reached the server\nlog:\n%s", args, m.LogTail(10))
		}
		if _, open := h.counts(); open == 0 {
			t.Fatalf("reynfs %v: no request held open", args)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if !waitFor(10*time.Second, func() bool { _, open := h.counts(); return open == 0 }) {
			_, open := h.counts()
			t.Fatalf("reynfs %v killed: the daemon still holds %d requests to the server\nlog:\n%s", args, open, m.LogTail(10))
		}
	}
	// The daemon serves on (a push holding its lock would block this).
	if r := m.Run("remote", "remove", "hang", "--dir", m.Dir); r.Code != 0 {
		t.Fatalf("remote remove after the cancelled push: exit %d: %s", r.Code, r.Stderr)
	}
	if r := m.Run("status", m.Dir); r.Code != 0 {
		t.Fatalf("status: exit %d: %s", r.Code, r.Stderr)
	}
}
