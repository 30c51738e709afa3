package objstore_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstoretest"
)

func newDir(t *testing.T) objstore.Backend {
	b, err := objstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDirConformance(t *testing.T) {
	objstoretest.Run(t, newDir)
}

// TestDirConformanceNoOpenat2 runs the suite on the openat walk that
// kernels without openat2 get.
func TestDirConformanceNoOpenat2(t *testing.T) {
	objstore.NoOpenat2.Store(true)
	t.Cleanup(func() { objstore.NoOpenat2.Store(false) })
	objstoretest.Run(t, newDir)
}

func TestOpenDirErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"rel/dir", "must be absolute"},
		{filepath.Join(dir, "missing"), "no such directory"},
		{file, "not a directory"},
	} {
		_, err := objstore.OpenDir(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("OpenDir(%s) = %v, want a one-line error with %q", c.path, err, c.want)
		}
	}
}

// TestDirRefusesSymlinks plants symlinks where a hostile user of the
// shared directory could, and checks that nothing reads, writes or lists
// through them, with and without openat2.
func TestDirRefusesSymlinks(t *testing.T) {
	for _, walk := range []bool{false, true} {
		t.Run(map[bool]string{false: "openat2", true: "walk"}[walk], func(t *testing.T) {
			objstore.NoOpenat2.Store(walk)
			t.Cleanup(func() { objstore.NoOpenat2.Store(false) })
			ctx := context.Background()
			root, outside := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
				t.Fatal(err)
			}
			must(t, os.Symlink(outside, filepath.Join(root, "ws")))
			must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "HEAD")))
			must(t, os.Mkdir(filepath.Join(root, "packs"), 0o755))
			must(t, os.Symlink("../HEAD", filepath.Join(root, "packs", "x.pack")))
			b, err := objstore.OpenDir(root)
			must(t, err)

			for _, key := range []string{"ws/secret", "HEAD", "packs/x.pack"} {
				if data, _, err := b.Get(ctx, key); err == nil {
					t.Errorf("Get(%s) through a symlink returned %q", key, data)
				} else if !strings.Contains(err.Error(), "symlink") && !errors.Is(err, objstore.ErrNotExist) {
					t.Errorf("Get(%s): %v, want a symlink refusal", key, err)
				}
				if _, err := b.Stat(ctx, key); err == nil {
					t.Errorf("Stat(%s) through a symlink succeeded", key)
				}
			}
			if err := b.Put(ctx, "ws/secret", []byte("owned")); err == nil {
				t.Error("Put(ws/secret) through a symlinked directory succeeded")
			}
			if _, err := b.PutIfAbsent(ctx, "ws/new", []byte("owned")); err == nil {
				t.Error("PutIfAbsent(ws/new) through a symlinked directory succeeded")
			}
			if _, err := b.PutIfMatch(ctx, "HEAD", []byte("owned"), objstore.ETagOf([]byte("secret"))); err == nil {
				t.Error("PutIfMatch(HEAD) over a symlink to a file succeeded")
			}
			// Delete may say "no such object" (nil) but must not remove it.
			if err := b.Delete(ctx, "ws/secret"); err != nil && !strings.Contains(err.Error(), "symlink") {
				t.Errorf("Delete(ws/secret) through a symlinked directory: %v", err)
			}
			must(t, b.Delete(ctx, "HEAD"))
			if fi, err := os.Lstat(filepath.Join(root, "HEAD")); err == nil && fi.Mode()&os.ModeSymlink == 0 {
				t.Error("HEAD is no longer the planted symlink")
			}
			if got, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(got) != "secret" {
				t.Fatalf("the file outside was changed: %q, %v", got, err)
			}
			if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
				t.Fatal("a file was created outside the root")
			}
			var keys []string
			must(t, b.List(ctx, "", func(in objstore.Info) error { keys = append(keys, in.Key); return nil }))
			if len(keys) != 0 {
				t.Fatalf("List followed symlinks: %q", keys)
			}
		})
	}
}

// TestDirIgnoresForeignFiles: temp files left by a crash, the lock file,
// names no key can have, FIFOs and empty directories never show up, and
// a FIFO at a key does not hang Get.
func TestDirIgnoresForeignFiles(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b, err := objstore.OpenDir(root)
	must(t, err)
	must(t, b.Put(ctx, "packs/a.pack", []byte("a")))
	for _, name := range []string{"packs/#tmp.0123456789abcdef", "#lock", "packs/with space", "packs/ünï"} {
		must(t, os.WriteFile(filepath.Join(root, name), []byte("junk"), 0o644))
	}
	must(t, os.MkdirAll(filepath.Join(root, "empty", "dirs"), 0o755))
	must(t, syscall.Mkfifo(filepath.Join(root, "packs", "fifo"), 0o644))
	var keys []string
	must(t, b.List(ctx, "", func(in objstore.Info) error { keys = append(keys, in.Key); return nil }))
	if strings.Join(keys, " ") != "packs/a.pack" {
		t.Fatalf("List = %q, want only packs/a.pack", keys)
	}
	done := make(chan error, 1)
	go func() { _, _, err := b.Get(ctx, "packs/fifo"); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Get of a FIFO succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Get of a FIFO hangs")
	}
}

// TestDirWritesLeaveNoTemp: after each kind of write, won or lost, the
// directory holds the objects and the lock file only.
func TestDirWritesLeaveNoTemp(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b, err := objstore.OpenDir(root)
	must(t, err)
	must(t, b.Put(ctx, "ws/w/HEAD", []byte("1")))
	in, err := b.PutIfAbsent(ctx, "ws/w/x", []byte("x"))
	must(t, err)
	if _, err := b.PutIfAbsent(ctx, "ws/w/x", []byte("y")); !errors.Is(err, objstore.ErrPrecondition) {
		t.Fatal(err)
	}
	if _, err := b.PutIfMatch(ctx, "ws/w/x", []byte("y"), "stale"); !errors.Is(err, objstore.ErrPrecondition) {
		t.Fatal(err)
	}
	_, err = b.PutIfMatch(ctx, "ws/w/x", []byte("z"), in.ETag)
	must(t, err)
	ents, err := os.ReadDir(filepath.Join(root, "ws", "w"))
	must(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "HEAD x" {
		t.Fatalf("ws/w holds %q, want HEAD and x only", names)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDirKeyConflict: file:// cannot hold a and a/b; both orders fail
// with a clear error, not a misleading "does not exist".
func TestDirKeyConflict(t *testing.T) {
	ctx := context.Background()
	b := newDir(t)
	must(t, b.Put(ctx, "a", []byte("a")))
	must(t, b.Put(ctx, "d/x", []byte("x")))
	for _, key := range []string{"a/b", "d"} {
		err := b.Put(ctx, key, []byte("y"))
		if err == nil || errors.Is(err, objstore.ErrNotExist) || !strings.Contains(err.Error(), "cannot hold both") {
			t.Errorf("Put(%s): %v, want the a-and-a/b error", key, err)
		}
		if _, err := b.PutIfAbsent(ctx, key, []byte("y")); err == nil || !strings.Contains(err.Error(), "cannot hold both") {
			t.Errorf("PutIfAbsent(%s): %v, want the a-and-a/b error", key, err)
		}
	}
}

// TestDirCASAcrossProcesses: two other processes and this one share the
// directory and increment one counter by PutIfMatch: no increment is
// lost, so the lock and the compare hold across processes, not only
// across goroutines.
func TestDirCASAcrossProcesses(t *testing.T) {
	if dir := os.Getenv("REYNFS_OBJSTORE_CAS_DIR"); dir != "" {
		casIncrements(t, dir)
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	b, err := objstore.OpenDir(dir)
	must(t, err)
	_, err = b.PutIfAbsent(ctx, "n", []byte("0"))
	must(t, err)
	var cmds []*exec.Cmd
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDirCASAcrossProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), "REYNFS_OBJSTORE_CAS_DIR="+dir)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		must(t, cmd.Start())
		cmds = append(cmds, cmd)
	}
	t.Cleanup(func() {
		for _, c := range cmds {
			if c.ProcessState == nil {
				c.Process.Kill()
				c.Wait()
			}
		}
	})
	casIncrements(t, dir)
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper process: %v", err)
		}
	}
	got, _, err := b.Get(ctx, "n")
	must(t, err)
	if string(got) != "60" {
		t.Fatalf("counter = %s after 3 processes × 20 increments", got)
	}
}

func casIncrements(t *testing.T, dir string) {
	ctx := context.Background()
	b, err := objstore.OpenDir(dir)
	must(t, err)
	for done := 0; done < 20; {
		data, in, err := b.Get(ctx, "n")
		must(t, err)
		n, err := strconv.Atoi(string(data))
		must(t, err)
		if _, err := b.PutIfMatch(ctx, "n", []byte(strconv.Itoa(n+1)), in.ETag); err == nil {
			done++
		} else if !errors.Is(err, objstore.ErrPrecondition) {
			t.Fatal(err)
		}
	}
}
