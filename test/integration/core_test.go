package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/journal"
)

// Core tests (issue 2: crash safety of fsync'd data, bad input to mount,
// large sparse files, shared mmap; issue 3: views, restore, agent state).

// coreFingerprint describes everything under root except the names in skip
// (relative paths): type, mode, size, inode, mtime and ctime (any write,
// chmod or rename changes ctime), a symlink's target and the content hash
// of files up to 4 MiB (Badger's big files are preallocated and sparse).
// A missing root is one "(absent)" key. With coreNoTimes in skip, the
// times of directories and of hashed files are left out (Badger rewrites a
// file with the same bytes when it opens a store, even one it then refuses).
func coreFingerprint(t testing.TB, root string, skip ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if _, err := os.Lstat(root); os.IsNotExist(err) {
		out["(absent)"] = ""
		return out
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if slices.Contains(skip, rel) {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode %o size %d ino %d", st.Mode, st.Size, st.Ino)
		times := fmt.Sprintf(" mtime %d ctime %d", st.Mtim.Nano(), st.Ctim.Nano())
		if !slices.Contains(skip, coreNoTimes) || (st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Size > 4<<20) {
			desc += times
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case unix.S_IFREG:
			if st.Size <= 4<<20 {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				desc += fmt.Sprintf(" sha256 %x", sha256.Sum256(b))
			}
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("fingerprint of %s: %v", root, err)
	}
	return out
}

// coreSameFingerprint fails the test (not now) when root changed since
// before was taken.
func coreSameFingerprint(t testing.TB, root string, before map[string]string, what string, skip ...string) {
	t.Helper()
	if d := coreFingerprintDiff(before, coreFingerprint(t, root, skip...)); len(d) > 0 {
		t.Errorf("%s: %s changed on disk:\n%s", what, root, truncList(d, 10))
	}
}

// coreFingerprintDiff lists what differs between two fingerprints.
func coreFingerprintDiff(before, after map[string]string) []string {
	var d []string
	keys := slices.Sorted(maps.Keys(before))
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		b, bok := before[k]
		a, aok := after[k]
		switch {
		case !aok:
			d = append(d, fmt.Sprintf("%s: gone (was %s)", k, b))
		case !bok:
			d = append(d, fmt.Sprintf("%s: new (%s)", k, a))
		case a != b:
			d = append(d, fmt.Sprintf("%s: was %s, now %s", k, b, a))
		}
	}
	return d
}

// coreOwnMounts lists the reynfs mounts this test run made (other runs and
// benchmarks on the machine mount and unmount at any time).
func coreOwnMounts() map[string]bool {
	out := map[string]bool{}
	for p := range reynfsMounts() {
		if strings.HasPrefix(p, runRoot+"/") {
			out[p] = true
		}
	}
	return out
}

// storeSkip are the names in a store that a refused mount may touch (the
// daemon's log says why it refused; Badger's pid file), and the times of
// files whose bytes stay the same.
var storeSkip = []string{"reynfs.log", "db/LOCK", coreNoTimes}

// coreNoTimes in the skip list of coreFingerprint leaves times out.
const coreNoTimes = "\x00no-times"

// coreSetFormat writes the store format version key of a store that no
// daemon has open, as another reynfs version would have written it.
func coreSetFormat(t testing.TB, store, version string) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(store, "db")).
		WithLogger(nil).WithValueThreshold(1 << 10).WithValueLogFileSize(128 << 20))
	if err != nil {
		t.Fatalf("badger open %s: %v", store, err)
	}
	err = db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("m/format"), []byte(version)) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("setting m/format in %s: %v", store, err)
	}
}

// coreCopyDir copies a directory with cp -a.
func coreCopyDir(t testing.TB, from, to string) {
	t.Helper()
	sh(t, "/", nil, fmt.Sprintf("cp -a %q %q", from, to))
}

// TestMountBadInput: each way a mount can be refused says why in one line
// on stderr, exits with the documented code and changes nothing on disk:
// not the project directory, not the store, no mount left behind.
func TestMountBadInput(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "proj")
	writeFile(t, filepath.Join(dir, "a"), []byte("a"), 0o644)
	writeFile(t, filepath.Join(dir, "sub", "b"), []byte("b"), 0o600)
	m := mountProject(t, dir)
	writeFile(t, filepath.Join(m.Dir, "c"), []byte("written in the mount"), 0o644)
	if r := m.Run("checkpoint", "-m", "c", "--store", m.Store); r.Code != 0 {
		t.Fatalf("reynfs checkpoint: exit %d: %s", r.Code, r.Stderr)
	}
	other := filepath.Join(base, "other")
	writeFile(t, filepath.Join(other, "o"), []byte("o"), 0o644)
	writeFile(t, filepath.Join(other, "sub", "p"), []byte("p"), 0o644)
	aFile := filepath.Join(base, "file")
	writeFile(t, aFile, []byte("not a directory"), 0o644)
	env := testEnv(t)

	// refused runs `reynfs args...` and checks the exit code, the one line,
	// and that the watched directories did not change (the store is
	// watched except for its log and Badger's pid file).
	type watch struct {
		root string
		skip []string
	}
	refused := func(want int, wantMsg string, watched []watch, args ...string) {
		t.Helper()
		before := make([]map[string]string, len(watched))
		for i, w := range watched {
			before[i] = coreFingerprint(t, w.root, w.skip...)
		}
		mountsBefore := coreOwnMounts()
		r := runReynfs(env, args...)
		what := "reynfs " + strings.Join(args, " ")
		rwOneLine(t, r, want, what)
		if !strings.Contains(r.Stderr, wantMsg) {
			t.Errorf("%s: stderr %q does not say %q", what, r.Stderr, wantMsg)
		}
		for i, w := range watched {
			coreSameFingerprint(t, w.root, before[i], what, w.skip...)
		}
		if got := coreOwnMounts(); !maps.Equal(got, mountsBefore) {
			t.Errorf("%s: mounts changed: before %v, after %v", what, mountsBefore, got)
		}
	}
	newStore := func() string { return filepath.Join(t.TempDir(), "store") }

	// Bad paths: nothing is created, not even the store folder.
	s := newStore()
	refused(2, "no such directory", []watch{{root: s}}, "mount", filepath.Join(base, "missing"), "--store", s)
	refused(2, "not a directory", []watch{{root: s}, {root: aFile}}, "mount", aFile, "--store", s)
	refused(2, "no such directory", []watch{{root: other}, {root: s}}, "mount", other, "--at", filepath.Join(base, "missing"), "--store", s)
	refused(2, "overlaps", []watch{{root: other}}, "mount", other, "--store", filepath.Join(other, "s"))
	refused(2, "overlaps", []watch{{root: other}}, "mount", other, "--store", other)
	refused(2, "overlaps", []watch{{root: other}}, "mount", other, "--store", base)
	refused(2, "not a directory", []watch{{root: other}, {root: aFile}, {root: s}}, "mount", other, "--at", aFile, "--store", s)
	{ // a store path that is a file: bad input (2) or not a store (4), not a failure (1)
		before := coreFingerprint(t, aFile)
		r := runReynfs(env, "mount", other, "--store", aFile)
		what := "reynfs mount " + other + " --store " + aFile + " (a file)"
		if r.Code == 2 || r.Code == 4 {
			rwOneLine(t, r, r.Code, what)
		} else {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 (bad input) or 4 (not a store)", what, r.Code, strings.TrimSpace(r.Stderr))
		}
		coreSameFingerprint(t, aFile, before, what)
		if isMounted(other) {
			t.Fatalf("%s: mounted", what)
		}
	}
	mp := t.TempDir()
	refused(2, "overlaps", []watch{{root: other}, {root: mp}}, "mount", other, "--at", mp, "--store", filepath.Join(mp, "s"))
	refused(2, "overlaps", []watch{{root: other}}, "mount", other, "--at", filepath.Join(other, "sub"), "--store", s)

	// The mount is live: mounting the same directory again (same store,
	// another store) or another directory at its mountpoint is refused.
	live := []watch{{root: m.Dir}, {root: m.Store, skip: storeSkip}, {root: other}}
	refused(2, "already mounted", live, "mount", m.Dir, "--store", m.Store)
	s2 := newStore()
	refused(2, "already mounted", live, "mount", m.Dir, "--store", s2)
	if _, err := os.Stat(s2); err == nil {
		t.Errorf("reynfs mount %s --store %s (a live mount already there) created the store folder %s (its log) although the mount was refused", m.Dir, s2, s2)
	}
	s3 := newStore()
	refused(2, "already mounted", live, "mount", other, "--at", m.Dir, "--store", s3)
	if _, err := os.Stat(s3); err == nil {
		t.Errorf("reynfs mount %s --at %s --store %s (a live mount already at %s) created the store folder %s (its log) although the mount was refused", other, m.Dir, s3, m.Dir, s3)
	}
	// The same store for another directory: the daemon holds its lock.
	refused(3, "in use", live, "mount", other, "--store", m.Store)
	// A store inside another workspace's live mount: that workspace would
	// journal every write of this one's store, and neither could be
	// unmounted while the other runs.
	{
		inner := filepath.Join(m.Dir, "s")
		r := runReynfs(env, "mount", other, "--store", inner)
		if r.Code == 0 {
			t.Errorf("reynfs mount %s --store %s (inside the live reynfs mount %s) was accepted (exit 0, %q); want exit 2, store overlaps a mount",
				other, inner, m.Dir, strings.TrimSpace(r.Stdout))
			coreUnmountStray(t, env, other, inner)
		} else {
			rwOneLine(t, r, 2, "reynfs mount "+other+" --store "+inner)
		}
	}
	if !isMounted(m.Dir) {
		t.Fatalf("the live mount is gone after the refused mounts")
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, "c")); err != nil || string(b) != "written in the mount" {
		t.Fatalf("the live mount after the refused mounts: c = %q, %v", b, err)
	}
	m.Unmount()

	// Another process holds the store's lock (Badger flocks the db folder).
	{
		fd, err := unix.Open(filepath.Join(m.Store, "db"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(fd)
			t.Fatalf("flock the store: %v", err)
		}
		refused(3, "in use", []watch{{root: m.Dir}, {root: m.Store, skip: storeSkip}}, "mount", m.Dir, "--store", m.Store)
		unix.Close(fd)
	}

	// Corrupt stores and a store of another format version, each a copy
	// of the good one.
	corrupt := func(name string, damage func(store string)) string {
		c := filepath.Join(t.TempDir(), name)
		coreCopyDir(t, m.Store, c)
		damage(c)
		return c
	}
	garbage := []byte(strings.Repeat("\xde\xad\xbe\xef garbage ", 64))
	for _, c := range []struct {
		name, msg string
		format    bool // the damage is a format key: check what is stored, not the files
		damage    func(store string)
	}{
		{"manifest", "corrupt", false, func(s string) {
			writeFile(t, filepath.Join(s, "db", "MANIFEST"), garbage, 0o644)
		}},
		{"manifest-cut", "corrupt", false, func(s string) {
			if err := os.Truncate(filepath.Join(s, "db", "MANIFEST"), 5); err != nil {
				t.Fatal(err)
			}
		}},
		{"keyregistry", "corrupt", false, func(s string) {
			writeFile(t, filepath.Join(s, "db", "KEYREGISTRY"), garbage, 0o600)
		}},
		{"not-a-store", "not a reynfs store", false, func(s string) {
			db := filepath.Join(s, "db")
			if err := os.RemoveAll(db); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(db, "notes.txt"), []byte("somebody else's file"), 0o644)
		}},
		{"format", fmt.Sprintf("store format version %d, this reynfs reads %d", journal.StoreFormat+1, journal.StoreFormat), true,
			func(s string) { coreSetFormat(t, s, strconv.Itoa(journal.StoreFormat+1)) }},
		{"format-nan", "corrupt", true, func(s string) { coreSetFormat(t, s, "x") }},
	} {
		st := corrupt(c.name, c.damage)
		if !c.format {
			refused(4, c.msg, []watch{{root: m.Dir}, {root: st, skip: storeSkip}}, "mount", m.Dir, "--store", st)
			continue
		}
		kv := coreStoreDump(t, st) // read-only: before the files are described
		files := coreFingerprint(t, st, storeSkip...)
		refused(4, c.msg, []watch{{root: m.Dir}}, "mount", m.Dir, "--store", st)
		if d := coreStoreDump(t, st); d != kv {
			t.Errorf("reynfs mount --store %s (%s): the refused mount changed what the store holds", st, c.name)
		}
		if d := coreFingerprintDiff(files, coreFingerprint(t, st, storeSkip...)); len(d) > 0 {
			t.Errorf("reynfs mount %s --store %s (store of another format version: %s) was refused (exit 4) but changed the store's files (what it holds is unchanged):\n%s",
				m.Dir, st, c.name, truncList(d, 6))
		}
	}

	// The original store was left alone by all of this: it mounts and
	// serves what it served.
	m.Mount()
	for name, want := range map[string]string{"a": "a", "sub/b": "b", "c": "written in the mount"} {
		if b, err := os.ReadFile(filepath.Join(m.Dir, name)); err != nil || string(b) != want {
			t.Errorf("remounted after the refused mounts: %s = %q, %v; want %q", name, b, err, want)
		}
	}
}

// coreStoreDump hashes every key and value of a store that no daemon has
// open, read-only.
func coreStoreDump(t testing.TB, store string) string {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(store, "db")).WithLogger(nil).WithReadOnly(true))
	if err != nil {
		t.Fatalf("badger open read-only %s: %v", store, err)
	}
	defer db.Close()
	h := sha256.New()
	n := 0
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%q=%q\n", it.Item().Key(), v)
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v", store, err)
	}
	return fmt.Sprintf("%d keys %x", n, h.Sum(nil))
}

// coreUnmountStray unmounts a mount a test did not mean to make (a bad
// input reynfs accepted), and makes sure its daemon is gone.
func coreUnmountStray(t testing.TB, env []string, dir, store string) {
	t.Helper()
	pid := 0
	if r := runReynfs(env, "status", dir, "--store", store, "--json"); r.Code == 0 {
		var st struct {
			Pid int `json:"pid"`
		}
		_ = json.Unmarshal([]byte(r.Stdout), &st)
		pid = st.Pid
	}
	if r := runReynfs(env, "unmount", dir, "--store", store); r.Code != 0 {
		t.Errorf("reynfs unmount %s --store %s: exit %d: %s", dir, store, r.Code, r.Stderr)
	}
	if isMounted(dir) {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("umount -l %s: %v", dir, err)
		}
	}
	for i := 0; pid > 0 && pidAlive(pid) && i < 500; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if pid > 0 && pidAlive(pid) {
		t.Logf("killing the stray daemon %d", pid)
		_ = unix.Kill(pid, unix.SIGKILL)
	}
}

// coreErrno is the errno of err ("ok" for nil).
func coreErrno(err error) string {
	var errno unix.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

// TestViews: .reynfs is not listed by a readdir of the root (os.ReadDir,
// ls -a, find, grep -r) but ls, cat, cd, diff -r against an export and
// cp -a work inside it; every kind of write there fails with EROFS and
// changes nothing; symlinks read as stored; .reynfs/timeline lists the
// generations.
func TestViews(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), []byte("needle one\n"), 0o644)
	writeFile(t, filepath.Join(dir, "src", "main.go"), []byte("package main\n"), 0o600)
	m := mountProject(t, dir)
	checkFds(t)
	live := func(rel string) string { return filepath.Join(m.Dir, rel) }
	writeFile(t, live("src/lib/x.c"), []byte("int x;\n"), 0o640)
	writeFile(t, live("bin/run.sh"), bytesRepeat("echo run\n", 10000), 0o755) // > one 64 KiB chunk
	if err := os.Symlink("a.txt", live("rel")); err != nil {
		t.Fatal(err)
	}
	absTarget := live("a.txt")
	if err := os.Symlink(absTarget, live("abs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent/dangling", live("dangling")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(live("a.txt"), "user.note", []byte("at g2"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(live("src/main.go"), live("src/main.hardlink")); err != nil {
		t.Fatal(err)
	}
	rwCheckpoint(t, m, "two")
	g2State := rwRead(t, m.Dir)
	writeFile(t, live("a.txt"), []byte("needle two\n"), 0o644)
	if err := os.RemoveAll(live("src/lib")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, live("new.txt"), []byte("new"), 0o644)
	g3 := rwCheckpoint(t, m, "three")
	writeFile(t, live("after.txt"), []byte("not in a generation"), 0o644)
	liveState := rwRead(t, m.Dir)
	gens := rwLog(t, m).Gens
	var names []string
	for _, g := range gens {
		names = append(names, fmt.Sprintf("g%d", g.ID))
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"g1", "g2", "g3"}) {
		t.Fatalf("reynfs log: generations %v, want g1 g2 g3 (import, two, three)", names)
	}
	view := live(".reynfs/generations/g2")

	// Not listed by readdir of the root, by any tool.
	ents, err := os.ReadDir(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var top []string
	for _, e := range ents {
		top = append(top, e.Name())
	}
	if want := []string{"a.txt", "abs", "after.txt", "bin", "dangling", "new.txt", "rel", "src"}; !slices.Equal(top, want) {
		t.Errorf("os.ReadDir(mount root) = %v, want %v (no .reynfs)", top, want)
	}
	if out := sh(t, m.Dir, nil, "ls -a"); strings.Contains(out, ".reynfs") {
		t.Errorf("ls -a in the mount root lists .reynfs:\n%s", out)
	}
	if out := sh(t, m.Dir, nil, "find . | sort"); strings.Contains(out, ".reynfs") || strings.Count(out, "\n") != len(liveState)+1 {
		t.Errorf("find in the mount: %d lines, want %d, none under .reynfs:\n%s", strings.Count(out, "\n"), len(liveState)+1, out)
	}
	if out := sh(t, m.Dir, nil, "grep -rl needle . | sort"); out != "./a.txt\n" {
		t.Errorf("grep -rl needle in the mount: %q, want only ./a.txt (history has an older a.txt)", out)
	}

	// But it is there for those who ask.
	if out := sh(t, m.Dir, nil, "ls .reynfs"); out != "generations\nseq\ntimeline\n" {
		t.Errorf("ls .reynfs: %q, want generations, seq, timeline", out)
	}
	if out := sh(t, m.Dir, nil, "ls .reynfs/generations"); out != "g1\ng2\ng3\n" {
		t.Errorf("ls .reynfs/generations: %q, want g1 g2 g3", out)
	}
	if out := sh(t, m.Dir, nil, "cd .reynfs/generations/g2/src && pwd && cat main.go && ls -a"); out != view+"/src\npackage main\n.\n..\nlib\nmain.go\nmain.hardlink\n" {
		t.Errorf("cd into the view, cat, ls -a: %q", out)
	}
	rwExpect(t, view, g2State, "view of g2")
	if out := sh(t, m.Dir, nil, "cd .reynfs/generations/g3 && ls .. && cat ../g1/a.txt"); out != "g1\ng2\ng3\nneedle one\n" {
		t.Errorf("cd g3; ls ..; cat ../g1/a.txt: %q", out)
	}
	rwExpect(t, live(fmt.Sprintf(".reynfs/seq/%d", g3)), rwRead(t, live(".reynfs/generations/g3")), "seq view of g3")
	if b, err := os.ReadFile(filepath.Join(view, "a.txt")); err != nil || string(b) != "needle one\n" {
		t.Errorf("cat view/a.txt = %q, %v; want the g2 content", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(view, "rel")); err != nil || string(b) != "needle one\n" {
		t.Errorf("cat view/rel (relative symlink to a.txt) = %q, %v; want the view's a.txt, not the live one", b, err)
	}
	for name, want := range map[string]string{"rel": "a.txt", "abs": absTarget, "dangling": "/nonexistent/dangling"} {
		if got, err := os.Readlink(filepath.Join(view, name)); err != nil || got != want {
			t.Errorf("readlink view/%s = %q, %v; want %q as stored", name, got, err, want)
		}
	}
	buf := make([]byte, 64)
	if n, err := unix.Getxattr(filepath.Join(view, "a.txt"), "user.note", buf); err != nil || string(buf[:n]) != "at g2" {
		t.Errorf("getxattr view/a.txt user.note = %q, %v; want \"at g2\"", buf[:max(n, 0)], err)
	}
	if ino1, n1, err1 := statIno(filepath.Join(view, "src/main.go")); err1 != nil || n1 != 2 {
		t.Errorf("view/src/main.go: nlink %d, %v; want 2", n1, err1)
	} else if ino2, _, _ := statIno(filepath.Join(view, "src/main.hardlink")); ino2 != ino1 {
		t.Errorf("view: main.go ino %d and main.hardlink ino %d; want one inode (hard link)", ino1, ino2)
	}

	// diff -r against an export, cp -a out of the view.
	exp := filepath.Join(t.TempDir(), "export")
	if r := m.Run("export", "g2", exp, "--store", m.Store); r.Code != 0 {
		t.Fatalf("reynfs export g2: exit %d: %s", r.Code, r.Stderr)
	}
	sh(t, "/", nil, fmt.Sprintf("diff -r --no-dereference %q %q", view, exp))
	cp := filepath.Join(t.TempDir(), "copy")
	sh(t, "/", nil, fmt.Sprintf("cp -a %q %q", view, cp))
	rwExpect(t, cp, g2State, "cp -a of the view")
	vs, err := snapshot(view)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := snapshot(cp)
	if err != nil {
		t.Fatal(err)
	}
	es, err := snapshot(exp)
	if err != nil {
		t.Fatal(err)
	}
	if d := compareTrees(vs, cs, cmpOpts{mtime: true}); len(d) > 0 {
		t.Errorf("cp -a of the view differs from the view (modes, mtimes, xattrs, links):\n%s", truncList(d, 10))
	}
	for k, e := range es { // the view shows the stored modes without write bits
		e.Perm &^= 0o222
		es[k] = e
	}
	if d := compareTrees(es, vs, cmpOpts{mtime: true}); len(d) > 0 {
		t.Errorf("view of g2 differs from reynfs export g2 (modes without write bits, mtimes, xattrs, links):\n%s", truncList(d, 10))
	}

	// Every write inside the views fails with EROFS and changes nothing.
	head := rwHead(t, m)
	vf, vd := filepath.Join(view, "a.txt"), filepath.Join(view, "src")
	gensDir := live(".reynfs/generations")
	writes := []struct {
		what string
		op   func() error
	}{
		{"create", func() error {
			fd, err := unix.Open(filepath.Join(vd, "new"), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
		{"mknod fifo", func() error { return unix.Mkfifo(filepath.Join(vd, "fifo"), 0o644) }},
		{"mkdir", func() error { return unix.Mkdir(filepath.Join(vd, "d"), 0o755) }},
		{"mkdir in generations/", func() error { return unix.Mkdir(filepath.Join(gensDir, "g99"), 0o755) }},
		{"mkdir in .reynfs/", func() error { return unix.Mkdir(live(".reynfs/mine"), 0o755) }},
		{"unlink", func() error { return unix.Unlink(vf) }},
		{"unlink a symlink", func() error { return unix.Unlink(filepath.Join(view, "abs")) }},
		{"rmdir", func() error { return unix.Rmdir(filepath.Join(vd, "lib")) }},
		{"rmdir a generation", func() error { return unix.Rmdir(view) }},
		{"rmdir .reynfs", func() error { return unix.Rmdir(live(".reynfs")) }},
		{"rename in a view", func() error { return unix.Rename(vf, filepath.Join(view, "b.txt")) }},
		{"rename over a view file", func() error { return unix.Rename(filepath.Join(view, "bin/run.sh"), vf) }},
		{"rename out of a view", func() error { return unix.Rename(vf, live("stolen.txt")) }},
		{"rename into a view", func() error { return unix.Rename(live("new.txt"), filepath.Join(view, "new.txt")) }},
		{"rename a generation", func() error { return unix.Rename(view, filepath.Join(gensDir, "g9")) }},
		{"rename .reynfs", func() error { return unix.Rename(live(".reynfs"), live("history")) }},
		{"exchange with a live file", func() error {
			return unix.Renameat2(unix.AT_FDCWD, live("new.txt"), unix.AT_FDCWD, vf, unix.RENAME_EXCHANGE)
		}},
		{"link into a view", func() error { return unix.Link(live("new.txt"), filepath.Join(view, "l")) }},
		{"link out of a view", func() error { return unix.Link(vf, live("l")) }},
		{"symlink", func() error { return unix.Symlink("a.txt", filepath.Join(view, "s")) }},
		{"chmod", func() error { return unix.Chmod(vf, 0o777) }},
		{"chmod a directory", func() error { return unix.Chmod(vd, 0o777) }},
		{"chown", func() error { return unix.Lchown(vf, 1, 1) }},
		{"utimes", func() error { return unix.UtimesNano(vf, []unix.Timespec{{Sec: 1}, {Sec: 1}}) }},
		{"truncate", func() error { return unix.Truncate(vf, 0) }},
		{"truncate up", func() error { return unix.Truncate(vf, 1<<20) }},
		{"open O_WRONLY", func() error {
			fd, err := unix.Open(vf, unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if err == nil {
				_, err = unix.Write(fd, []byte("x"))
				unix.Close(fd)
			}
			return err
		}},
		{"open O_RDWR", func() error {
			fd, err := unix.Open(vf, unix.O_RDWR|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
		{"open O_APPEND", func() error {
			fd, err := unix.Open(vf, unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
		{"open O_TRUNC", func() error {
			fd, err := unix.Open(vf, unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
		{"open timeline O_WRONLY", func() error {
			fd, err := unix.Open(live(".reynfs/timeline"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
		{"setxattr", func() error { return unix.Setxattr(vf, "user.x", []byte("y"), 0) }},
		{"setxattr replace", func() error { return unix.Setxattr(vf, "user.note", []byte("y"), 0) }},
		{"setxattr on a directory", func() error { return unix.Setxattr(vd, "user.x", []byte("y"), 0) }},
		{"setxattr on .reynfs", func() error { return unix.Setxattr(live(".reynfs"), "user.x", []byte("y"), 0) }},
		{"removexattr", func() error { return unix.Removexattr(vf, "user.note") }},
		{"create in .reynfs/seq", func() error {
			return os.WriteFile(live(".reynfs/seq/new"), []byte("x"), 0o644)
		}},
	}
	for _, w := range writes {
		if got := coreErrno(w.op()); got != "EROFS" {
			t.Errorf("%s inside the views: %s, want EROFS", w.what, got)
		}
	}
	if h := rwHead(t, m); h != head {
		t.Errorf("the refused writes made records: head seq %d, want %d", h, head)
	}
	rwExpect(t, view, g2State, "view of g2 after the refused writes")
	rwExpect(t, m.Dir, liveState, "live tree after the refused writes")
	if n, err := unix.Getxattr(vf, "user.note", buf); err != nil || string(buf[:n]) != "at g2" {
		t.Errorf("after the refused writes: getxattr view/a.txt user.note = %q, %v", buf[:max(n, 0)], err)
	}

	// Points that are not retained do not exist; only the root's .reynfs
	// is special: one in a subdirectory is an ordinary directory.
	for _, rel := range []string{".reynfs/generations/g0", ".reynfs/generations/g4", ".reynfs/generations/x",
		".reynfs/seq/0", fmt.Sprintf(".reynfs/seq/%d", head+1), ".reynfs/seq/abc", ".reynfs/nothing"} {
		var st unix.Stat_t
		if got := coreErrno(unix.Lstat(live(rel), &st)); got != "ENOENT" {
			t.Errorf("stat %s: %s, want ENOENT", rel, got)
		}
	}
	if err := os.Mkdir(live("src/.reynfs"), 0o755); err != nil {
		t.Errorf("mkdir src/.reynfs: %v (only the root's .reynfs is reserved)", err)
	} else {
		writeFile(t, live("src/.reynfs/mine"), []byte("mine"), 0o644)
		liveState["src/.reynfs"], liveState["src/.reynfs/mine"] = rwDir, "mine"
		rwExpect(t, m.Dir, liveState, "after writing src/.reynfs/mine")
		head = rwHead(t, m)
	}

	// The timeline lists every generation with its seq, kind and label.
	tl, err := os.ReadFile(live(".reynfs/timeline"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(tl), "\n"), "\n")
	if len(lines) != len(gens)+2 || lines[0] != fmt.Sprintf("# reynfs timeline, newest first; head seq %d; * = on the current path", head) {
		t.Fatalf(".reynfs/timeline: %d lines, want a header, %d generations, a footer:\n%s", len(lines), len(gens), tl)
	}
	for i, g := range gens { // log --json is newest first too
		prefix := fmt.Sprintf("* g%d\tseq %d\t%s\t", g.ID, g.Seq, g.Kind)
		if l := lines[i+1]; !strings.HasPrefix(l, prefix) || !strings.HasSuffix(l, "\t"+g.Label) {
			t.Errorf(".reynfs/timeline line %d: %q, want %q...%q", i+1, l, prefix, "\t"+g.Label)
		}
	}

	// After unmount and remount the views serve the same.
	m.Unmount()
	m.Mount()
	rwExpect(t, view, g2State, "view of g2 after a remount")
	rwExpect(t, m.Dir, liveState, "live tree after a remount")
}

// bytesRepeat is s repeated n times.
func bytesRepeat(s string, n int) []byte { return []byte(strings.Repeat(s, n)) }

// coreRestored is reynfs restore --json.
type coreRestored struct {
	Path     string `json:"path"`
	From     uint64 `json:"from_seq"`
	Seq      uint64 `json:"seq"`
	Inodes   uint64 `json:"inodes"`
	Replaced bool   `json:"replaced"`
}

// TestRestoreCLI: reynfs restore PATH --from X brings back a deleted file,
// a deleted directory tree (hard links kept) and an overwritten file, as
// one record each, leaving the rest of the tree and every open file as
// they are (not a rewind); bad input exits 2 with one line and changes
// nothing; the printed undo works.
func TestRestoreCLI(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "keep.txt"), []byte("keep"), 0o644)
	writeFile(t, filepath.Join(dir, "doc.txt"), []byte("doc at base\n"), 0o640)
	writeFile(t, filepath.Join(dir, "gone.txt"), []byte("gone at base"), 0o600)
	writeFile(t, filepath.Join(dir, "tree", "a"), []byte("tree/a"), 0o644)
	writeFile(t, filepath.Join(dir, "tree", "sub", "b"), bytesRepeat("tree/sub/b ", 20000), 0o755)
	writeFile(t, filepath.Join(dir, "tree", "sub", "deeper", "c"), []byte("c"), 0o644)
	writeFile(t, filepath.Join(dir, "other.txt"), []byte("other:"), 0o644)
	m := mountProject(t, dir)
	live := func(rel string) string { return filepath.Join(m.Dir, rel) }
	if err := os.Symlink("../keep.txt", live("tree/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(live("tree/a"), live("tree/sub/a.hard")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(live("tree/sub/b"), "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	base := rwCheckpoint(t, m, "base")
	baseState := rwRead(t, m.Dir)
	baseSnap, err := snapshot(m.Dir)
	if err != nil {
		t.Fatal(err)
	}

	// The damage: a deleted file, a deleted tree, an overwritten file.
	if err := os.Remove(live("gone.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(live("tree")); err != nil {
		t.Fatal(err)
	}
	docFd, err := os.OpenFile(live("doc.txt"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer docFd.Close()
	if _, err := docFd.WriteString("doc overwritten\n"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, live("new.txt"), []byte("made after base"), 0o644)
	otherFd, err := os.OpenFile(live("other.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer otherFd.Close()
	if _, err := otherFd.WriteString("1"); err != nil {
		t.Fatal(err)
	}
	want := rwRead(t, m.Dir)
	keepIno, _, err := statIno(live("keep.txt"))
	if err != nil {
		t.Fatal(err)
	}

	unchanged := func(what string) {
		t.Helper()
		rwExpect(t, m.Dir, want, what)
	}
	// Bad input first: exit 2, one line, no record, nothing changed.
	head := rwHead(t, m)
	outside := filepath.Join(t.TempDir(), "x")
	writeFile(t, outside, []byte("x"), 0o644)
	for _, args := range [][]string{
		{"restore", outside, "--from", "base"},
		{"restore", live("gone.txt")},
		{"restore", live("gone.txt"), "--from", ""},
		{"restore", live("new.txt"), "--from", "base"},
		{"restore", live("never/was"), "--from", "base"},
		{"restore", live("tree/sub/b"), "--from", "base"}, // its parent is gone now
		{"restore", live("gone.txt"), "--from", "no-such-label"},
		{"restore", live("gone.txt"), "--from", "99999"},
		{"restore", live("gone.txt"), "--from", "g9"},
		{"restore", m.Dir, "--from", "base"},
		{"restore", live(".reynfs/generations/g2/gone.txt"), "--from", "base"},
		{"restore", live("gone.txt"), live("keep.txt"), "--from", "base"},
		{"restore", "--from", "base"},
		{"restore", live("gone.txt"), "--from", "base", "--no-such-flag"},
	} {
		rwOneLine(t, m.Run(args...), 2, "reynfs "+strings.Join(args, " "))
	}
	if h := rwHead(t, m); h != head {
		t.Errorf("bad restores made records: head seq %d, want %d", h, head)
	}
	unchanged("after bad restores")

	restore := func(rel string) coreRestored {
		t.Helper()
		r := m.Run("restore", live(rel), "--from", "base", "--json")
		var res coreRestored
		if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &res) != nil {
			t.Fatalf("reynfs restore %s --from base --json: exit %d: %s%s", rel, r.Code, r.Stderr, r.Stdout)
		}
		if res.Path != rel || res.From != base || res.Seq <= head {
			t.Errorf("reynfs restore %s --json: %+v; want path %s, from %d, a new record", rel, res, rel, base)
		}
		for p, v := range baseState { // the restored subtree is as it was at base
			if p == rel || strings.HasPrefix(p, rel+"/") {
				want[p] = v
			}
		}
		rwExpect(t, m.Dir, want, "after reynfs restore "+rel)
		head = res.Seq
		return res
	}
	res := restore("gone.txt")
	if res.Replaced || res.Inodes != 1 {
		t.Errorf("restore of a deleted file: %+v; want 1 inode, nothing replaced", res)
	}

	// A deleted tree, named relative to a shell's working directory in
	// the mount, in the text output.
	out := sh(t, m.Dir, nil, fmt.Sprintf("%q restore tree --from base", reynfsBin))
	if !strings.HasPrefix(out, fmt.Sprintf("restored tree from seq %d: 7 inode(s), record seq ", base)) || !strings.Contains(out, "undo with 'reynfs undo' (unmounted: 'reynfs rewind ") {
		t.Errorf("reynfs restore tree --from base (in the mount): %q; want 'restored tree from seq %d: 7 inode(s), record seq N...' and an undo hint", out, base)
	}
	for p, v := range baseState {
		if p == "tree" || strings.HasPrefix(p, "tree/") {
			want[p] = v
		}
	}
	rwExpect(t, m.Dir, want, "after reynfs restore tree")
	head = rwHead(t, m)
	got, err := snapshot(live("tree"))
	if err != nil {
		t.Fatal(err)
	}
	wantTree := map[string]entry{}
	for p, e := range baseSnap {
		if rel, ok := strings.CutPrefix(p, "tree/"); ok {
			wantTree[rel] = e
		} else if p == "tree" {
			wantTree["."] = e
		}
	}
	if d := compareTrees(wantTree, got, cmpOpts{mtime: true, dirNlink: true}); len(d) > 0 {
		t.Errorf("restored tree differs from the tree at base (modes, mtimes, xattrs, links):\n%s", truncList(d, 10))
	}
	if a, _, _ := statIno(live("tree/a")); a == 0 || a != func() uint64 { i, _, _ := statIno(live("tree/sub/a.hard")); return i }() {
		t.Errorf("restored tree: tree/a and tree/sub/a.hard are not one inode any more")
	}

	// An overwritten file, while a handle on the replaced one is open.
	res = restore("doc.txt")
	if !res.Replaced || res.Inodes != 1 {
		t.Errorf("restore of an overwritten file: %+v; want 1 inode, replaced", res)
	}

	// Open files are untouched: the handle on other.txt still writes into
	// the live other.txt; the handle on the replaced doc.txt writes into
	// the replaced file, never into the restored one.
	if _, err := otherFd.WriteString("2"); err != nil {
		t.Errorf("write through a handle opened before the restores: %v (a restore is not a rewind)", err)
	}
	if _, err := docFd.WriteString("late write\n"); err != nil {
		t.Errorf("write through a handle on the replaced doc.txt: %v (a restore is not a rewind)", err)
	}
	if err := otherFd.Sync(); err != nil {
		t.Errorf("fsync of a handle opened before the restores: %v", err)
	}
	want["other.txt"] = "other:12"
	if b, err := os.ReadFile(live("other.txt")); err != nil || string(b) != want["other.txt"] {
		t.Errorf("other.txt after writes around the restores = %q, %v; want %q", b, err, want["other.txt"])
	}
	if b, err := os.ReadFile(live("doc.txt")); err != nil || string(b) != "doc at base\n" {
		t.Errorf("restored doc.txt after a write through the old handle = %q, %v; want the base content", b, err)
	}
	if ino, _, _ := statIno(live("keep.txt")); ino != keepIno {
		t.Errorf("keep.txt changed inode across the restores: %d, was %d", ino, keepIno)
	}
	otherFd.Close()
	docFd.Close()
	rwExpect(t, m.Dir, want, "after the restores and the writes")

	// Restoring the present state again replaces it with the same content.
	if r := m.Run("restore", live("keep.txt"), "--from", "base"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "restored (replacing what was there) keep.txt from seq ") {
		t.Errorf("reynfs restore keep.txt --from base: exit %d, %q, %s", r.Code, r.Stdout, r.Stderr)
	}
	rwExpect(t, m.Dir, want, "after restoring an unchanged file")

	// The undo hint: a rewind to the seq before the restore record.
	if err := os.Remove(live("gone.txt")); err != nil {
		t.Fatal(err)
	}
	delete(want, "gone.txt")
	head = rwHead(t, m)
	res = restore("gone.txt")
	if u := rwRewind(t, m, strconv.FormatUint(res.Seq-1, 10)); u.Target != res.Seq-1 {
		t.Errorf("undo of the restore went to seq %d, want %d", u.Target, res.Seq-1)
	}
	delete(want, "gone.txt")
	rwExpect(t, m.Dir, want, "after the undo of a restore")

	// The state survives the write-back and a remount; a restore on an
	// unmounted workspace is refused.
	m.Unmount()
	rwExpect(t, dir, want, "written back after the restores")
	m.Mount()
	rwExpect(t, m.Dir, want, "remounted after the restores")
	m.Unmount()
	rwOneLine(t, m.Run("restore", filepath.Join(dir, "gone.txt"), "--from", "base"), 2, "reynfs restore on an unmounted workspace")
	rwExpect(t, dir, want, "after a restore refused on an unmounted workspace")
}

// coreRunStdin runs the reynfs binary with stdin.
func coreRunStdin(env []string, stdin []byte, args ...string) Result {
	cmd := exec.Command(reynfsBin, args...)
	cmd.Env, cmd.Dir, cmd.Stdin = env, "/", bytes.NewReader(stdin)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := Result{Stdout: so.String(), Stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	case err != nil:
		r.Code, r.Stderr = -1, r.Stderr+err.Error()
	}
	return r
}

// TestAgentState: agent states saved from stdin at several points, with
// checkpoints; agent show prints the state now and at a past point; a
// rewind brings back the state of its target (and its undo the discarded
// one); after unmount, agent show and list work offline on the store.
func TestAgentState(t *testing.T) {
	m := mountProject(t, t.TempDir())
	save := func(name string, state []byte, extra ...string) uint64 {
		t.Helper()
		args := append([]string{"agent", "save", name, "--store", m.Store}, extra...)
		r := coreRunStdin(m.env, state, args...)
		var n int
		var seq uint64
		if r.Code != 0 {
			t.Fatalf("reynfs agent save %s: exit %d: %s", name, r.Code, r.Stderr)
		}
		if _, err := fmt.Sscanf(r.Stdout, "saved "+name+" (%d bytes) at seq %d\n", &n, &seq); err != nil || n != len(state) || seq == 0 {
			t.Fatalf("reynfs agent save %s: %q (%v); want 'saved %s (%d bytes) at seq N'", name, r.Stdout, err, name, len(state))
		}
		return seq
	}
	show := func(name, want string, extra ...string) {
		t.Helper()
		args := append([]string{"agent", "show", name}, extra...)
		r := m.Run(args...)
		if r.Code != 0 || r.Stdout != want {
			t.Errorf("reynfs %s: exit %d, %q, stderr %q; want %q", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr, want)
		}
	}
	list := func(want []string, extra ...string) {
		t.Helper()
		args := append([]string{"agent", "list", "--json"}, extra...)
		r := m.Run(args...)
		var l []struct {
			Name string `json:"name"`
		}
		if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &l) != nil {
			t.Errorf("reynfs %s: exit %d: %q %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
			return
		}
		var names []string
		for _, a := range l {
			names = append(names, a.Name)
		}
		if !slices.Equal(names, want) {
			t.Errorf("reynfs %s: agents %v, want %v", strings.Join(args, " "), names, want)
		}
	}
	st := "--store"
	v1 := "plan v1\nstep 1: read\n"
	v2 := "plan v2\x00with a NUL and no final newline"
	v3 := strings.Repeat("plan v3 is long. ", 20000) // 340 KB, several chunks
	save("planner", []byte(v1))
	save("coder", []byte("coder at c1"))
	writeFile(t, filepath.Join(m.Dir, "f"), []byte("c1"), 0o644)
	c1 := rwCheckpoint(t, m, "c1")
	save("planner", []byte(v2))
	writeFile(t, filepath.Join(m.Dir, "f"), []byte("c2"), 0o644)
	c2 := rwCheckpoint(t, m, "c2")
	s3 := save("planner", []byte(v3))
	save("reviewer", []byte("reviewer after c2"), "-") // "-": stdin too
	writeFile(t, filepath.Join(m.Dir, "f"), []byte("head"), 0o644)

	show("planner", v3, st, m.Store)
	show("planner", v3, "--dir", m.Dir) // found through the mount
	show("planner", v1, st, m.Store, "--at", "c1")
	show("planner", v2, st, m.Store, "--at", "g3")
	show("planner", v2, st, m.Store, "--at", strconv.FormatUint(s3-1, 10))
	show("planner", v3, st, m.Store, "--at", strconv.FormatUint(s3, 10))
	show("coder", "coder at c1", st, m.Store, "--at", "c2")
	list([]string{"coder", "planner", "reviewer"}, st, m.Store)
	list([]string{"coder", "planner"}, st, m.Store, "--at", "c1")
	head := rwHead(t, m)
	for _, args := range [][]string{
		{"agent", "show", "nobody", st, m.Store},
		{"agent", "show", "reviewer", st, m.Store, "--at", "c2"}, // not saved yet at c2
		{"agent", "show", "planner", st, m.Store, "--at", "no-such-label"},
		{"agent", "show", "planner", st, m.Store, "--at", "99999"},
		{"agent", "save", "bad/name", st, m.Store},
		{"agent", "save", "bad name", st, m.Store},
		{"agent", "save", "", st, m.Store},
		{"agent", "save", "planner", filepath.Join(t.TempDir(), "missing-file"), st, m.Store},
		{"agent", "show", st, m.Store},
	} {
		rwOneLine(t, coreRunStdin(m.env, []byte("x"), args...), 2, "reynfs "+strings.Join(args, " "))
	}
	big := coreRunStdin(m.env, make([]byte, 16<<20+1), "agent", "save", "planner", st, m.Store)
	if big.Code != 2 {
		t.Errorf("reynfs agent save planner with a 16 MiB + 1 byte state on stdin: exit %d, stderr %q; want exit 2 (bad input: over the 16 MiB limit)", big.Code, strings.TrimSpace(big.Stderr))
	} else {
		rwOneLine(t, big, 2, "reynfs agent save planner (16 MiB + 1 byte)")
	}
	if h := rwHead(t, m); h != head {
		t.Errorf("refused agent commands made records: head seq %d, want %d", h, head)
	}
	show("planner", v3, st, m.Store)

	// A rewind brings back the agents' states of its target with the tree.
	res := rwRewind(t, m, "c1")
	if res.Target != c1 {
		t.Fatalf("rewind c1 went to %d, want %d", res.Target, c1)
	}
	show("planner", v1, st, m.Store)
	show("coder", "coder at c1", st, m.Store)
	list([]string{"coder", "planner"}, st, m.Store)
	rwOneLine(t, m.Run("agent", "show", "reviewer", st, m.Store), 2, "agent show of an agent saved only in the discarded future")
	if b, _ := os.ReadFile(filepath.Join(m.Dir, "f")); string(b) != "c1" {
		t.Errorf("after rewind c1: f = %q, want c1", b)
	}
	// The undo brings back the discarded states; a rewind to c2, then a save.
	rwRewind(t, m, strconv.FormatUint(res.Reset-1, 10))
	show("planner", v3, st, m.Store)
	show("reviewer", "reviewer after c2", st, m.Store)
	rwRewind(t, m, strconv.FormatUint(c2, 10))
	show("planner", v2, st, m.Store)
	list([]string{"coder", "planner"}, st, m.Store)
	v4 := "plan v4 after the rewind to c2"
	save("planner", []byte(v4))
	show("planner", v4, st, m.Store)
	show("planner", v1, st, m.Store, "--at", "c1")

	// Offline: the store answers without a daemon.
	m.Unmount()
	show("planner", v4, st, m.Store)
	show("planner", v2, st, m.Store, "--at", "c2")
	show("planner", v1, st, m.Store, "--at", "c1")
	show("planner", v3, st, m.Store, "--at", strconv.FormatUint(s3, 10)) // on an abandoned branch
	show("coder", "coder at c1", st, m.Store)
	list([]string{"coder", "planner"}, st, m.Store)
	rwOneLine(t, m.Run("agent", "show", "nobody", st, m.Store), 2, "offline agent show of an unknown agent")
	m.Mount()
	show("planner", v4, st, m.Store)
}

// TestLargeSparseFile: a file over 4 GiB written at a few places only
// (around the 4 GiB boundary, across a chunk boundary, at 5 GiB): its size
// is exact, its blocks far below its size, holes read as zeros, and all of
// it survives the write-back (still sparse on disk) and a remount; a
// truncate down across the boundary and up again zeroes what it cut.
func TestLargeSparseFile(t *testing.T) {
	const (
		gib    = int64(1) << 30
		chunk  = int64(64) << 10
		sparse = int64(64) << 20 // allocation far below the size: at most this
	)
	m := mountProject(t, t.TempDir())
	checkFds(t)
	writes := map[int64]string{
		0:                      "head of the file",
		4*gib - 3:              "ABCDEF", // bytes 4G-3 .. 4G+2
		4*gib + chunk - 5:      "across a chunk boundary",
		5 * gib:                "at five GiB",
		5*gib + 3*chunk + 1000: "the end",
	}
	size := 5*gib + 3*chunk + 1000 + int64(len("the end"))
	// want returns the expected bytes [off, off+n) of the file.
	want := func(off, n int64) []byte {
		b := make([]byte, n)
		for at, s := range writes {
			for i := range int64(len(s)) {
				if p := at + i - off; p >= 0 && p < n {
					b[p] = s[i]
				}
			}
		}
		return b
	}
	probes := []struct{ off, n int64 }{
		{0, 4096}, {gib, chunk}, {2*gib - 7, 100}, {4*gib - 4096, 8192}, {4*gib + chunk - 100, 200},
		{5*gib - 10, 40}, {5*gib + 2*chunk, 2 * chunk}, {size - 10, 10},
	}
	check := func(p, when string) {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatalf("%s: stat: %v", when, err)
		}
		if st.Size != size {
			t.Errorf("%s: size %d, want %d", when, st.Size, size)
		}
		if st.Blocks <= 0 || st.Blocks*512 > sparse {
			t.Errorf("%s: %d blocks (%d bytes allocated) for a sparse file of %d bytes with %d bytes written; want 0 < allocated <= %d",
				when, st.Blocks, st.Blocks*512, size, len(strings.Join(slices.Collect(maps.Values(writes)), "")), sparse)
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("%s: open: %v", when, err)
		}
		defer unix.Close(fd)
		for _, pr := range probes {
			got := make([]byte, pr.n)
			n, err := unix.Pread(fd, got, pr.off)
			if err != nil || int64(n) != min(pr.n, size-pr.off) {
				t.Errorf("%s: pread %d bytes at %d: %d, %v", when, pr.n, pr.off, n, err)
				continue
			}
			if w := want(pr.off, int64(n)); !bytes.Equal(got[:n], w) {
				t.Errorf("%s: bytes at %d..%d differ from what was written (holes must read as zeros):\ngot  %q\nwant %q",
					when, pr.off, pr.off+int64(n), coreShort(got[:n]), coreShort(w))
			}
		}
		if n, err := unix.Pread(fd, make([]byte, 10), size); n != 0 || err != nil {
			t.Errorf("%s: pread at EOF: %d, %v; want 0, nil", when, n, err)
		}
	}

	p := filepath.Join(m.Dir, "big.bin")
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range slices.Sorted(maps.Keys(writes)) {
		if n, err := unix.Pwrite(fd, []byte(writes[at]), at); err != nil || n != len(writes[at]) {
			unix.Close(fd)
			t.Fatalf("pwrite at %d: %d, %v", at, n, err)
		}
	}
	if err := unix.Fsync(fd); err != nil {
		t.Errorf("fsync: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Size != size {
		t.Errorf("fstat of the open file: size %d, %v; want %d", st.Size, err, size)
	}
	unix.Close(fd)
	check(p, "mounted")

	m.Unmount()
	check(filepath.Join(m.Dir, "big.bin"), "written back")
	m.Mount()
	check(p, "remounted")

	// Truncate down across the 4 GiB boundary, then up again: the bytes
	// cut off read as zeros, not as the old data.
	if err := unix.Truncate(p, 4*gib+1); err != nil {
		t.Fatal(err)
	}
	writes = map[int64]string{0: "head of the file", 4*gib - 3: "ABCD"}
	size = 4*gib + 1
	probes = []struct{ off, n int64 }{{0, 4096}, {4*gib - 4096, 4097}}
	check(p, "truncated to 4 GiB + 1")
	if err := unix.Truncate(p, 6*gib); err != nil {
		t.Fatal(err)
	}
	size = 6 * gib
	probes = []struct{ off, n int64 }{{0, 4096}, {4*gib - 4096, 8192}, {4*gib + chunk - 100, 200}, {5*gib - 10, 40}, {6*gib - 100, 100}}
	check(p, "truncated down, then up to 6 GiB")
	m.Unmount()
	check(filepath.Join(m.Dir, "big.bin"), "written back after the truncates")
	m.Mount()
	check(p, "remounted after the truncates")
}

// coreShort shows a byte slice in a failure message: its non-zero runs
// and where they are.
func coreShort(b []byte) string {
	var parts []string
	for i := 0; i < len(b); {
		if b[i] == 0 {
			j := i
			for j < len(b) && b[j] == 0 {
				j++
			}
			parts = append(parts, fmt.Sprintf("[%d zeros]", j-i))
			i = j
			continue
		}
		j := i
		for j < len(b) && b[j] != 0 {
			j++
		}
		parts = append(parts, fmt.Sprintf("@%d %q", i, b[i:j]))
		i = j
	}
	return strings.Join(parts, " ")
}

// coreMmap maps the whole file p shared and writable.
func coreMmap(t testing.TB, p string, size int) (fd int, mem []byte) {
	t.Helper()
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		t.Fatalf("mmap MAP_SHARED %s: %v", p, err)
	}
	return fd, mem
}

// TestMmapShared: writes through a shared writable mapping (across page
// and chunk boundaries, into a region grown by ftruncate) reach the file:
// read(2) in a fresh open, the view of a checkpoint (served by the daemon,
// not the page cache), the write-back and a remount all see them; dirty
// pages not yet msync'd are in a checkpoint cut after them, and a rewind
// with dirty pages still mapped shows its target.
func TestMmapShared(t *testing.T) {
	m := mountProject(t, t.TempDir())
	checkFds(t)
	p := filepath.Join(m.Dir, "mapped.bin")
	size := 200 << 10
	want := bytesRepeat("0123456789abcdef", size/16)
	rwWriteSync(t, p, string(want))
	poke := func(mem []byte, off int, s string) {
		copy(mem[off:], s)
		copy(want[off:], s)
	}
	readAll := func(path, when string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: read(2) of %s: %d bytes, %v; want %d bytes with the writes made through the mapping (first difference at %d)",
				when, path, len(got), err, len(want), coreFirstDiff(got, want))
		}
	}
	view := func(label string) string {
		t.Helper()
		rwCheckpoint(t, m, label)
		gens := rwLog(t, m).Gens
		return filepath.Join(m.Dir, ".reynfs", "generations", fmt.Sprintf("g%d", gens[0].ID), "mapped.bin")
	}

	// Writes through the mapping, msync, munmap.
	fd, mem := coreMmap(t, p, size)
	poke(mem, 0, "MMAP at 0")
	poke(mem, 4096-3, "across a page")
	poke(mem, 64<<10-4, "across a chunk")
	poke(mem, size-7, "the end")
	if !bytes.Equal(mem, want) {
		t.Errorf("the mapping does not read back what was written through it")
	}
	if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
		t.Errorf("msync: %v", err)
	}
	if err := unix.Munmap(mem); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	readAll(p, "after msync and munmap")
	readAll(view("msynced"), "view of a checkpoint after msync")

	// Grow the file with ftruncate and write into the new region.
	if err := os.Truncate(p, int64(size+8192)); err != nil {
		t.Fatal(err)
	}
	want = append(want, make([]byte, 8192)...)
	size += 8192
	fd, mem = coreMmap(t, p, size)
	poke(mem, size-8192+10, "in the grown region")
	if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
		t.Errorf("msync: %v", err)
	}
	unix.Munmap(mem)
	unix.Close(fd)
	readAll(p, "after writing into a grown region")

	// Dirty pages not msync'd: a checkpoint must contain them (reynfs
	// checkpoint flushes the mount first), and so does close.
	fd, mem = coreMmap(t, p, size)
	poke(mem, 100000, "dirty, not msync'd")
	if b, err := os.ReadFile(view("unsynced")); err != nil || !bytes.Equal(b, want) {
		t.Errorf("a checkpoint cut while a shared mapping has dirty pages (no msync) misses them: the view of the generation differs from the file at %d (%v); DESIGN: a checkpoint first flushes dirty pages",
			coreFirstDiff(b, want), err)
	}
	unix.Munmap(mem)
	unix.Close(fd)
	readAll(p, "after munmap and close without msync")

	m.Unmount()
	readAll(p, "written back")
	m.Mount()
	readAll(p, "remounted")
	readAll(view("remounted"), "view after a remount")

	// A rewind while a mapping has dirty pages: the file is the target.
	before := string(want)
	rwCheckpoint(t, m, "before")
	fd, mem = coreMmap(t, p, size)
	poke(mem, 5000, "DIRTY PAGE")
	rwRewind(t, m, "before")
	if b, err := os.ReadFile(p); err != nil || string(b) != before {
		t.Errorf("after a rewind to 'before' with a dirty shared mapping (no msync), read(2) differs from the target at %d (%v)",
			coreFirstDiff(b, []byte(before)), err)
	}
	unix.Munmap(mem)
	unix.Close(fd)
	if b, err := os.ReadFile(p); err != nil || string(b) != before {
		t.Errorf("after a rewind with a dirty shared mapping, then munmap and close: read(2) differs from the target at %d (%v): the old mapping wrote into the rewound tree",
			coreFirstDiff(b, []byte(before)), err)
	}
	m.Unmount()
	if b, err := os.ReadFile(p); err != nil || string(b) != before {
		t.Errorf("written back after a rewind with a dirty shared mapping: differs from the target at %d (%v)", coreFirstDiff(b, []byte(before)), err)
	}
	m.Mount()
}

// coreFirstDiff is the first offset where a and b differ (-1: equal).
func coreFirstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// The crash writer is this test binary re-executed with coreCrashEnv set
// to a directory inside a mount: init runs it before TestMain (which would
// build reynfs again) and exits.
const (
	coreCrashEnv   = "REYNFS_CORE_CRASH_WRITER"
	coreCrashFiles = 4
)

func init() {
	if dir := os.Getenv(coreCrashEnv); dir != "" {
		os.Exit(coreCrashWriter(dir))
	}
}

// coreCrashRecord is record n of file k: a header, 1 to 9000 bytes that
// depend on (k, n), a newline.
func coreCrashRecord(k, n int) []byte {
	l := (n*7919+k*104729)%9000 + 1
	b := fmt.Appendf(nil, "<%d:%d:%d>", k, n, l)
	for i := range l {
		b = append(b, byte('a'+(n+i+k)%26))
	}
	return append(b, '\n')
}

// coreCrashParse returns how many whole records file k holds, and the
// offset of the first byte that is not one (len(data) if none).
func coreCrashParse(k int, data []byte) (records, end int) {
	for {
		rec := coreCrashRecord(k, records)
		if !bytes.HasPrefix(data[end:], rec) {
			return records, end
		}
		end += len(rec)
		records++
	}
}

// coreCrashWriter appends records to coreCrashFiles files in dir, one
// goroutine per file, syncs after each (fsync or fdatasync, by
// file) and prints "ack K N" once record N
// of file K is acknowledged. It runs until a write fails (the daemon is
// killed) and exits 0 then, 3 if a file holds something else than
// records.
func coreCrashWriter(dir string) int {
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...) // one write(2) per line
	}
	var wg sync.WaitGroup
	code := make(chan int, coreCrashFiles)
	for k := range coreCrashFiles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := filepath.Join(dir, fmt.Sprintf("f%d", k))
			data, err := os.ReadFile(p)
			if err != nil && !os.IsNotExist(err) {
				say("error %d read: %v", k, err)
				return
			}
			next, end := coreCrashParse(k, data)
			if end != len(data) {
				say("bad %d: %d bytes after %d whole records", k, len(data)-end, next)
				code <- 3
				return
			}
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				say("error %d open: %v", k, err)
				return
			}
			defer f.Close()
			if d, err := os.Open(dir); err == nil { // the new name is durable too
				err = d.Sync()
				d.Close()
				if err != nil {
					say("error %d fsync dir: %v", k, err)
					return
				}
			}
			for n := next; ; n++ {
				if _, err := f.Write(coreCrashRecord(k, n)); err != nil {
					say("error %d write %d: %v", k, n, err)
					return
				}
				if err := coreCrashSync(k, f); err != nil {
					say("error %d sync %d: %v", k, n, err)
					return
				}
				say("ack %d %d", k, n)
			}
		}()
	}
	wg.Wait()
	close(code)
	return <-code // 0 when closed empty
}

// TestCrashFsync: a writer process appends records to several files in the
// mount and fsyncs after each, printing what fsync acknowledged; the
// daemon is SIGKILLed at a random moment, reynfs mount clears the dead
// mount, and every acknowledged record is there, whole, in order, with
// nothing after the last record but whole records. Three rounds on the
// same store, at different kill points. Then: a file written and
// fsync'd, renamed (also over another file) and the directory fsync'd,
// and an unlink with the directory fsync'd, survive a kill.
func TestCrashFsync(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("REYNFS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("REYNFS_SEED: %v", err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	t.Logf("seed %d (REYNFS_SEED=%d replays the kill points)", seed, seed)
	m := mountProject(t, t.TempDir())
	dir := filepath.Join(m.Dir, "crash")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	acked := make([]int, coreCrashFiles) // highest acknowledged record + 1, per file
	check := func(root, when string) {
		t.Helper()
		for k := range coreCrashFiles {
			p := filepath.Join(root, "crash", fmt.Sprintf("f%d", k))
			data, err := os.ReadFile(p)
			if err != nil && !(os.IsNotExist(err) && acked[k] == 0) {
				t.Fatalf("%s: %v", when, err)
			}
			n, end := coreCrashParse(k, data)
			if n < acked[k] || end != len(data) {
				t.Fatalf("%s: crash/f%d holds %d whole records (%d bytes of %d); want at least the %d acknowledged by %s, and nothing but whole records (bytes %d.. are %s)",
					when, k, n, end, len(data), acked[k], []string{"fsync", "fdatasync", "fsync of another fd", "fsync"}[k%4], end, coreShort(data[end:min(len(data), end+80)]))
			}
			if n > acked[k]+1 { // the writer writes record n+1 only once n is acknowledged
				t.Fatalf("%s: crash/f%d holds %d records, but only %d were acknowledged and the writer never had more than one unacknowledged", when, k, n, acked[k])
			}
		}
	}
	for round := range 3 {
		killAt := 30 + rng.IntN(220)
		delay := time.Duration(rng.IntN(4000)) * time.Microsecond
		acks, extra := coreCrashRound(t, m, dir, killAt, delay, acked)
		t.Logf("round %d: killed after %d acks (+%d read after the kill, delay %v); acknowledged per file %v", round, acks, extra, delay, acked)
		rwRemountAfterCrash(t, m)
		check(m.Dir, fmt.Sprintf("round %d, remounted after kill -9", round))
	}

	// Create, fsync, rename (also over an existing name), fsync the
	// directory; unlink, fsync the directory; then kill -9.
	d := filepath.Join(m.Dir, "renames")
	rwWriteSync(t, filepath.Join(m.Dir, "renames-old"), "x") // ensures the directory's parent is durable
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	rwWriteSync(t, filepath.Join(d, "existing"), "old content")
	rwWriteSync(t, filepath.Join(d, "doomed"), "to be unlinked")
	coreSyncDir(t, d)
	coreSyncDir(t, m.Dir)
	rwWriteSync(t, filepath.Join(d, "new.tmp"), "renamed into place")
	rwWriteSync(t, filepath.Join(d, "existing.tmp"), "replaced by rename")
	for _, r := range [][2]string{{"new.tmp", "final"}, {"existing.tmp", "existing"}} {
		if err := os.Rename(filepath.Join(d, r[0]), filepath.Join(d, r[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(d, "doomed")); err != nil {
		t.Fatal(err)
	}
	coreSyncDir(t, d)
	m.Kill9()
	rwRemountAfterCrash(t, m)
	rwExpect(t, d, rwState{"final": "renamed into place", "existing": "replaced by rename"}, "renames after kill -9")
	check(m.Dir, "after the rename round")
	m.Unmount()
	check(m.Dir, "written back")
	rwExpect(t, d, rwState{"final": "renamed into place", "existing": "replaced by rename"}, "renames written back")
}

// coreSyncDir fsyncs a directory.
func coreSyncDir(t testing.TB, dir string) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", dir, err)
	}
}

// coreCrashRound runs the writer until it has acknowledged killAt records,
// waits delay, kills the daemon with SIGKILL, and collects every
// acknowledgement the writer printed (also those read after the kill: an
// fsync cannot succeed once the daemon is dead). acked is raised to the
// acknowledged counts.
func coreCrashRound(t *testing.T, m *Mount, dir string, killAt int, delay time.Duration, acked []int) (before, after int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashFsync$", "-test.count=1")
	cmd.Env = append(os.Environ(), coreCrashEnv+"="+dir)
	cmd.Dir = "/"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var errs []string
	// take records an acknowledgement; it counts those of fsync and
	// fdatasync (see coreCrashSync).
	take := func(line string) bool {
		var k, n int
		if _, err := fmt.Sscanf(line, "ack %d %d", &k, &n); err == nil && k >= 0 && k < len(acked) {
			acked[k] = max(acked[k], n+1)
			return k%4 != 2
		}
		errs = append(errs, line)
		return false
	}
	timeout := time.After(2 * time.Minute)
	for before < killAt {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the writer stopped after %d acks: %v; stderr: %s", before, errs, stderr.String())
			}
			if take(line) {
				before++
			}
		case <-timeout:
			t.Fatalf("the writer acknowledged only %d records in 2 minutes: %v", before, errs)
		}
	}
	time.Sleep(delay)
	m.Kill9()
	done := make(chan error, 1)
	go func() {
		for line := range lines {
			if take(line) {
				after++
			}
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		killed = true
		if err != nil {
			t.Fatalf("the writer: %v: %v; stderr: %s", err, errs, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the writer did not stop within 30 s of the daemon's death: %v", errs)
	}
	if len(errs) == 0 {
		t.Errorf("the writer reported no failed write or fsync after the daemon was killed")
	}
	return before, after
}

// coreCrashSync makes file k durable the way file k of the crash writer
// does: fsync(2), fdatasync(2), fsync(2) of another descriptor of the same
// file, fsync(2). (Not syncfs(2): Linux does not forward it to a FUSE
// server, so it is no durability point on reynfs, as the README says.)
func coreCrashSync(k int, f *os.File) error {
	switch k % 4 {
	case 1:
		return unix.Fdatasync(int(f.Fd()))
	case 2:
		g, err := os.Open(f.Name())
		if err != nil {
			return err
		}
		defer g.Close()
		return g.Sync()
	}
	return f.Sync()
}
