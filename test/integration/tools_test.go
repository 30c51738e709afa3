package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// gitEnv isolates git from the host's configuration.
var gitEnv = []string{
	"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
	"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
}

// TestGit: git init/add/commit/log/status/fsck over several commits inside
// the mount, and the repository is still sound after unmount and remount.
func TestGit(t *testing.T) {
	requireTool(t, "git")
	m := mountProject(t, t.TempDir())
	checkFds(t)
	repo := filepath.Join(m.Dir, "repo")
	sh(t, m.Dir, gitEnv, "git init -q -b main repo")
	for i := 0; i < 6; i++ {
		for j := 0; j <= i; j++ {
			writeFile(t, filepath.Join(repo, fmt.Sprintf("d%d/f%d.txt", j%3, j)),
				[]byte(strings.Repeat(fmt.Sprintf("commit %d file %d\n", i, j), 200*(j+1))), 0o644)
		}
		if i == 3 {
			sh(t, repo, gitEnv, "git rm -qf d0/f0.txt && git mv d1/f1.txt renamed.txt")
		}
		sh(t, repo, gitEnv, fmt.Sprintf("git add -A && git commit -q -m 'commit %d'", i))
	}
	check := func(when string) {
		t.Helper()
		if n := strings.Count(sh(t, repo, gitEnv, "git log --oneline"), "\n"); n != 6 {
			t.Errorf("%s: git log: %d commits, want 6", when, n)
		}
		if st := sh(t, repo, gitEnv, "git status --porcelain"); st != "" {
			t.Errorf("%s: git status not clean:\n%s", when, st)
		}
		sh(t, repo, gitEnv, "git fsck --full --strict --no-progress")
		sh(t, repo, gitEnv, "git gc -q && git fsck --full --no-progress")
	}
	check("mounted")
	m.Unmount()
	check("written back")
	m.Mount()
	check("remounted")
}

// tarSource is the tree TestTar extracts: a few thousand files of GOROOT/src.
func tarSource(t *testing.T) (root string, dirs []string) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	root = filepath.Join(strings.TrimSpace(string(out)), "src")
	if testing.Short() {
		return root, []string{"net"}
	}
	return root, []string{"net", "crypto", "go"}
}

// TestTar extracts a real source tree inside the mount and compares it
// with the original, mounted, written back and remounted.
func TestTar(t *testing.T) {
	requireTool(t, "tar")
	requireTool(t, "diff")
	src, dirs := tarSource(t)
	archive := filepath.Join(t.TempDir(), "src.tar")
	sh(t, src, nil, "tar cf "+archive+" "+strings.Join(dirs, " "))
	m := mountProject(t, t.TempDir())
	checkFds(t)
	start := time.Now()
	sh(t, m.Dir, nil, "tar xf "+archive)
	t.Logf("tar x of %s: %v", strings.Join(dirs, " "), time.Since(start))
	want, err := snapshot(filepath.Join(src, dirs[0]))
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, d := range dirs {
			sh(t, "/", nil, fmt.Sprintf("diff -r %s %s", filepath.Join(src, d), filepath.Join(m.Dir, d)))
		}
		got, err := snapshot(filepath.Join(m.Dir, dirs[0]))
		if err != nil {
			t.Fatal(err)
		}
		// tar restores file mtimes (to the second); modes come from the archive.
		if d := compareTrees(want, got, cmpOpts{}); len(d) > 0 {
			t.Errorf("%s: %s differs:\n%s", when, dirs[0], truncList(d, 20))
		}
		for k, e := range want {
			if g := got[k]; e.Type == "file" && g.Mtime/1e9 != e.Mtime/1e9 {
				t.Errorf("%s: %s: mtime %v, want %v", when, k, time.Unix(0, g.Mtime), time.Unix(0, e.Mtime))
				break
			}
		}
	}
	check("mounted")
	m.Unmount()
	check("written back")
	m.Mount()
	check("remounted")
}

// TestGoBuild builds and runs a small module created inside the mount.
func TestGoBuild(t *testing.T) {
	m := mountProject(t, t.TempDir())
	mod := filepath.Join(m.Dir, "hello")
	writeFile(t, filepath.Join(mod, "go.mod"), []byte("module example.com/hello\n\ngo 1.22\n"), 0o644)
	writeFile(t, filepath.Join(mod, "greet/greet.go"), []byte(
		"package greet\n\nimport \"strings\"\n\nfunc Hello(n string) string { return \"hello, \" + strings.ToUpper(n) }\n"), 0o644)
	writeFile(t, filepath.Join(mod, "greet/greet_test.go"), []byte(
		"package greet\n\nimport \"testing\"\n\nfunc TestHello(t *testing.T) {\n\tif Hello(\"x\") != \"hello, X\" {\n\t\tt.Fatal(Hello(\"x\"))\n\t}\n}\n"), 0o644)
	writeFile(t, filepath.Join(mod, "main.go"), []byte(
		"package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/hello/greet\"\n)\n\nfunc main() { fmt.Println(greet.Hello(\"reynfs\")) }\n"), 0o644)
	env := []string{"GOFLAGS=-mod=mod", "GOCACHE=" + t.TempDir(), "GOPROXY=off", "GOWORK=off", "CGO_ENABLED=0"}
	// A cold GOCACHE compiles the runtime: about 25 s here per go command.
	script := "go build -o bin/hello . && go vet ./... && go test -count=1 ./..."
	if testing.Short() {
		script = "go build -o bin/hello ."
	}
	sh(t, mod, env, script)
	if out := sh(t, mod, nil, "./bin/hello"); out != "hello, REYNFS\n" {
		t.Errorf("built binary printed %q", out)
	}
	m.Unmount()
	if out := sh(t, mod, nil, "./bin/hello"); out != "hello, REYNFS\n" {
		t.Errorf("written-back binary printed %q", out)
	}
}

// TestSQLite runs 1000 inserts in transactions with the WAL and with the
// default rollback journal; integrity_check must say ok, also after remount.
func TestSQLite(t *testing.T) {
	requireTool(t, "sqlite3")
	m := mountProject(t, t.TempDir())
	var script strings.Builder
	script.WriteString("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, b BLOB);\n")
	for tx := 0; tx < 20; tx++ {
		script.WriteString("BEGIN;\n")
		for i := 0; i < 50; i++ {
			fmt.Fprintf(&script, "INSERT INTO t(v, b) VALUES('row %d-%d', randomblob(%d));\n", tx, i, 100+(tx*50+i)%3000)
		}
		script.WriteString("COMMIT;\n")
	}
	script.WriteString("DELETE FROM t WHERE id % 7 = 0;\nVACUUM;\n")
	for _, mode := range []string{"wal", "delete"} {
		db := filepath.Join(m.Dir, mode+".db")
		pre := ""
		if mode == "wal" {
			pre = "PRAGMA journal_mode=WAL;\n"
		}
		cmd := exec.Command("sqlite3", "-bail", db)
		cmd.Stdin = strings.NewReader(pre + script.String())
		if out, err := cmd.CombinedOutput(); err != nil || (mode == "wal" && strings.TrimSpace(string(out)) != "wal") {
			t.Fatalf("sqlite3 %s: %v\n%s", mode, err, out)
		}
	}
	check := func(when string) {
		t.Helper()
		for _, mode := range []string{"wal", "delete"} {
			db := filepath.Join(m.Dir, mode+".db")
			out := sh(t, "/", nil, fmt.Sprintf("sqlite3 %s 'PRAGMA integrity_check; SELECT count(*) FROM t;'", db))
			if want := "ok\n858\n"; out != want {
				t.Errorf("%s: %s: got %q, want %q", when, mode, out, want)
			}
		}
	}
	check("mounted")
	m.Unmount()
	check("written back")
	m.Mount()
	check("remounted")
}

// TestRoundTrip: contents, modes, symlinks, hard links, user xattrs and
// mtimes survive unmount (the write-back) and a remount.
func TestRoundTrip(t *testing.T) {
	m := mountProject(t, t.TempDir())
	d := m.Dir
	writeFile(t, d+"/a/plain.txt", []byte("plain\n"), 0o644)
	writeFile(t, d+"/a/exec.sh", []byte("#!/bin/sh\necho hi\n"), 0o755)
	writeFile(t, d+"/a/private", []byte("secret"), 0o600)
	writeFile(t, d+"/a/b/c/deep", make([]byte, 300<<10), 0o640)
	writeFile(t, d+"/empty", nil, 0o444)
	for _, step := range []error{
		os.Chmod(d+"/a/b", 0o750),
		os.Mkdir(d+"/sticky", 0o1777),
		os.Chmod(d+"/sticky", 0o1777),
		os.Symlink("a/plain.txt", d+"/rel-link"),
		os.Symlink("/nonexistent/target", d+"/dangling"),
		os.Symlink("../plain.txt", d+"/a/b/up-link"),
		os.Link(d+"/a/plain.txt", d+"/hard"),
		unix.Setxattr(d+"/a/plain.txt", "user.color", []byte("blue"), 0),
		unix.Setxattr(d+"/a/b", "user.dir", []byte("x\x00y"), 0),
		unix.Setxattr(d+"/empty", "user.big", []byte(strings.Repeat("z", 3000)), 0),
		os.Chtimes(d+"/a/exec.sh", time.Unix(1e9, 123456789), time.Unix(1e9, 123456789)),
		os.Chtimes(d+"/a/b/c", time.Unix(1.5e9, 0), time.Unix(1.5e9, 0)),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	want, err := snapshot(d)
	if err != nil {
		t.Fatal(err)
	}
	ino, _, _ := statIno(d + "/hard")
	check := func(when string) {
		t.Helper()
		got, err := snapshot(d)
		if err != nil {
			t.Fatal(err)
		}
		if diffs := compareTrees(want, got, cmpOpts{mtime: true}); len(diffs) > 0 {
			t.Errorf("%s: tree differs:\n%s", when, truncList(diffs, 30))
		}
		i1, n1, err1 := statIno(d + "/hard")
		i2, n2, err2 := statIno(d + "/a/plain.txt")
		if err1 != nil || err2 != nil || i1 != i2 || n1 != 2 || n2 != 2 {
			t.Errorf("%s: hard link: ino %d/%d nlink %d/%d (%v %v), want one inode, nlink 2", when, i1, i2, n1, n2, err1, err2)
		}
		if when == "remounted" && i1 != ino {
			t.Errorf("remounted: hard link inode %d, was %d inside the first mount", i1, ino)
		}
	}
	check("mounted")
	m.Unmount()
	check("written back")
	m.Mount()
	check("remounted")
}
