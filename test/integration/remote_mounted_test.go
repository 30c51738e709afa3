package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runWant runs reynfs with the mount's environment and wants exit 0 and
// every string of want in its stdout.
func runWant(t *testing.T, m *Mount, want []string, args ...string) string {
	t.Helper()
	r := m.Run(args...)
	if r.Code != 0 {
		t.Fatalf("reynfs %s: exit %d: %s%s\nlog:\n%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr, m.LogTail(10))
	}
	for _, w := range want {
		if !strings.Contains(r.Stdout, w) {
			t.Fatalf("reynfs %s: stdout %q lacks %q", strings.Join(args, " "), r.Stdout, w)
		}
	}
	return r.Stdout
}

// mustRefuse wants a non-zero exit code and one line on stderr with want.
func mustRefuse(t *testing.T, m *Mount, code int, want string, args ...string) {
	t.Helper()
	r := m.Run(args...)
	if r.Code != code || !strings.Contains(r.Stderr, want) || strings.Count(strings.TrimSpace(r.Stderr), "\n") > 0 {
		t.Fatalf("reynfs %s: exit %d, %q; want exit %d and one line with %q", strings.Join(args, " "), r.Code, r.Stderr, code, want)
	}
}

// remoteWS reads log --remote origin --ws proj --json.
func remoteWS(t *testing.T, m *Mount) (floor uint64, gens []int) {
	t.Helper()
	var w struct {
		Floor uint64 `json:"floor"`
		Gens  []struct {
			ID int `json:"id"`
		} `json:"gens"`
	}
	out := runWant(t, m, nil, "log", "--remote", "origin", "--ws", "proj", "--json", "--dir", m.Dir)
	if err := json.Unmarshal([]byte(out), &w); err != nil {
		t.Fatalf("log --remote --ws --json: %v: %q", err, out)
	}
	for _, g := range w.Gens {
		gens = append(gens, g.ID)
	}
	return w.Floor, gens
}

// TestRemoteMountedFlow: a new user's flow without ever unmounting:
// mount, remote add, push (with a branch name: its count printed as
// unmounted), sync, log --remote, fsck --remote, forget --remote (no
// sync running: in the CLI), sync --continuous,
// forget --remote under the continuous sync (through its lease: the
// sync keeps running and its later ships keep the floor), fetch
// refused and fetch --all read, remote remove refused while the sync
// ships to it, sync --manual, remote remove, status; a second store's
// sync --continuous to the same workspace fails at once. Bad input (an
// unknown remote, a bad URL or name, a duplicate name) is one line,
// exit 2, and changes nothing.
func TestRemoteMountedFlow(t *testing.T) {
	requireFUSE(t)
	remote := filepath.Join(t.TempDir(), "remote")
	if err := os.Mkdir(remote, 0o755); err != nil {
		t.Fatal(err)
	}
	url := "file://" + remote
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "README"), []byte("new user\n"), 0o644)
	m := mountProject(t, dir)
	d := []string{"--dir", m.Dir}
	with := func(args ...string) []string { return append(args, d...) }

	// Bad input, mounted: one line, exit 2, nothing changed.
	mustRefuse(t, m, 2, "no such directory", with("remote", "add", "origin", "file://"+remote+"-missing")...)
	mustRefuse(t, m, 2, "remote ", with("remote", "add", "no/slash", url)...)
	mustRefuse(t, m, 2, "no remote nope", with("remote", "remove", "nope")...)
	mustRefuse(t, m, 2, "no remote nope", with("log", "--remote", "nope")...)
	mustRefuse(t, m, 2, "no remote nope", "fsck", m.Dir, "--remote", "nope")
	if out := runWant(t, m, nil, with("remote", "list")...); out != "" {
		t.Fatalf("remote list after refused adds: %q", out)
	}

	runWant(t, m, []string{"remote origin: " + url}, with("remote", "add", "origin", url)...)
	mustRefuse(t, m, 2, "remote origin exists already", with("remote", "add", "origin", "file://"+t.TempDir())...)
	runWant(t, m, []string{"origin\t" + url + "\n"}, with("remote", "list")...)

	fsyncWrite(t, filepath.Join(m.Dir, "a.txt"), []byte("one\n"))
	checkpointSeq(t, m, "one") // g2
	runWant(t, m, nil, with("branch", "first")...)
	runWant(t, m, []string{"pushed seqs 1-", "to " + url + "#proj", "; 1 branch names"}, with("push")...)
	fsyncWrite(t, filepath.Join(m.Dir, "b.txt"), []byte("two\n"))
	checkpointSeq(t, m, "two") // g3
	writeFile(t, filepath.Join(m.Dir, "c.txt"), []byte("not fsynced: sync makes it durable\n"), 0o644)
	runWant(t, m, []string{"origin (" + url + "#proj) holds seq"}, with("sync", "--timeout", "30s")...)
	if st := syncStatus(t, m); len(st.Remotes) != 1 || st.Remotes[0].Mode != "manual" || st.Remotes[0].Shipped != st.HeadSeq {
		t.Fatalf("status after sync: head %d, remotes %+v", st.HeadSeq, st.Remotes)
	}
	runWant(t, m, []string{"proj ", "3 generations"}, with("log", "--remote", "origin")...)
	runWant(t, m, []string{"* g3", "* g2", "* g1"}, with("log", "--remote", "origin", "--ws", "proj")...)
	runWant(t, m, []string{"remote " + url + ": clean: 1 workspaces"}, "fsck", m.Dir, "--remote", "origin")
	// Mounted without a continuous sync, forget runs in the CLI (no
	// lease is held between pushes).
	runWant(t, m, []string{url + "#proj keeps history from g2", "1 generations forgotten"}, with("forget", "--remote", "origin", "g2")...)

	// Continuous sync, turned on without a remount.
	runWant(t, m, []string{"continuous sync to origin (" + url + "#proj) started"}, with("sync", "--continuous")...)
	runWant(t, m, []string{"origin\t" + url + "\t(continuous sync of proj)"}, with("remote", "list")...)
	st := syncStatus(t, m)
	waitRemote(t, m, st.HeadSeq)
	if r := syncStatus(t, m).Remotes[0]; r.Mode != "continuous" || r.State == "stopped" {
		t.Fatalf("status after sync --continuous: %+v", r)
	}
	// forget under the sync's lease: it goes through the sync.
	runWant(t, m, []string{url + "#proj keeps history from g3", "1 generations forgotten"}, with("forget", "--remote", "origin", "g3")...)
	if floor, gens := remoteWS(t, m); len(gens) != 1 || gens[0] != 3 || floor == 0 {
		t.Fatalf("after forget g3: floor %d, generations %v; want g3 only", floor, gens)
	}
	floor, _ := remoteWS(t, m)
	fsyncWrite(t, filepath.Join(m.Dir, "d.txt"), []byte("after the forget\n"))
	checkpointSeq(t, m, "four") // g4
	runWant(t, m, []string{"holds seq"}, with("sync", "--timeout", "30s")...)
	if f, gens := remoteWS(t, m); f != floor || len(gens) != 2 || gens[0] != 3 || gens[1] != 4 {
		t.Fatalf("after more ships: floor %d (was %d), generations %v; want the floor kept, g3 g4", f, floor, gens)
	}
	if r := syncStatus(t, m).Remotes[0]; r.Mode != "continuous" || r.State == "stopped" || r.Reason != "" {
		t.Fatalf("the sync after the forget: %+v", r)
	}
	runWant(t, m, []string{": clean: "}, "fsck", m.Dir, "--remote", "origin")
	mustRefuse(t, m, 2, "no generation g9", with("forget", "--remote", "origin", "g9")...)

	// fetch: refused while mounted; --all reads the heads.
	mustRefuse(t, m, 3, "fetch brings an unmounted clone up to date", with("fetch")...)
	runWant(t, m, []string{"proj ", "locked by"}, with("fetch", "--all")...)

	mustRefuse(t, m, 2, "'reynfs sync --manual'", with("remote", "remove", "origin")...)
	runWant(t, m, []string{"continuous sync to origin#proj stopped"}, with("sync", "--manual")...)
	if r := syncStatus(t, m).Remotes; len(r) != 1 || r[0].Mode != "manual" {
		t.Fatalf("status after sync --manual: %+v", r)
	}
	runWant(t, m, []string{"removed remote origin"}, with("remote", "remove", "origin")...)
	if out := runWant(t, m, nil, with("remote", "list")...); out != "" {
		t.Fatalf("remote list after remove: %q", out)
	}
	if r := syncStatus(t, m).Remotes; len(r) != 0 {
		t.Fatalf("status after remote remove: %+v", r)
	}
	out := runWant(t, m, []string{"mount:    " + m.Dir, "head seq:"}, "status", m.Dir, "--store", m.Store)
	if strings.Contains(out, "remote:") {
		t.Fatalf("status still names a remote:\n%s", out)
	}

	// Another store's workspace of the same name: sync --continuous says
	// at once that the sync stopped, and why.
	dir2 := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir2, 0o755); err != nil {
		t.Fatal(err)
	}
	m2 := mountProject(t, dir2)
	runWant(t, m2, nil, "remote", "add", "origin", url, "--dir", m2.Dir)
	mustRefuse(t, m2, 1, "stopped at once: ", "sync", "--continuous", "--dir", m2.Dir)
	if r := syncStatus(t, m2).Remotes; len(r) != 1 || r[0].State != "stopped" || !strings.Contains(r[0].Reason, "another store") {
		t.Fatalf("status of a sync to another store's workspace: %+v", r)
	}
	runWant(t, m2, []string{"continuous sync to origin#proj stopped"}, "sync", "--manual", "--dir", m2.Dir)
}
