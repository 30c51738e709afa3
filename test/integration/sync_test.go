package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore/objstoretest"
)

// remoteJSON is one remote of `reynfs status --json`.
type remoteJSON struct {
	Name       string  `json:"name"`
	WS         string  `json:"ws"`
	Mode       string  `json:"mode"`
	State      string  `json:"state"`
	Shipped    uint64  `json:"shipped"`
	Durable    uint64  `json:"durable"`
	LagRecords uint64  `json:"lag_records"`
	LagSeconds float64 `json:"lag_seconds"`
	Pending    int64   `json:"pending_bytes"`
	LastError  string  `json:"last_error"`
	Reason     string  `json:"reason"`
	HoldsFloor bool    `json:"holds_floor"`
	FloorSeq   uint64  `json:"floor_seq"`
}

type statusJSON struct {
	Pid     int          `json:"pid"`
	HeadSeq uint64       `json:"head_seq"`
	Remotes []remoteJSON `json:"remotes"`
}

func syncStatus(t testing.TB, m *Mount) statusJSON {
	t.Helper()
	r := m.Run("status", m.Dir, "--store", m.Store, "--json")
	if r.Code != 0 {
		t.Fatalf("reynfs status: exit %d: %s", r.Code, r.Stderr)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
		t.Fatalf("status --json: %v: %q", err, r.Stdout)
	}
	return st
}

// syncedMount mounts a new project with a remote named origin at url and
// --sync continuous (extra: more mount flags). The remote is added
// unmounted here (TestRemoteMountedFlow adds one to a mounted store).
func syncedMount(t *testing.T, url string, extra ...string) *Mount {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "README"), []byte("synced\n"), 0o644)
	m := mountProject(t, dir)
	m.Unmount()
	if r := m.Run("remote", "add", "origin", url, "--dir", m.Dir, "--store", m.Store); r.Code != 0 {
		t.Fatalf("remote add: exit %d: %s", r.Code, r.Stderr)
	}
	m.mountWith(append([]string{"--sync", "continuous"}, extra...)...)
	return m
}

// mountWith mounts with extra flags and waits until it is served.
func (m *Mount) mountWith(flags ...string) {
	m.t.Helper()
	r := m.Run(append([]string{"mount", m.Dir, "--store", m.Store}, flags...)...)
	if r.Code != 0 {
		m.t.Fatalf("reynfs mount %v: exit %d: %s%s\nlog:\n%s", flags, r.Code, r.Stdout, r.Stderr, m.LogTail(10))
	}
	m.pid = m.Pid()
}

// waitRemote polls status until the remote holds seq.
func waitRemote(t *testing.T, m *Mount, seq uint64) remoteJSON {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := syncStatus(t, m)
		if len(st.Remotes) == 1 && st.Remotes[0].Shipped >= seq {
			return st.Remotes[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the remote never reached seq %d: %+v\nlog:\n%s", seq, st.Remotes, m.LogTail(10))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func fsyncWrite(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSyncMounted: a mount with --sync continuous ships fsynced writes
// without a push (status shows the remote catching up); push, sync and
// checkpoint --wait-remote through the daemon succeed; the choice is
// remembered by a plain mount and forgotten by --sync manual; a clone
// of the remote holds what was written. Bad flags exit 2 with one line.
func TestSyncMounted(t *testing.T) {
	requireFUSE(t)
	remote := t.TempDir()
	url := "file://" + remote
	m := syncedMount(t, url)
	fsyncWrite(t, filepath.Join(m.Dir, "a.txt"), []byte("first\n"))
	st := syncStatus(t, m)
	r := waitRemote(t, m, st.HeadSeq)
	if r.Name != "origin" || r.Mode != "continuous" || r.WS != "proj" {
		t.Fatalf("status remote: %+v", r)
	}
	for _, args := range [][]string{
		{"sync", "--dir", m.Dir, "--timeout", "30s"},
		{"push", "--dir", m.Dir},
		{"checkpoint", "-m", "synced", "--wait-remote", "--dir", m.Dir},
	} {
		fsyncWrite(t, filepath.Join(m.Dir, "b.txt"), []byte(strings.Join(args, " ")))
		res := m.Run(args...)
		if res.Code != 0 {
			t.Fatalf("reynfs %s: exit %d: %s\nlog:\n%s", strings.Join(args, " "), res.Code, res.Stderr, m.LogTail(10))
		}
		if head := syncStatus(t, m); head.Remotes[0].Shipped < head.HeadSeq-1 && args[0] != "checkpoint" {
			t.Fatalf("after %s the remote holds %d of %d", args[0], head.Remotes[0].Shipped, head.HeadSeq)
		}
	}
	text := m.Run("status", m.Dir, "--store", m.Store)
	if !strings.Contains(text.Stdout, "remote:   origin#proj") || !strings.Contains(text.Stdout, "continuous") {
		t.Fatalf("status does not show the sync:\n%s", text.Stdout)
	}
	m.Unmount()
	m.Mount() // no flag: still continuous
	if st := syncStatus(t, m); len(st.Remotes) != 1 || st.Remotes[0].Mode != "continuous" {
		t.Fatalf("a plain mount forgot --sync continuous: %+v", st.Remotes)
	}
	m.Unmount()
	m.mountWith("--sync", "manual")
	if st := syncStatus(t, m); len(st.Remotes) != 1 || st.Remotes[0].Mode != "manual" || st.Remotes[0].Shipped == 0 {
		t.Fatalf("--sync manual: %+v", st.Remotes)
	}
	// Without a continuous sync, push and sync through the daemon push
	// from the live journal.
	fsyncWrite(t, filepath.Join(m.Dir, "a.txt"), []byte("pushed while mounted\n"))
	if res := m.Run("push", "--dir", m.Dir); res.Code != 0 || !strings.Contains(res.Stdout, "pushed seqs") {
		t.Fatalf("mounted push: exit %d: %s%s", res.Code, res.Stdout, res.Stderr)
	}
	writeFile(t, filepath.Join(m.Dir, "c.txt"), []byte("not fsynced; sync makes it durable\n"), 0o644)
	if res := m.Run("sync", "origin", "--dir", m.Dir, "--json"); res.Code != 0 {
		t.Fatalf("mounted sync without a continuous sync: exit %d: %s", res.Code, res.Stderr)
	}
	if st := syncStatus(t, m); st.Remotes[0].Shipped != st.HeadSeq {
		t.Fatalf("after sync the remote holds %d of %d", st.Remotes[0].Shipped, st.HeadSeq)
	}
	m.Unmount()

	clone := filepath.Join(t.TempDir(), "copy")
	cenv := testEnv(t)
	if res := runReynfs(cenv, "clone", url+"#proj", clone); res.Code != 0 {
		t.Fatalf("clone: exit %d: %s", res.Code, res.Stderr)
	}
	for _, name := range []string{"README", "a.txt", "b.txt", "c.txt"} {
		want, err := os.ReadFile(filepath.Join(m.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(clone, name)); err != nil || string(got) != string(want) {
			t.Errorf("the clone's %s: %q, %v; want %q", name, got, err, want)
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sync", "sometimes"}, "want continuous or manual"},
		{[]string{"--sync", "continuous", "--remote", "nope"}, "no remote nope"},
		{[]string{"--remote", "origin"}, "goes with --sync continuous"},
	} {
		res := m.Run(append([]string{"mount", m.Dir, "--store", m.Store}, c.args...)...)
		if res.Code != 2 || !strings.Contains(res.Stderr, c.want) || strings.Count(strings.TrimSpace(res.Stderr), "\n") > 0 {
			t.Errorf("mount %v: exit %d, %q; want exit 2 and one line with %q", c.args, res.Code, res.Stderr, c.want)
		}
		if isMounted(m.Dir) {
			m.Unmount()
		}
	}
	// Removing the remote ends a remembered sync, with a warning.
	m.mountWith("--sync", "continuous")
	m.Unmount()
	if r := m.Run("remote", "remove", "origin", "--dir", m.Dir, "--store", m.Store); r.Code != 0 {
		t.Fatalf("remote remove: exit %d: %s", r.Code, r.Stderr)
	}
	res := m.Run("mount", m.Dir, "--store", m.Store)
	if res.Code != 0 || !strings.Contains(res.Stderr, "remote origin was removed: syncing is off") {
		t.Fatalf("mount after remote remove: exit %d: %q", res.Code, res.Stderr)
	}
	m.pid = m.Pid()
	if st := syncStatus(t, m); len(st.Remotes) != 0 {
		t.Fatalf("remotes after remote remove: %+v", st.Remotes)
	}
}

// TestSyncRetention: while the remote is gone, gc keeps the records it
// has not received (the floor names the remote), a sync fails with a
// line saying so, and the unmount warns what stays unshipped; once the
// remote is back (a later mount ships the rest), gc drops them.
func TestSyncRetention(t *testing.T) {
	requireFUSE(t)
	remote := filepath.Join(t.TempDir(), "remote")
	if err := os.Mkdir(remote, 0o755); err != nil {
		t.Fatal(err)
	}
	m := syncedMount(t, "file://"+remote, "--sync-drain", "1s")
	retainRun(t, m, "retention", "set", "--seqs", "1", "--generations", "1", "--every", "1h")
	st := syncStatus(t, m)
	shipped := waitRemote(t, m, st.HeadSeq).Shipped
	// The remote goes away: a copy is kept aside and the directory the
	// daemon has open is removed, so every request fails.
	backup := remote + ".backup"
	sh(t, "/", nil, fmt.Sprintf("cp -a %s %s && rm -rf %s", remote, backup, remote))
	for i := range 3 {
		fsyncWrite(t, filepath.Join(m.Dir, fmt.Sprintf("f%d", i)), []byte(strings.Repeat("x", 1000*(i+1))))
		checkpointSeq(t, m, fmt.Sprintf("c%d", i))
	}
	deadline := time.Now().Add(30 * time.Second)
	for syncStatus(t, m).Remotes[0].State != "backing-off" {
		if time.Now().After(deadline) {
			t.Fatalf("the sync never noticed the remote is gone: %+v", syncStatus(t, m).Remotes)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res := m.Run("sync", "--dir", m.Dir, "--timeout", "20s")
	if res.Code == 0 || !strings.Contains(res.Stderr, "unreachable") || strings.Count(strings.TrimSpace(res.Stderr), "\n") > 0 {
		t.Fatalf("sync to a down remote: exit %d, %q; want a failure, one line", res.Code, res.Stderr)
	}
	var g gcJSON
	if err := json.Unmarshal([]byte(retainRun(t, m, "gc", "--json")), &g); err != nil {
		t.Fatal(err)
	}
	if g.Floor > shipped+1 || !strings.Contains(g.Floors.By, "remote origin") {
		t.Fatalf("gc with the remote behind (shipped %d): floor %d by %q; want at most %d, by the remote", shipped, g.Floor, g.Floors.By, shipped+1)
	}
	t.Logf("gc with the remote down: floor %d by %s", g.Floor, g.Floors.By)
	res = m.Run("unmount", m.Dir, "--store", m.Store) // --sync-drain 1s bounds its wait
	if res.Code != 0 || !strings.Contains(res.Stderr, "not shipped") || !strings.Contains(res.Stderr, "reynfs push origin") {
		t.Fatalf("unmount with the remote down: exit %d, %q; want a warning naming the lag and push", res.Code, res.Stderr)
	}
	m.waitDaemonGone()
	if err := os.Rename(backup, remote); err != nil {
		t.Fatal(err)
	}
	m.Mount() // remembered: continuous
	if res := m.Run("sync", "--dir", m.Dir, "--timeout", "60s"); res.Code != 0 {
		t.Fatalf("sync after the remote came back: exit %d: %s\nlog:\n%s", res.Code, res.Stderr, m.LogTail(10))
	}
	if err := json.Unmarshal([]byte(retainRun(t, m, "gc", "--json")), &g); err != nil {
		t.Fatal(err)
	}
	if g.Floor <= shipped+1 {
		t.Fatalf("gc after the remote caught up: floor %d by %q; want past %d", g.Floor, g.Floors.By, shipped+1)
	}
}

// TestSyncKill9: kill -9 of a continuously syncing daemon mid-stream; a
// clone of the remote holds a prefix of the acknowledged writes (each
// file as written, in order; nothing never written) and lags the last
// acknowledged one by at most about the shipper's period.
func TestSyncKill9(t *testing.T) {
	requireFUSE(t)
	remote := t.TempDir()
	url := "file://" + remote
	m := syncedMount(t, url)
	content := func(i int) []byte { return []byte(fmt.Sprintf("file %d\n%s", i, strings.Repeat("z", i%7*1000))) }
	acked := map[int]time.Time{}
	killAt := time.Now().Add(3 * time.Second)
	n := 0
	for ; time.Now().Before(killAt); n++ {
		fsyncWrite(t, filepath.Join(m.Dir, fmt.Sprintf("f%05d", n)), content(n))
		acked[n] = time.Now()
		time.Sleep(5 * time.Millisecond)
	}
	m.Kill9()
	killed := time.Now()
	clone := filepath.Join(t.TempDir(), "copy")
	if res := runReynfs(testEnv(t), "clone", url+"#proj", clone); res.Code != 0 {
		t.Fatalf("clone: exit %d: %s", res.Code, res.Stderr)
	}
	ents, err := os.ReadDir(clone)
	if err != nil {
		t.Fatal(err)
	}
	have := map[int]bool{}
	for _, e := range ents {
		var i int
		if _, err := fmt.Sscanf(e.Name(), "f%05d", &i); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(clone, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := acked[i]; !ok {
			t.Fatalf("the clone has %s, never acknowledged", e.Name())
		}
		if string(b) != string(content(i)) && len(b) != 0 {
			t.Fatalf("the clone's %s holds %q: not a state that was written", e.Name(), b)
		}
		have[i] = len(b) != 0
	}
	last := -1
	for i := 0; i < n; i++ {
		if _, ok := have[i]; !ok {
			break
		}
		last = i
	}
	for i := range have {
		if i > last {
			t.Fatalf("the clone has f%05d but not f%05d: not a prefix", i, last+1)
		}
	}
	for i := 0; i < last; i++ {
		if !have[i] {
			t.Fatalf("f%05d is empty in the clone, but later files are there", i)
		}
	}
	var lag time.Duration
	if last < n-1 {
		lag = acked[n-1].Sub(acked[max(last, 0)])
	}
	t.Logf("%d files acknowledged in 3 s; the clone holds %d; lag behind the last acknowledged: %s (killed %s after it)", n, last+1, lag, killed.Sub(acked[n-1]))
	if last < 0 || lag > 2500*time.Millisecond {
		t.Fatalf("the remote lags the last acknowledged write by %s (%d of %d files): more than the shipper's 1 s period and a ship", lag, last+1, n)
	}
	// The store mounted again on this host takes its dead daemon's
	// unexpired lease back and ships the rest.
	m.Mount()
	if res := m.Run("sync", "--dir", m.Dir, "--timeout", "60s"); res.Code != 0 {
		t.Fatalf("sync after the restart: exit %d: %s\nlog:\n%s", res.Code, res.Stderr, m.LogTail(10))
	}
}

// TestSyncVersity: a continuous sync to an S3 server (versity gateway)
// with its credentials only in the mount command's environment: the
// daemon inherits them and ships.
func TestSyncVersity(t *testing.T) {
	requireFUSE(t)
	g := objstoretest.StartS3(t)
	url := g.NewBucket(t)
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := mountProject(t, dir)
	m.Unmount()
	m.env = append(m.env, "AWS_ACCESS_KEY_ID="+g.Access, "AWS_SECRET_ACCESS_KEY="+g.Secret, "AWS_REGION=us-east-1",
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(g.Dir, "none"))
	if r := m.Run("remote", "add", "origin", url, "--dir", m.Dir, "--store", m.Store); r.Code != 0 {
		t.Fatalf("remote add: exit %d: %s", r.Code, r.Stderr)
	}
	m.mountWith("--sync", "continuous")
	fsyncWrite(t, filepath.Join(m.Dir, "s3.txt"), []byte("over s3\n"))
	if res := m.Run("sync", "--dir", m.Dir, "--timeout", "60s"); res.Code != 0 {
		t.Fatalf("sync: exit %d: %s\nlog:\n%s", res.Code, res.Stderr, m.LogTail(10))
	}
	m.Unmount()
	clone := filepath.Join(t.TempDir(), "copy")
	if res := runReynfs(m.env, "clone", url+"#proj", clone); res.Code != 0 {
		t.Fatalf("clone: exit %d: %s", res.Code, res.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(clone, "s3.txt")); err != nil || string(b) != "over s3\n" {
		t.Fatalf("the clone's s3.txt: %q, %v", b, err)
	}
}
