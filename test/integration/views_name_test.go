package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// viewsNameOf is the views name `reynfs status --json` reports (an
// unmounted store's status exits 5 and still describes it).
func viewsNameOf(t testing.TB, m *Mount, mounted bool) string {
	t.Helper()
	r := m.Run("status", m.Dir, "--store", m.Store, "--json")
	if want := map[bool]int{true: 0, false: 5}[mounted]; r.Code != want {
		t.Fatalf("reynfs status --json (mounted %v): exit %d, want %d: %s", mounted, r.Code, want, r.Stderr)
	}
	var st struct {
		ViewsName string `json:"views_name"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
		t.Fatalf("reynfs status --json: %v: %q", err, r.Stdout)
	}
	return st.ViewsName
}

// TestViewsNameRemembered: the views name a mount was given is the store's
// from then on. A project with its own .reynfs mounted once with
// --views-name h mounts again without the flag, with the views under h and
// its .reynfs an ordinary directory that restore brings back from the past
// (restore follows the views' name, not .reynfs); the timeline and status
// name h. A later mount with another name uses and remembers that one, and
// a project that grows an entry of the remembered name is refused.
func TestViewsNameRemembered(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".reynfs", "x"), []byte("v1\n"), 0o644)
	m := mountProjectArgs(t, dir, "--views-name", "h")
	vhCheckpoint(t, m, "one") // g2
	shTimeout(t, m.Dir, "echo v2 > .reynfs/x")
	m.Unmount()
	if got := viewsNameOf(t, m, false); got != "h" {
		t.Errorf("status of the unmounted store: views %q, want h", got)
	}

	m.Mount() // no --views-name: the store remembers h
	out := shTimeout(t, m.Dir, `ls -A; cat .reynfs/x; ls h; cat h/generations/g2/.reynfs/x; grep -c 'browse h/generations' h/timeline`)
	if want := ".reynfs\nv2\ngenerations\nseq\ntimeline\nv1\n1\n"; out != want {
		t.Errorf("remount without --views-name: ls -A, .reynfs/x, ls h, the past .reynfs/x, the timeline's hint:\n%q\nwant\n%q", out, want)
	}
	r := m.Run("restore", filepath.Join(m.Dir, ".reynfs", "x"), "--from", "g2")
	if r.Code != 0 {
		t.Errorf("restore .reynfs/x --from g2 with the views named h: exit %d: %s", r.Code, r.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, ".reynfs", "x")); err != nil || string(b) != "v1\n" {
		t.Errorf("after restore: .reynfs/x = %q, %v; want v1", b, err)
	}
	if r := m.Run("restore", filepath.Join(m.Dir, "h", "generations"), "--from", "g2"); r.Code != 2 || !strings.Contains(r.Stderr, "history views") {
		t.Errorf("restore h/generations: exit %d, %q; want exit 2 naming the history views", r.Code, r.Stderr)
	}
	if r := m.Run("status", m.Dir, "--store", m.Store); r.Code != 0 || !strings.Contains(r.Stdout, "views:    h/") {
		t.Errorf("status: exit %d, %q; want a line naming the views h/", r.Code, r.Stdout)
	}
	if got := viewsNameOf(t, m, true); got != "h" {
		t.Errorf("status --json: views %q, want h", got)
	}
	m.Unmount()

	// Another name replaces the remembered one.
	r = m.Run("mount", m.Dir, "--store", m.Store, "--views-name", "past")
	if r.Code != 0 {
		t.Fatalf("mount --views-name past: exit %d: %s", r.Code, r.Stderr)
	}
	m.pid = m.Pid()
	m.Unmount()
	m.Mount()
	if out := shTimeout(t, m.Dir, "ls past; ls -A; test ! -e h && echo no-h"); out != "generations\nseq\ntimeline\n.reynfs\nno-h\n" {
		t.Errorf("remount after --views-name past: %q; want the views under past, none under h", out)
	}
	if got := viewsNameOf(t, m, true); got != "past" {
		t.Errorf("status --json: views %q, want past", got)
	}
	m.Unmount()

	// The remembered name is checked like a given one: a project that
	// grew an entry of that name while unmounted is refused, not shadowed.
	if err := os.Mkdir(filepath.Join(dir, "past"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = m.Run("mount", m.Dir, "--store", m.Store)
	if r.Code != 2 || isMounted(m.Dir) || !strings.Contains(r.Stderr, "own past") || !strings.Contains(r.Stderr, "--views-name") {
		t.Errorf("mount over a project with its own past, the remembered views name: exit %d, %q; want exit 2 naming past and --views-name", r.Code, r.Stderr)
	}
}
