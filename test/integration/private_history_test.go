package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// phStatus returns what `reynfs status --json` says of the private
// history, and the text status's views line.
func phStatus(t testing.TB, m *Mount) (bool, string) {
	t.Helper()
	r := m.Run("status", m.Dir, "--store", m.Store, "--json")
	if r.Code != 0 {
		t.Fatalf("reynfs status --json: exit %d: %s", r.Code, r.Stderr)
	}
	var st struct {
		Private *bool `json:"private_history"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || st.Private == nil {
		t.Fatalf("reynfs status --json: no private_history (%v): %q", err, r.Stdout)
	}
	r = m.Run("status", m.Dir, "--store", m.Store)
	for _, line := range strings.Split(r.Stdout, "\n") {
		if strings.HasPrefix(line, "views:") {
			return *st.Private, line
		}
	}
	t.Fatalf("reynfs status: no views line: %q", r.Stdout)
	return false, ""
}

// TestPrivateHistoryRemembered: --private-history is remembered in the
// store like --views-name: a later mount without the flag keeps the views
// from user nobody (it used to open them again), status says so, and
// --private-history=false turns it off.
func TestPrivateHistoryRemembered(t *testing.T) {
	requireNobody(t)
	dir := vhProject(t)
	writeFile(t, filepath.Join(dir, "pub"), []byte("public\n"), 0o644)
	m := mountProjectArgs(t, dir, "--private-history")
	vhCheckpoint(t, m, "one")
	denied(t, m.Dir, "ls .reynfs", "mounted with --private-history")
	m.Unmount()

	m.Mount() // no flag: the store remembers
	allowed(t, m.Dir, "cat pub", "public\n")
	denied(t, m.Dir, "ls .reynfs", "remounted without the flag")
	denied(t, m.Dir, "cat .reynfs/generations/g1/pub", "remounted without the flag")
	if on, line := phStatus(t, m); !on || !strings.Contains(line, "private") {
		t.Errorf("status after a remount without the flag: private_history %v, %q; want true and a views line that says private", on, line)
	}
	m.Unmount()
	r := m.Run("status", "--store", m.Store, "--json") // exit 5: no daemon
	if r.Code != 5 || !strings.Contains(r.Stdout, `"private_history": true`) {
		t.Errorf("status of the unmounted store: exit %d, %q, %s; want exit 5 and private_history true", r.Code, r.Stdout, r.Stderr)
	}

	if r := m.Run("mount", m.Dir, "--store", m.Store, "--private-history=false"); r.Code != 0 {
		t.Fatalf("reynfs mount --private-history=false: exit %d: %s", r.Code, r.Stderr)
	}
	m.pid = m.Pid()
	allowed(t, m.Dir, "ls .reynfs", "generations\nseq\ntimeline\n")
	if on, line := phStatus(t, m); on || strings.Contains(line, "private") {
		t.Errorf("status after --private-history=false: private_history %v, %q; want false", on, line)
	}
	m.Unmount()
	m.Mount() // off is remembered too
	allowed(t, m.Dir, "cat .reynfs/generations/g1/pub", "public\n")
	m.Unmount()
}
