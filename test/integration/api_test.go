package integration

// The control API (docs/api.md) from outside Go: the Python client the
// docs show, run against a real mount, and refused to another user.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reynfs/reynfs/agents/api"
)

// apiPythonClient is the Python client in docs/api.md, so the docs show
// what the test runs.
func apiPythonClient(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```python\n")
	code, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/api.md has no ```python block")
	}
	return code
}

// TestAPIPythonClient: hello, status, checkpoint, and a subscription that
// reads init and then the checkpoint a second connection cuts.
func TestAPIPythonClient(t *testing.T) {
	requireFUSE(t)
	py := requireTool(t, "python3")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("a"), 0o644)
	m := mountProject(t, dir)
	client := filepath.Join(t.TempDir(), "client.py")
	writeFile(t, client, []byte(apiPythonClient(t)), 0o644)
	cmd := exec.Command(py, client, socketOf(t, m.Store), m.Dir)
	r := hcRunCmd(t, cmd, 20*time.Second)
	out := r.Stdout
	for _, want := range []string{"hello 1.0\n", "status mounted ", "checkpoint g2 from python\n", "event init ", "event writes ", "checkpoint event g3 after a write\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("python client: want %q in its output; exit %d, stdout:\n%s\nstderr:\n%s", want, r.Code, out, r.Stderr)
		}
	}
	if r.Code != 0 {
		t.Fatalf("python client: exit %d\n%s%s", r.Code, out, r.Stderr)
	}
	if i, j := strings.Index(out, "event init"), strings.Index(out, "event writes"); i < 0 || j < i {
		t.Errorf("python client: init is not the first event:\n%s", out)
	}
}

// TestAPIOtherUserDenied: user nobody running the same client against
// root's mount gets permission_denied, whether the socket's folder keeps
// it out (connect) or, once opened up, the daemon's own peer check does.
func TestAPIOtherUserDenied(t *testing.T) {
	hcPrivileged(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		skipOrFail(t, "needs /usr/bin/python3 for user nobody: %v", err)
	}
	base, _ := hcBase(t)
	dir := filepath.Join(base, "proj")
	writeFile(t, filepath.Join(dir, "a"), []byte("root's work"), 0o644)
	m := hcMount(t, dir, filepath.Join(base, "store"))
	sock := socketOf(t, m.Store)
	client := filepath.Join(base, "client.py")
	writeFile(t, client, []byte(apiPythonClient(t)), 0o644)
	head, gens := hcHead(t, m)

	r := nobodyExec(t, nil, "python3", client, sock, dir)
	if r.Code != 1 || !strings.Contains(r.Stdout, "error permission_denied") {
		t.Errorf("nobody's python client, store 0700: exit %d, %q %q; want permission_denied", r.Code, r.Stdout, r.Stderr)
	}
	if err := os.Chmod(m.Store, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	r = nobodyExec(t, nil, "python3", client, sock, dir)
	if r.Code != 1 || !strings.Contains(r.Stdout, "error permission_denied 1 control socket: uid 65534") {
		t.Errorf("nobody's python client, socket opened up: exit %d, %q %q; want the daemon's permission_denied (exit 1)", r.Code, r.Stdout, r.Stderr)
	}
	if h, g := hcHead(t, m); h != head || g != gens {
		t.Errorf("after nobody's calls: head seq %d, %d generations; want %d and %d (unchanged)", h, g, head, gens)
	}
	m.Unmount()
}

// TestAPISchemaCommand: 'reynfs api schema' prints the checked-in schema.
func TestAPISchemaCommand(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := runReynfs(testEnv(t), "api", "schema")
	if r.Code != 0 || r.Stdout != string(want) {
		t.Fatalf("reynfs api schema: exit %d, %d bytes (stderr %q); want docs/api.schema.json (%d bytes)", r.Code, len(r.Stdout), r.Stderr, len(want))
	}
}

// TestAPIKeptConnection: one connection carries many calls (the Go
// client), and a connection kept open, idle or subscribed, neither holds
// up an unmount nor outlives it.
func TestAPIKeptConnection(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("a"), 0o644)
	m := mountProject(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := api.Dial(ctx, socketOf(t, m.Store))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := c.Hello(ctx, "integration test")
	if err != nil || h.Version != api.Version || !h.Mounted || h.Head == nil {
		t.Fatalf("hello: %+v, %v", h, err)
	}
	var last *api.Head
	for i := 0; i < 3; i++ {
		g, err := c.Checkpoint(ctx, api.CheckpointParams{Label: fmt.Sprintf("kept %d", i)})
		if err != nil || g.Generation == nil || g.Head == nil || g.Head.Gen != g.Generation.ID || g.Head.Seq < g.Generation.Seq {
			t.Fatalf("checkpoint %d over a kept connection: %+v, %v", i, g, err)
		}
		last = g.Head
	}
	if _, err := c.Rewind(ctx, api.RewindParams{Target: "nope"}); api.KindOf(err) != api.KindBadTarget {
		t.Fatalf("rewind to nope: %v; want kind bad_target", err)
	}
	s, err := api.Dial(ctx, socketOf(t, m.Store))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sub, err := s.Subscribe(ctx, api.SubscribeParams{})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := sub.Next(ctx); err != nil || ev.Type != api.EventInit || ev.Head != *last {
		t.Fatalf("first event %+v, %v; want init at %+v", ev, err, *last)
	}
	start := time.Now()
	m.Unmount()
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("unmount with two kept connections took %s", d)
	}
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			break // the stream ends with the daemon
		}
		if ev.Type == api.EventDropped {
			t.Errorf("subscriber dropped on unmount: %+v", ev)
		}
	}
	if err := c.Do(ctx, api.StatusParams{}, nil); err == nil {
		t.Errorf("status on the kept connection after unmount: answered")
	}
}
