package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Rewind tests (issue 3: rewind, nested rewind, crash mid-rewind, cache
// coherence, bad input, offline rewind, git and sqlite3 rewound).

// rwState is a tree as the rewind tests compare it, by path relative to
// the root: a file's content, rwDir for a directory, "-> target" after
// rwLink for a symlink.
type rwState map[string]string

const (
	rwDir  = "\x00dir"
	rwLink = "\x00-> "
)

// rwRead reads the tree under root (readdir does not list .reynfs).
func rwRead(t testing.TB, root string) rwState {
	t.Helper()
	s := rwState{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir():
			s[rel] = rwDir
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			s[rel] = rwLink + l
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading tree %s: %v", root, err)
	}
	return s
}

func rwShow(v string, ok bool) string {
	switch {
	case !ok:
		return "(absent)"
	case v == rwDir:
		return "(dir)"
	case strings.HasPrefix(v, rwLink):
		return "(symlink " + strings.TrimPrefix(v, rwLink) + ")"
	case len(v) > 60:
		return fmt.Sprintf("%q... (%d bytes)", v[:60], len(v))
	}
	return fmt.Sprintf("%q", v)
}

// rwDiff lists the differences between want and got, sorted by path.
func rwDiff(want, got rwState) []string {
	var d []string
	keys := slices.Sorted(maps.Keys(want))
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		w, wok := want[k]
		g, gok := got[k]
		if wok != gok || w != g {
			d = append(d, fmt.Sprintf("%s: want %s, got %s", k, rwShow(w, wok), rwShow(g, gok)))
		}
	}
	return d
}

// rwExpect fails the test now when the tree under root is not want.
func rwExpect(t testing.TB, root string, want rwState, when string) {
	t.Helper()
	if d := rwDiff(want, rwRead(t, root)); len(d) > 0 {
		t.Fatalf("%s: tree %s differs from the expected state:\n%s", when, root, truncList(d, 20))
	}
}

// rwApply makes the tree under root equal to s (files and directories):
// removes what s lacks, writes what differs, and syncs written files.
func rwApply(t testing.TB, root string, s rwState) {
	t.Helper()
	cur := rwRead(t, root)
	gone := slices.Sorted(maps.Keys(cur))
	slices.Reverse(gone) // children before parents
	for _, k := range gone {
		if _, ok := s[k]; !ok {
			if err := os.Remove(filepath.Join(root, k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s)) {
		v, p := s[k], filepath.Join(root, k)
		if cv, ok := cur[k]; ok && cv == v {
			continue
		}
		switch {
		case v == rwDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(v, rwLink):
			_ = os.Remove(p)
			if err := os.Symlink(strings.TrimPrefix(v, rwLink), p); err != nil {
				t.Fatal(err)
			}
		default:
			rwWriteSync(t, p, v)
		}
	}
}

// rwWriteSync writes a file and fsyncs it.
func rwWriteSync(t testing.TB, p, content string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		t.Fatalf("fsync %s: %v", p, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// rwHead is the head seq the daemon reports.
func rwHead(t testing.TB, m *Mount) uint64 {
	t.Helper()
	r := m.Run("status", m.Dir, "--store", m.Store, "--json")
	var st struct {
		Head uint64 `json:"head_seq"`
	}
	if r.Code != 0 {
		t.Fatalf("reynfs status: exit %d: %s", r.Code, r.Stderr)
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || st.Head == 0 {
		t.Fatalf("reynfs status --json: %v: %q", err, r.Stdout)
	}
	return st.Head
}

// rwCheckpoint cuts a generation labelled label and returns its seq.
func rwCheckpoint(t testing.TB, m *Mount, label string) uint64 {
	t.Helper()
	r := m.Run("checkpoint", "-m", label, "--store", m.Store)
	if r.Code != 0 {
		t.Fatalf("reynfs checkpoint -m %s: exit %d: %s", label, r.Code, r.Stderr)
	}
	return rwHead(t, m)
}

// rwRewound is what reynfs rewind --json reports.
type rwRewound struct {
	Reset   uint64 `json:"reset_seq"`
	Target  uint64 `json:"target_seq"`
	Already bool   `json:"already"` // the workspace was at the target: nothing written
	Changes []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
}

// rwRewindArgs is the command line of a rewind of m to target.
func rwRewindArgs(m *Mount, target string, flags ...string) []string {
	args := append([]string{"rewind", "--store", m.Store}, flags...)
	return append(args, "--", target) // "--": a target may be -N
}

// rwRewind rewinds m to target, which must succeed.
func rwRewind(t testing.TB, m *Mount, target string) rwRewound {
	t.Helper()
	r := m.Run(rwRewindArgs(m, target, "--json")...)
	if r.Code != 0 {
		t.Fatalf("reynfs rewind %s: exit %d: %s%s", target, r.Code, r.Stderr, r.Stdout)
	}
	var res rwRewound
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("reynfs rewind %s --json: %v: %q", target, err, r.Stdout)
	}
	if (res.Reset == 0 && !res.Already) || res.Target == 0 {
		t.Fatalf("reynfs rewind %s --json: no reset or target seq: %s", target, r.Stdout)
	}
	return res
}

// rwTimeline is reynfs log --json.
type rwTimeline struct {
	Head uint64 `json:"head_seq"`
	Gens []struct {
		ID     int    `json:"id"`
		Seq    uint64 `json:"seq"`
		Kind   string `json:"kind"`
		Label  string `json:"label"`
		Active bool   `json:"active"`
	} `json:"generations"`
	Branches []struct {
		Reset  uint64 `json:"reset_seq"`
		Target uint64 `json:"target_seq"`
		From   uint64 `json:"from_seq"`
		To     uint64 `json:"to_seq"`
		Active bool   `json:"active"`
	} `json:"branches"`
}

func rwLog(t testing.TB, m *Mount, flags ...string) rwTimeline {
	t.Helper()
	r := m.Run(append([]string{"log", "--json", "--store", m.Store}, flags...)...)
	if r.Code != 0 {
		t.Fatalf("reynfs log --json %v: exit %d: %s", flags, r.Code, r.Stderr)
	}
	var l rwTimeline
	if err := json.Unmarshal([]byte(r.Stdout), &l); err != nil {
		t.Fatalf("reynfs log --json: %v: %q", err, r.Stdout)
	}
	return l
}

// rwMountEnv mounts m with extra environment for the daemon (a fault point).
func rwMountEnv(t testing.TB, m *Mount, extra ...string) {
	t.Helper()
	r := runReynfs(append(slices.Clone(m.env), extra...), "mount", m.Dir, "--store", m.Store)
	if r.Code != 0 {
		t.Fatalf("reynfs mount %s %v: exit %d: %s%s\nlog:\n%s", m.Dir, extra, r.Code, r.Stdout, r.Stderr, m.LogTail(10))
	}
	if !isMounted(m.Dir) {
		t.Fatalf("reynfs mount exited 0 but %s is not mounted", m.Dir)
	}
	m.pid = m.Pid()
}

// rwNewMount is a Mount of a fresh store not yet mounted.
func rwNewMount(t testing.TB, dir string) *Mount {
	requireFUSE(t)
	m := &Mount{t: t, Dir: dir, Store: filepath.Join(t.TempDir(), "store"), env: testEnv(t)}
	t.Cleanup(m.cleanup)
	return m
}

// rwRemountAfterCrash waits for the dead daemon and mounts again; reynfs
// mount must clear the dead mount itself.
func rwRemountAfterCrash(t testing.TB, m *Mount) {
	t.Helper()
	m.waitDaemonGone()
	if !isMounted(m.Dir) {
		t.Fatalf("after the daemon died, %s is not mounted any more (want a dead mount)", m.Dir)
	}
	m.Mount()
}

// rwRewindCrash runs a rewind that must kill the daemon (a fault point is
// set) and waits for it to die.
func rwRewindCrash(t testing.TB, m *Mount, target string) {
	t.Helper()
	r := m.Run(rwRewindArgs(m, target)...)
	if r.Code == 0 {
		t.Fatalf("reynfs rewind %s exited 0 although the daemon has a fault point set: %s", target, r.Stdout)
	}
	m.waitDaemonGone()
	if m.pid != 0 {
		t.Fatalf("daemon still alive after a rewind with a fault point")
	}
}

// TestRewindGit: a git repository with three commits, a checkpoint after
// each; rewind to the checkpoint before the last commit, then git log,
// status and fsck agree on two commits and the tree is exactly as it was
// (content, modes, mtimes); undoing the rewind brings the third commit back.
func TestRewindGit(t *testing.T) {
	requireTool(t, "git")
	m := mountProject(t, t.TempDir())
	checkFds(t)
	repo := filepath.Join(m.Dir, "repo")
	sh(t, m.Dir, gitEnv, "git init -q -b main repo")
	var snaps []map[string]entry
	for i := 1; i <= 3; i++ {
		writeFile(t, filepath.Join(repo, "file.txt"), []byte(fmt.Sprintf("version %d\n", i)), 0o644)
		writeFile(t, filepath.Join(repo, fmt.Sprintf("dir/only%d.txt", i)), []byte(strings.Repeat(fmt.Sprintf("commit %d\n", i), 500*i)), 0o644)
		if i == 3 {
			sh(t, repo, gitEnv, "git rm -q dir/only1.txt")
		}
		sh(t, repo, gitEnv, fmt.Sprintf("git add -A && git commit -q -m 'commit %d'", i))
		s, err := snapshot(m.Dir)
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, s)
		rwCheckpoint(t, m, fmt.Sprintf("commit-%d", i))
	}
	check := func(when string, commits int, content string) {
		t.Helper()
		out := sh(t, repo, gitEnv, "git log --format=%s")
		var want strings.Builder
		for i := commits; i >= 1; i-- {
			fmt.Fprintf(&want, "commit %d\n", i)
		}
		if out != want.String() {
			t.Errorf("%s: git log: got %q, want %q", when, out, want.String())
		}
		if n := strings.Count(sh(t, repo, gitEnv, "git log --oneline"), "\n"); n != commits {
			t.Errorf("%s: git log --oneline: %d lines, want %d", when, n, commits)
		}
		if st := sh(t, repo, gitEnv, "git status --porcelain"); st != "" {
			t.Errorf("%s: git status --porcelain not empty:\n%s", when, st)
		}
		if out := sh(t, repo, gitEnv, "git fsck --full --strict --no-progress 2>&1"); out != "" {
			t.Errorf("%s: git fsck --full: %s", when, out)
		}
		if b, err := os.ReadFile(filepath.Join(repo, "file.txt")); err != nil || string(b) != content {
			t.Errorf("%s: file.txt: %q, %v; want %q", when, b, err, content)
		}
	}
	check("before the rewind", 3, "version 3\n")
	before, err := snapshot(m.Dir) // the state the undo must restore
	if err != nil {
		t.Fatal(err)
	}

	res := rwRewind(t, m, "commit-2")
	now, err := snapshot(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := compareTrees(snaps[1], now, cmpOpts{mtime: true, dirNlink: true}); len(d) > 0 {
		t.Fatalf("after rewind to commit-2 the tree differs from the state at the checkpoint:\n%s", truncList(d, 20))
	}
	check("after rewind to commit-2", 2, "version 2\n")
	if _, err := os.Stat(filepath.Join(repo, "dir/only3.txt")); !os.IsNotExist(err) {
		t.Errorf("dir/only3.txt of commit 3 still there after the rewind: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(repo, "dir/only1.txt")); err != nil || !strings.HasPrefix(string(b), "commit 1\n") {
		t.Errorf("dir/only1.txt (removed by commit 3) not back after the rewind: %v", err)
	}

	// Undo: rewind to the seq just before the reset record.
	rwRewind(t, m, strconv.FormatUint(res.Reset-1, 10))
	now, err = snapshot(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := compareTrees(before, now, cmpOpts{mtime: true, dirNlink: true}); len(d) > 0 {
		t.Fatalf("undo (rewind %d) does not restore the state before the rewind:\n%s", res.Reset-1, truncList(d, 20))
	}
	check("after undo", 3, "version 3\n")

	// And the repository stays sound through write-back and remount.
	m.Unmount()
	check("written back", 3, "version 3\n")
	m.Mount()
	rwRewind(t, m, "commit-1")
	check("after rewind to commit-1 after remount", 1, "version 1\n")
}

// TestRewindSQLite: rows inserted in transactions with a checkpoint between
// them, in WAL and rollback-journal databases; every rewind gives a
// database that passes integrity_check with exactly the earlier rows.
func TestRewindSQLite(t *testing.T) {
	requireTool(t, "sqlite3")
	m := mountProject(t, t.TempDir())
	checkFds(t)
	modes := []string{"wal", "delete"}
	exec1 := func(mode, sql string) string {
		t.Helper()
		cmd := exec.Command("sqlite3", "-bail", filepath.Join(m.Dir, mode+".db"))
		cmd.Stdin = strings.NewReader(sql)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sqlite3 %s: %v\n%s", mode, err, out)
		}
		return string(out)
	}
	for _, mode := range modes {
		exec1(mode, fmt.Sprintf("PRAGMA journal_mode=%s;\nCREATE TABLE t(id INTEGER PRIMARY KEY, tx INTEGER, v TEXT, b BLOB);\n", mode))
	}
	const txs, rows = 4, 200
	seqs := make([]uint64, txs+1)
	seqs[0] = rwCheckpoint(t, m, "tx-0")
	for tx := 1; tx <= txs; tx++ {
		for _, mode := range modes {
			var sql strings.Builder
			sql.WriteString("BEGIN;\n")
			for i := 0; i < rows; i++ {
				fmt.Fprintf(&sql, "INSERT INTO t(tx, v, b) VALUES(%d, 'row %d-%d', randomblob(%d));\n", tx, tx, i, 50+(tx*rows+i)%2000)
			}
			if tx == 3 {
				sql.WriteString("DELETE FROM t WHERE id % 5 = 0;\n")
			}
			sql.WriteString("COMMIT;\n")
			exec1(mode, sql.String())
		}
		seqs[tx] = rwCheckpoint(t, m, fmt.Sprintf("tx-%d", tx))
	}
	// Rows after each transaction, computed the same way sqlite does.
	want := make([]string, txs+1)
	for tx := 0; tx <= txs; tx++ {
		n, id := 0, 0
		perTx := map[int]int{}
		for k := 1; k <= tx; k++ {
			for i := 0; i < rows; i++ {
				id++
				perTx[id] = k
			}
			if k == 3 {
				for i := range perTx {
					if i%5 == 0 {
						delete(perTx, i)
					}
				}
			}
		}
		n = len(perTx)
		sum := 0
		for _, k := range perTx {
			sum += k
		}
		want[tx] = fmt.Sprintf("ok\n%d|%d\n", n, sum)
	}
	check := func(when string, tx int) {
		t.Helper()
		for _, mode := range modes {
			out := exec1(mode, "PRAGMA integrity_check;\nSELECT count(*), coalesce(sum(tx), 0) FROM t;\n")
			if out != want[tx] {
				t.Errorf("%s: %s.db: got %q, want %q (state after transaction %d)", when, mode, out, want[tx], tx)
			}
		}
	}
	check("before any rewind", txs)
	for _, tx := range []int{2, 0, 3, 1, 4} {
		rwRewind(t, m, fmt.Sprintf("tx-%d", tx))
		check(fmt.Sprintf("after rewind to tx-%d", tx), tx)
	}
	// A rewind between transactions with a WAL database left with a
	// -wal file: the reader sees exactly the committed rows of then.
	rwRewind(t, m, strconv.FormatUint(seqs[2], 10))
	check("after rewind to the seq of tx-2", 2)
	m.Unmount()
	check("written back", 2)
}

// TestRewindCacheCoherence: right after rewind returns, ls, stat, cat and
// a process whose working directory is inside the mount see the target
// (no stale dentry, negative dentry, attribute or page cache); handles
// opened before the rewind cannot write into the new tree; unchanged files
// keep their inode numbers and mtimes.
func TestRewindCacheCoherence(t *testing.T) {
	m := mountProject(t, t.TempDir())
	checkFds(t)
	d := m.Dir
	p := func(rel string) string { return filepath.Join(d, rel) }
	target := rwState{
		"sub":           rwDir,
		"sub/a.txt":     "AAAA1111",
		"sub/keep.txt":  "keep",
		"sub/ghost.txt": "ghost",
		"sub/deep":      rwDir,
		"sub/deep/x":    "x",
		"unchanged.txt": strings.Repeat("u", 10000),
		"replaced.txt":  "old content",
		"gone":          rwDir,
		"gone/f":        "f",
		"link":          rwLink + "sub/a.txt",
	}
	rwApply(t, d, target)
	// Times from the past, so a rewind that re-stamps files is caught.
	old := time.Date(2020, 1, 2, 3, 4, 5, 6000, time.UTC)
	for _, f := range []string{"sub/a.txt", "unchanged.txt", "sub/keep.txt", "replaced.txt"} {
		if err := os.Chtimes(p(f), old, old); err != nil {
			t.Fatal(err)
		}
	}
	type ident struct {
		ino   uint64
		mtime int64
		size  int64
	}
	stat := func(rel string) ident {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(p(rel), &st); err != nil {
			t.Fatalf("stat %s: %v", rel, err)
		}
		return ident{st.Ino, st.Mtim.Nano(), st.Size}
	}
	atTarget := map[string]ident{}
	for _, f := range []string{"sub", "sub/a.txt", "sub/keep.txt", "sub/deep", "unchanged.txt", "replaced.txt", "gone"} {
		atTarget[f] = stat(f)
	}
	rwCheckpoint(t, m, "target")

	// The future: same-size content change, a replaced file (new inode,
	// same size), a removed file, a removed dir, new files and dirs.
	rwWriteSync(t, p("sub/a.txt"), "BBBB2222")
	if err := os.Remove(p("sub/ghost.txt")); err != nil {
		t.Fatal(err)
	}
	rwWriteSync(t, p("replaced.tmp"), "new content")
	if err := os.Rename(p("replaced.tmp"), p("replaced.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(p("gone")); err != nil {
		t.Fatal(err)
	}
	rwWriteSync(t, p("sub/new.txt"), "new")
	if err := os.MkdirAll(p("newdir/deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p("sub/keep.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	future := rwRead(t, d) // also fills the kernel's caches with the future
	for _, f := range []string{"sub/ghost.txt", "gone", "gone/f"} {
		if _, err := os.Lstat(p(f)); !os.IsNotExist(err) { // a negative dentry
			t.Fatalf("stat %s in the future: %v, want ENOENT", f, err)
		}
	}
	if future["sub/a.txt"] != "BBBB2222" || future["replaced.txt"] != "new content" {
		t.Fatalf("future not as written: %q %q", future["sub/a.txt"], future["replaced.txt"])
	}

	// A process whose working directory is sub, started before the rewind.
	proc := exec.Command("bash", "-c", `read -r _; cat a.txt; echo; ls -1; stat -c '%s %Y' a.txt; cat ghost.txt; echo; ls new.txt 2>&1 || true`)
	proc.Dir = p("sub")
	stdin, err := proc.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var procOut strings.Builder
	proc.Stdout, proc.Stderr = &procOut, &procOut
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	procDone := false
	t.Cleanup(func() {
		if !procDone {
			_ = proc.Process.Kill()
			_ = proc.Wait()
		}
	})

	// Handles opened for writing before the rewind.
	fa, err := os.OpenFile(p("sub/a.txt"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fnew, err := os.OpenFile(p("sub/new.txt"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fnew.Close()
	fkeep, err := os.OpenFile(p("unchanged.txt"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fkeep.Close()
	// A directory handle held across the rewind.
	dsub, err := os.Open(p("sub"))
	if err != nil {
		t.Fatal(err)
	}
	defer dsub.Close()

	res := rwRewind(t, m, "target")

	// ls, stat, cat: the target at once.
	rwExpect(t, d, target, "right after the rewind")
	for f, want := range atTarget { // restored or unchanged: same inode, mtime, size
		if got := stat(f); got != want {
			t.Errorf("%s after the rewind: inode %d mtime %d size %d; at the target: inode %d mtime %d size %d",
				f, got.ino, got.mtime, got.size, want.ino, want.mtime, want.size)
		}
	}
	if got := stat("sub/a.txt"); got.size != 8 {
		t.Errorf("sub/a.txt size %d after the rewind, want 8", got.size)
	}
	var st unix.Stat_t
	if err := unix.Lstat(p("sub/keep.txt"), &st); err != nil || st.Mode&0o7777 != 0o644 {
		t.Errorf("sub/keep.txt mode %o, %v after the rewind, want 0644 (the chmod was in the future)", st.Mode&0o7777, err)
	}
	var fst unix.Stat_t
	if err := unix.Fstat(int(dsub.Fd()), &fst); err != nil || fst.Ino != atTarget["sub"].ino {
		t.Errorf("fstat of a directory handle held across the rewind: inode %d, %v; want %d", fst.Ino, err, atTarget["sub"].ino)
	}
	if err := dsub.Close(); err != nil {
		t.Error(err)
	}

	// The process in sub sees the target.
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	err = proc.Wait()
	procDone = true
	wantOut := fmt.Sprintf("AAAA1111\na.txt\ndeep\nghost.txt\nkeep.txt\n8 %d\nghost\nls: cannot access 'new.txt': No such file or directory\n", old.Unix())
	if err != nil || procOut.String() != wantOut {
		t.Errorf("process with its cwd in sub since before the rewind: %v\ngot:\n%s\nwant:\n%s", err, procOut.String(), wantOut)
	}

	// Writes through handles from before the rewind fail with ESTALE and
	// never land in the new tree.
	for _, h := range []*os.File{fa, fnew, fkeep} {
		if _, err := h.WriteAt([]byte("XXXX"), 0); !errors.Is(err, syscall.ESTALE) {
			t.Errorf("write through %s opened before the rewind: %v, want ESTALE", h.Name(), err)
		}
		if _, err := h.Write([]byte("YY")); !errors.Is(err, syscall.ESTALE) {
			t.Errorf("write (2) through %s opened before the rewind: %v, want ESTALE", h.Name(), err)
		}
		if err := h.Truncate(1); !errors.Is(err, syscall.ESTALE) {
			t.Errorf("ftruncate of %s opened before the rewind: %v, want ESTALE", h.Name(), err)
		}
		if err := unix.Fallocate(int(h.Fd()), 0, 0, 100000); !errors.Is(err, syscall.ESTALE) {
			t.Errorf("fallocate of %s opened before the rewind: %v, want ESTALE", h.Name(), err)
		}
		if err := h.Sync(); !errors.Is(err, syscall.ESTALE) {
			t.Errorf("fsync of %s opened before the rewind: %v, want ESTALE", h.Name(), err)
		}
	}
	for _, h := range []*os.File{fa, fnew, fkeep} {
		if err := h.Close(); err != nil {
			t.Errorf("close of %s opened before the rewind: %v (nothing of the future may be flushed, but close should not fail)", h.Name(), err)
		}
	}
	rwExpect(t, d, target, "after writes through stale handles")
	// A handle opened after the rewind writes normally.
	rwWriteSync(t, p("sub/a.txt"), "CCCC3333")
	target["sub/a.txt"] = "CCCC3333"
	rwExpect(t, d, target, "after a write through a new handle")

	// The inverse direction: undo, and the future's same-size content and
	// replaced file are seen at once as well.
	rwRewind(t, m, strconv.FormatUint(res.Reset-1, 10))
	rwExpect(t, d, future, "after undo")
	m.Unmount()
	rwExpect(t, d, future, "written back after undo")
}

// rwModel follows a mount: the state at every seq the test has seen as
// head, and the current state.
type rwModel struct {
	t      testing.TB
	m      *Mount
	cur    rwState
	at     map[uint64]rwState
	resets map[uint64]uint64 // reset seq → target seq, of the rewinds done
}

func newRWModel(t testing.TB, m *Mount) *rwModel {
	md := &rwModel{t: t, m: m, cur: rwRead(t, m.Dir), at: map[uint64]rwState{}, resets: map[uint64]uint64{}}
	md.record()
	return md
}

// record notes that the state at head is the current state.
func (md *rwModel) record() uint64 {
	md.t.Helper()
	h := rwHead(md.t, md.m)
	if prev, ok := md.at[h]; ok && len(rwDiff(prev, md.cur)) > 0 {
		md.t.Fatalf("seq %d seen as head with two different states:\n%s", h, truncList(rwDiff(prev, md.cur), 10))
	}
	md.at[h] = maps.Clone(md.cur)
	return h
}

func (md *rwModel) set(rel, content string) uint64 {
	md.t.Helper()
	p := filepath.Join(md.m.Dir, rel)
	if dir := filepath.Dir(rel); dir != "." {
		if _, ok := md.cur[dir]; !ok {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				md.t.Fatal(err)
			}
			for d := dir; d != "."; d = filepath.Dir(d) {
				md.cur[d] = rwDir
			}
		}
	}
	rwWriteSync(md.t, p, content)
	md.cur[rel] = content
	return md.record()
}

func (md *rwModel) remove(rel string) uint64 {
	md.t.Helper()
	if err := os.Remove(filepath.Join(md.m.Dir, rel)); err != nil {
		md.t.Fatal(err)
	}
	delete(md.cur, rel)
	return md.record()
}

// replace writes content to a temporary name and renames it over rel.
func (md *rwModel) replace(rel, content string) uint64 {
	md.t.Helper()
	tmp := filepath.Join(md.m.Dir, filepath.Dir(rel), ".tmp")
	rwWriteSync(md.t, tmp, content)
	if err := os.Rename(tmp, filepath.Join(md.m.Dir, rel)); err != nil {
		md.t.Fatal(err)
	}
	md.cur[rel] = content
	return md.record()
}

func (md *rwModel) checkpoint(label string) uint64 {
	md.t.Helper()
	rwCheckpoint(md.t, md.m, label)
	return md.record()
}

// rewind rewinds to target; the tree must be the model's state at the
// seq the target resolved to (and that seq must be want, unless 0).
func (md *rwModel) rewind(target string, want uint64) rwRewound {
	md.t.Helper()
	res := rwRewind(md.t, md.m, target)
	if want != 0 && res.Target != want {
		md.t.Fatalf("rewind %s: went to seq %d, want %d", target, res.Target, want)
	}
	st, ok := md.at[res.Target]
	if !ok {
		md.t.Fatalf("rewind %s went to seq %d, a seq the test never saw as head", target, res.Target)
	}
	md.cur = maps.Clone(st)
	if !res.Already {
		md.resets[res.Reset] = res.Target
	}
	rwExpect(md.t, md.m.Dir, md.cur, fmt.Sprintf("after rewind %s (seq %d, reset at %d)", target, res.Target, res.Reset))
	md.record()
	return res
}

// checkViews compares .reynfs/seq/N/ with the model for every seq seen.
func (md *rwModel) checkViews(when string) {
	md.t.Helper()
	for _, s := range slices.Sorted(maps.Keys(md.at)) {
		view := filepath.Join(md.m.Dir, ".reynfs", "seq", strconv.FormatUint(s, 10))
		if d := rwDiff(md.at[s], rwRead(md.t, view)); len(d) > 0 {
			md.t.Errorf("%s: %s differs from the state at seq %d:\n%s", when, view, s, truncList(d, 10))
		}
	}
}

// checkBranches compares reynfs log --all with the rewinds done.
func (md *rwModel) checkBranches(when string) {
	md.t.Helper()
	l := rwLog(md.t, md.m, "--all")
	got := map[uint64]uint64{}
	for _, b := range l.Branches {
		got[b.Reset] = b.Target
		if b.From != b.Target+1 || b.To != b.Reset-1 {
			md.t.Errorf("%s: log --all: branch of reset %d to %d: seqs %d..%d, want %d..%d", when, b.Reset, b.Target, b.From, b.To, b.Target+1, b.Reset-1)
		}
	}
	if !maps.Equal(got, md.resets) {
		md.t.Errorf("%s: log --all lists resets (reset → target) %v, want %v", when, got, md.resets)
	}
	r := md.m.Run("log", "--all", "--store", md.m.Store)
	if r.Code != 0 {
		md.t.Fatalf("reynfs log --all: exit %d: %s", r.Code, r.Stderr)
	}
	for reset, target := range md.resets {
		if want := fmt.Sprintf("reset at seq %d to seq %d:", reset, target); !strings.Contains(r.Stdout, want) {
			md.t.Errorf("%s: reynfs log --all does not list the branch %q:\n%s", when, want, r.Stdout)
		}
	}
}

// TestRewindNested: rewind, write, rewind into the abandoned branch (to a
// generation and to a record between generations), rewind again, undo;
// the tree, the .reynfs/seq views and every retained seq match a model
// that keeps the state at every seq; log --all lists the branches.
func TestRewindNested(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "base"), []byte("base\n"), 0o644)
	m := mountProject(t, dir)
	checkFds(t)
	md := newRWModel(t, m)

	md.set("a", "a1")
	md.set("b", "b1")
	one := md.checkpoint("one")
	md.set("a", "a2-longer")
	mid := md.set("c/c", "c2") // a record between two generations
	md.remove("b")
	two := md.checkpoint("two")

	r1 := md.rewind("one", one)
	l := rwLog(t, m)
	for _, g := range l.Gens {
		if g.Label == "two" {
			t.Errorf("reynfs log (no --all) lists generation %q of the abandoned branch", g.Label)
		}
	}
	found := false
	for _, g := range rwLog(t, m, "--all").Gens {
		if g.Label == "two" {
			found = true
			if g.Active {
				t.Errorf("reynfs log --all: generation \"two\" of the abandoned branch marked active")
			}
		}
	}
	if !found {
		t.Errorf("reynfs log --all does not list generation \"two\" of the abandoned branch")
	}
	md.checkBranches("after the first rewind")

	md.set("d", "d3")
	md.replace("a", "a3")
	three := md.checkpoint("three")
	md.rewind(strconv.FormatUint(two, 10), two) // into the branch abandoned by r1
	md.rewind(strconv.FormatUint(mid, 10), mid) // a record inside it
	md.set("e", "e4")
	md.rewind("three", three) // into the branch abandoned by the last two
	md.set("z", "z5")
	back := md.rewind("-1", 0) // newest generation before head: the rewind just done
	if back.Target <= three {
		t.Errorf("rewind -1 went to seq %d, want the rewind generation after %d", back.Target, three)
	}
	md.rewind(strconv.FormatUint(back.Reset-1, 10), back.Reset-1) // undo: z is back
	if md.cur["z"] != "z5" {
		t.Errorf("undo of rewind -1: z = %q, want z5", md.cur["z"])
	}
	md.rewind(strconv.FormatUint(r1.Reset-1, 10), r1.Reset-1) // undo of the first rewind
	md.checkBranches("after nested rewinds")
	md.checkViews("mounted")

	// Every seq seen is reconstructable as a rewind target.
	seqs := slices.Sorted(maps.Keys(md.at))
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	rng.Shuffle(len(seqs), func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
	for _, s := range seqs[:min(len(seqs), 12)] {
		md.rewind(strconv.FormatUint(s, 10), s)
	}
	md.checkBranches("after rewinds to random seqs")

	// The text output says what changed and how to undo, and the hint works.
	md.rewind(strconv.FormatUint(two, 10), two) // from two to one: a modified, b added, c/c removed
	before := maps.Clone(md.cur)
	r := m.Run(rwRewindArgs(m, "one")...)
	var target, undo uint64
	if r.Code != 0 {
		t.Fatalf("reynfs rewind one: exit %d: %s", r.Code, r.Stderr)
	}
	if _, err := fmt.Sscanf(r.Stdout, "rewound to seq %d (reset record at seq ", &target); err != nil || target != one {
		t.Fatalf("reynfs rewind one: first line %q: %v; want \"rewound to seq %d (reset record at seq ...\"", r.Stdout, err, one)
	}
	if i := strings.Index(r.Stdout, "undo with 'reynfs undo', or 'reynfs rewind "); i < 0 {
		t.Fatalf("reynfs rewind one: no undo hint (\"undo with 'reynfs undo', or 'reynfs rewind N'\"):\n%s", r.Stdout)
	} else if _, err := fmt.Sscanf(r.Stdout[i:], "undo with 'reynfs undo', or 'reynfs rewind %d'", &undo); err != nil {
		t.Fatalf("reynfs rewind one: undo hint: %v:\n%s", err, r.Stdout)
	}
	md.cur = maps.Clone(md.at[one])
	md.resets[undo+1] = one
	rwExpect(t, m.Dir, md.cur, "after a rewind to one (text output)")
	md.record()
	for k, v := range before {
		w, ok := md.cur[k]
		switch {
		case v == rwDir || w == rwDir:
		case !ok && !strings.Contains(r.Stdout, "\n  removed  "+k+"\n"):
			t.Errorf("reynfs rewind one does not list %q as removed:\n%s", k, r.Stdout)
		case ok && w != v && !strings.Contains(r.Stdout, "\n  modified "+k+"\n"):
			t.Errorf("reynfs rewind one does not list %q as modified:\n%s", k, r.Stdout)
		}
	}
	for k, w := range md.cur {
		if _, ok := before[k]; !ok && w != rwDir && !strings.Contains(r.Stdout, "\n  added    "+k+"\n") {
			t.Errorf("reynfs rewind one does not list %q as added:\n%s", k, r.Stdout)
		}
	}
	if !strings.Contains(r.Stdout, "\nnot reverted: running processes") {
		t.Errorf("reynfs rewind one does not say what a rewind does not revert:\n%s", r.Stdout)
	}
	md.rewind(strconv.FormatUint(undo, 10), undo)
	rwExpect(t, m.Dir, before, "after following the undo hint")
	md.checkBranches("after the undo hint")

	m.Unmount()
	rwExpect(t, m.Dir, md.cur, "written back")
	m.Mount()
	md.record()
	md.rewind(strconv.FormatUint(two, 10), two)
	md.checkViews("remounted")
}

// rwFaults are the fault points of a rewind (rewind/rewind.go).
var rwFaults = []string{"after-reset", "mid-swap", "after-swap"}

// TestRewindCrash: the daemon dies at each fault point of a rewind; the
// next mount serves exactly the target state (never the discarded future,
// never a mix), also after unmount (the write-back), and the discarded
// future stays reconstructable (undo). Then a loop of random crash points
// and random targets, nested, against a model.
func TestRewindCrash(t *testing.T) {
	stateA := rwState{"a": "A", "b": "B only in A", "d": rwDir, "d/c": strings.Repeat("c", 5000), "keep": "keep"}
	stateB := rwState{"a": "AA", "d": rwDir, "d/c": strings.Repeat("C", 5000), "d/e": "new in B", "keep": "keep", "n": rwDir, "n/x": "x"}
	for _, point := range rwFaults {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "keep"), []byte("keep"), 0o644)
			m := rwNewMount(t, dir)
			rwMountEnv(t, m, "REYNFS_FAULT="+point)
			rwApply(t, m.Dir, stateA)
			a := rwCheckpoint(t, m, "A")
			rwApply(t, m.Dir, stateB)
			rwExpect(t, m.Dir, stateB, "state B written")
			b := rwHead(t, m)
			rwRewindCrash(t, m, "A")
			rwRemountAfterCrash(t, m)
			rwExpect(t, m.Dir, stateA, "remounted after a crash at "+point)
			l := rwLog(t, m, "--all")
			if len(l.Branches) != 1 || l.Branches[0].Target != a || l.Branches[0].Reset != b+1 {
				t.Fatalf("log --all after the crash: branches %+v, want one reset at seq %d to seq %d", l.Branches, b+1, a)
			}
			m.Unmount()
			rwExpect(t, m.Dir, stateA, "written back after a crash at "+point)
			m.Mount()
			rwExpect(t, m.Dir, stateA, "mounted again")
			rwExpect(t, filepath.Join(m.Dir, ".reynfs", "seq", strconv.FormatUint(b, 10)), stateB, "view of the discarded future")
			rwRewind(t, m, strconv.FormatUint(b, 10)) // undo
			rwExpect(t, m.Dir, stateB, "undo of the crashed rewind")
			m.Unmount()
			rwExpect(t, m.Dir, stateB, "written back after undo")
		})
	}
	t.Run("random", func(t *testing.T) {
		seed := uint64(time.Now().UnixNano())
		if s := os.Getenv("REYNFS_SEED"); s != "" {
			var err error
			if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
				t.Fatalf("REYNFS_SEED: %v", err)
			}
		}
		t.Logf("seed %d (REYNFS_SEED=%d reproduces)", seed, seed)
		rng := rand.New(rand.NewPCG(seed, 38))
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "d/f0"), []byte("initial"), 0o644)
		m := rwNewMount(t, dir)
		m.Mount()
		md := newRWModel(t, m)
		names := []string{"f0", "f1", "f2", "d/f0", "d/f1", "d/f2"}
		content := func(old string) string {
			n := rng.IntN(3000)
			if old != "" && rng.IntN(3) == 0 {
				n = len(old) // same size: only the content tells
			}
			b := make([]byte, n)
			for i := range b {
				b[i] = byte('a' + rng.IntN(26))
			}
			return string(b)
		}
		deadline := time.Now().Add(15 * time.Second)
		rounds := 0
		for ; rounds < 24 && time.Now().Before(deadline); rounds++ {
			for k := rng.IntN(4) + 1; k > 0; k-- {
				name := names[rng.IntN(len(names))]
				old, exists := md.cur[name]
				switch op := rng.IntN(5); {
				case op == 0 && exists:
					md.remove(name)
				case op == 1:
					md.replace(name, content(old))
				default:
					md.set(name, content(old))
				}
			}
			if rng.IntN(2) == 0 {
				md.checkpoint(fmt.Sprintf("r%d", rounds))
			}
			seqs := slices.Sorted(maps.Keys(md.at))
			target := seqs[rng.IntN(len(seqs))]
			point := []string{"", "after-reset", "mid-swap", "after-swap"}[rng.IntN(4)]
			if maps.Equal(md.at[target], md.cur) {
				point = "" // maybe a no-op rewind (nothing written), which reaches no fault point
			}
			what := fmt.Sprintf("round %d: rewind to %d, fault %q", rounds, target, point)
			if point == "" {
				md.rewind(strconv.FormatUint(target, 10), target)
				continue
			}
			m.Unmount()
			rwExpect(t, m.Dir, md.cur, what+": written back before")
			rwMountEnv(t, m, "REYNFS_FAULT="+point)
			md.record()
			head := rwHead(t, m)
			rwRewindCrash(t, m, strconv.FormatUint(target, 10))
			rwRemountAfterCrash(t, m)
			md.cur = maps.Clone(md.at[target])
			md.resets[head+1] = target
			rwExpect(t, m.Dir, md.cur, what+": remounted")
			md.record()
			s := seqs[rng.IntN(len(seqs))]
			view := filepath.Join(m.Dir, ".reynfs", "seq", strconv.FormatUint(s, 10))
			rwExpect(t, view, md.at[s], what+": view of seq "+strconv.FormatUint(s, 10))
		}
		md.checkBranches("after random crashes")
		m.Unmount()
		rwExpect(t, m.Dir, md.cur, "written back at the end")
		t.Logf("%d rounds, %d seqs, %d rewinds", rounds, len(md.at), len(md.resets))
	})
}

// rwOneLine fails unless a failed command said why in exactly one line on
// stderr, printed nothing on stdout and exited with want.
func rwOneLine(t testing.TB, r Result, want int, what string) {
	t.Helper()
	if r.Code != want || r.Stdout != "" || strings.Count(r.Stderr, "\n") != 1 || !strings.HasPrefix(r.Stderr, "reynfs: ") || !strings.HasSuffix(r.Stderr, "\n") {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout, one line \"reynfs: ...\" on stderr",
			what, r.Code, r.Stdout, r.Stderr, want)
	}
}

// TestRewindBadInput: unknown, malformed, too old and too new targets and
// bad command lines exit 2 with one line on stderr and change nothing;
// --dry-run changes nothing; concurrent rewinds are serialized (each one
// either runs whole or is refused with exit 1, rewind_in_progress).
func TestRewindBadInput(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("0"), 0o644)
	m := mountProject(t, dir)
	checkFds(t)
	md := newRWModel(t, m)
	md.set("a", "1")
	c1 := md.checkpoint("c1")
	md.set("a", "2")
	md.set("b", "b")
	c2 := md.checkpoint("c2")
	md.set("a", "3") // head is past the last generation
	head := rwHead(t, m)
	unchanged := func(what string) {
		t.Helper()
		if h := rwHead(t, m); h != head {
			t.Errorf("%s: head seq %d, want %d (unchanged)", what, h, head)
		}
		rwExpect(t, m.Dir, md.cur, what+": tree changed")
	}
	bad := [][]string{
		{"abc!"}, {"no-such-label"}, {"5x"}, {" 1"}, {"+1"}, {""}, {"g"}, {"gx1"},
		{"99999999999999999999999"}, {"18446744073709551615"}, {strconv.FormatUint(head+1, 10)},
		{"0"}, // older than anything retained
		{"g0"}, {"g99"}, {"-0"}, {"-99"}, {"-x"}, {"--5"},
	}
	for _, target := range bad {
		for _, flags := range [][]string{nil, {"--dry-run"}, {"--json"}} {
			r := m.Run(rwRewindArgs(m, target[0], flags...)...)
			if slices.Contains(flags, "--json") {
				cliJSONLine(t, r, 2, fmt.Sprintf("reynfs rewind %v -- %q", flags, target[0]))
				continue
			}
			rwOneLine(t, r, 2, fmt.Sprintf("reynfs rewind %v -- %q", flags, target[0]))
		}
	}
	unchanged("after bad targets")
	for _, args := range [][]string{
		{"rewind", "--store", m.Store},
		{"rewind", "--store", m.Store, "c1", "c2"},
		{"rewind", "--store", m.Store, "--no-such-flag", "c1"},
		{"rewind", "--dir", filepath.Join(t.TempDir(), "missing"), "c1"},
	} {
		rwOneLine(t, m.Run(args...), 2, fmt.Sprintf("reynfs %q", args))
	}
	unchanged("after bad command lines")

	// -N without "--" is a target too (the syntax: reynfs rewind -1).
	{
		r := m.Run("rewind", "--store", m.Store, "--dry-run", "--json", "-1")
		var res rwRewound
		if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &res) != nil || res.Target != c2 {
			t.Errorf("reynfs rewind --dry-run --json -1: exit %d, %q, %s; want a dry rewind to seq %d", r.Code, r.Stdout, r.Stderr, c2)
		}
	}
	unchanged("after rewind -1 --dry-run")

	// --dry-run says what it would do and does nothing.
	for target, want := range map[string]uint64{"c1": c1, "g2": c1, "-1": c2, "-2": c1, strconv.FormatUint(c2, 10): c2} {
		r := m.Run(rwRewindArgs(m, target, "--dry-run", "--json")...)
		var res rwRewound
		if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &res) != nil || res.Target != want || res.Reset != 0 || len(res.Changes) == 0 {
			t.Errorf("reynfs rewind --dry-run --json %s: exit %d %s: %+v; want target %d, no reset record, the changes listed", target, r.Code, r.Stderr, res, want)
		}
		r = m.Run(rwRewindArgs(m, target, "--dry-run")...)
		if r.Code != 0 || !strings.HasPrefix(r.Stdout, fmt.Sprintf("would rewind to seq %d ", want)) || !strings.Contains(r.Stdout, "modified a") {
			t.Errorf("reynfs rewind --dry-run %s: exit %d %s:\n%s", target, r.Code, r.Stderr, r.Stdout)
		}
	}
	unchanged("after dry runs")
	// The objects of the live tree are all still there: a checkpoint after
	// the dry runs is reconstructable, the store mounts again.
	md.checkpoint("after dry runs")
	m.Unmount()
	m.Mount()
	rwExpect(t, m.Dir, md.cur, "remounted after dry runs")
	md.record()

	// Concurrent rewinds: each runs whole or is refused; the tree is the
	// target of the last reset record.
	targets := []uint64{c1, c2, head, c1, c2, head}
	results := make([]Result, len(targets))
	var wg sync.WaitGroup
	for i, tg := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = m.Run(rwRewindArgs(m, strconv.FormatUint(tg, 10), "--json")...)
		}()
	}
	wg.Wait()
	ok, refused := 0, 0
	for i, r := range results {
		switch {
		case r.Code == 0:
			var res rwRewound
			if json.Unmarshal([]byte(r.Stdout), &res) == nil && !res.Already { // a no-op writes no reset record
				ok++
			}
		case r.Code == 1 && strings.Contains(r.Stderr, "a rewind has held the workspace"): // rewind_in_progress
			refused++
			cliJSONLine(t, r, 1, "a refused concurrent rewind")
		default:
			t.Errorf("concurrent rewind to %d: exit %d: %s", targets[i], r.Code, r.Stderr)
		}
	}
	t.Logf("concurrent rewinds: %d ran, %d refused", ok, refused)
	l := rwLog(t, m, "--all")
	if len(l.Branches) != ok {
		t.Fatalf("%d rewinds ran but log --all lists %d reset records: %+v", ok, len(l.Branches), l.Branches)
	}
	last := l.Branches[0]
	for _, b := range l.Branches {
		md.resets[b.Reset] = b.Target
		if b.Reset > last.Reset {
			last = b
		}
	}
	md.cur = maps.Clone(md.at[last.Target])
	rwExpect(t, m.Dir, md.cur, fmt.Sprintf("after concurrent rewinds (last reset %d to %d)", last.Reset, last.Target))
	md.record()
	md.checkBranches("after concurrent rewinds")

	// The store is sound after all this: it mounts again and serves head.
	md.set("a", "after")
	md.checkpoint("end")
	m.Unmount()
	rwExpect(t, m.Dir, md.cur, "written back")
	m.Mount()
	rwExpect(t, m.Dir, md.cur, "remounted")
}

// TestRewindOffline: reynfs rewind --store on an unmounted store rewinds
// the store, and the next mount (and its write-back) shows the target;
// undo works offline too; bad targets offline exit 2 and change nothing.
func TestRewindOffline(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("0"), 0o644)
	m := mountProject(t, dir)
	md := newRWModel(t, m)
	md.set("a", "A")
	md.set("d/x", "x")
	a := md.checkpoint("A")
	md.set("a", "B")
	md.remove("d/x")
	md.set("n", "new")
	b := md.checkpoint("B")
	stA, stB := md.at[a], md.at[b]
	m.Unmount()
	rwExpect(t, dir, stB, "written back")
	if r := m.Run("status", m.Dir, "--store", m.Store, "--json"); r.Code != 5 {
		t.Fatalf("reynfs status on an unmounted store: exit %d, want 5: %s", r.Code, r.Stderr)
	}

	for _, target := range []string{"no-such-label", "0", "99999", "g99", "abc!"} {
		rwOneLine(t, m.Run(rwRewindArgs(m, target)...), 2, "offline reynfs rewind "+target)
	}
	r := m.Run(rwRewindArgs(m, "A", "--dry-run", "--json")...)
	var res rwRewound
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &res) != nil || res.Target != a || res.Reset != 0 {
		t.Fatalf("offline reynfs rewind --dry-run A: exit %d %s %q; want a dry rewind to %d", r.Code, r.Stderr, r.Stdout, a)
	}
	l := rwLog(t, m, "--all")
	if l.Head != b+1 || len(l.Branches) != 0 { // b+1: the unmount generation
		t.Fatalf("after offline dry run and bad targets: head %d, branches %+v; want head %d, no branch", l.Head, l.Branches, b+1)
	}
	m.Mount()
	rwExpect(t, m.Dir, stB, "mounted after offline bad targets and dry run")
	m.Unmount()

	res = rwRewind(t, m, "A") // offline
	if res.Target != a {
		t.Fatalf("offline rewind A went to %d, want %d", res.Target, a)
	}
	m.Mount()
	rwExpect(t, m.Dir, stA, "mounted after an offline rewind")
	if l := rwLog(t, m, "--all"); len(l.Branches) != 1 || l.Branches[0].Reset != res.Reset || l.Branches[0].Target != a {
		t.Errorf("log --all after an offline rewind: %+v, want one reset at %d to %d", l.Branches, res.Reset, a)
	}
	m.Unmount()
	rwExpect(t, dir, stA, "written back after an offline rewind")

	undo := rwRewind(t, m, strconv.FormatUint(res.Reset-1, 10)) // offline undo
	m.Mount()
	rwExpect(t, m.Dir, stB, "mounted after an offline undo")
	m.Unmount()
	rwExpect(t, dir, stB, "written back after an offline undo")
	_ = undo

	// The project directory edited while unmounted, then an offline
	// rewind: the next mount must show the target, not the edit.
	writeFile(t, filepath.Join(dir, "a"), []byte("edited while unmounted"), 0o644)
	rwRewind(t, m, "A")
	m.Mount()
	if d := rwDiff(stA, rwRead(t, m.Dir)); len(d) > 0 {
		t.Errorf("edit while unmounted, offline rewind A, mount: tree is not A:\n%s", truncList(d, 10))
	}
}
