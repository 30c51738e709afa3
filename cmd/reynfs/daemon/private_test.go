package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reynfs/reynfs/agents/api"
)

func TestPrepareStore(t *testing.T) {
	base := t.TempDir()
	store := filepath.Join(base, "new", "store")
	sd, err := PrepareStore(store)
	if err != nil || !sd.Created {
		t.Fatalf("PrepareStore(new): %+v, %v; want created", sd, err)
	}
	sd.Log.Close()
	if fi, err := os.Lstat(store); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("new store: %v, %v; want private", fi.Mode(), err)
	}
	if sd, err = PrepareStore(store); err != nil || sd.Created {
		t.Fatalf("PrepareStore(existing): %+v, %v; want not created", sd, err)
	}
	sd.Log.Close()

	readable := filepath.Join(base, "readable")
	mkdirMode(t, readable, 0o755)
	sd, err = PrepareStore(readable)
	if err != nil || sd.Tightened != 0o755 {
		t.Fatalf("PrepareStore(0755): %+v, %v; want tightened from 0755", sd, err)
	}
	sd.Log.Close()
	if fi, _ := os.Lstat(readable); fi.Mode().Perm() != 0o700 {
		t.Errorf("0755 store now %v; want 0700", fi.Mode())
	}

	for name, setup := range map[string]func(dir string){
		"world-writable": func(dir string) { mkdirMode(t, dir, 0o777) },
		"group-writable": func(dir string) { mkdirMode(t, dir, 0o770) },
		"symlink": func(dir string) {
			mkdirMode(t, dir+"-real", 0o700)
			if err := os.Symlink(dir+"-real", dir); err != nil {
				t.Fatal(err)
			}
		},
		"log symlink": func(dir string) {
			mkdirMode(t, dir, 0o700)
			if err := os.Symlink(filepath.Join(base, "precious"), filepath.Join(dir, "reynfs.log")); err != nil {
				t.Fatal(err)
			}
		},
		"log hard link": func(dir string) {
			mkdirMode(t, dir, 0o700)
			if err := os.Link(filepath.Join(base, "precious"), filepath.Join(dir, "reynfs.log")); err != nil {
				t.Fatal(err)
			}
		},
	} {
		if err := os.WriteFile(filepath.Join(base, "precious"), []byte("precious"), 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(base, strings.ReplaceAll(name, " ", "-"))
		setup(dir)
		sd, err := PrepareStore(dir)
		if err == nil {
			sd.Log.Close()
			t.Errorf("%s store: accepted", name)
		} else if !errors.Is(err, ErrUsage) {
			t.Errorf("%s store: %v; want a usage error", name, err)
		}
		if b, _ := os.ReadFile(filepath.Join(base, "precious")); string(b) != "precious" {
			t.Errorf("%s store: the file behind the log changed: %q", name, b)
		}
		if _, err := os.Lstat(dir); err != nil {
			t.Errorf("%s store: the refused folder was removed: %v", name, err)
		}
	}
}

func mkdirMode(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func TestSocketPath(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/42")
	if got := SocketPath("/s"); got != "/s/control.sock" {
		t.Errorf("short store: %s", got)
	}
	long := "/" + strings.Repeat("x", 120)
	if got := SocketPath(long); filepath.Dir(got) != "/run/user/42/reynfs" || !strings.HasSuffix(got, ".sock") {
		t.Errorf("long store with XDG_RUNTIME_DIR: %s", got)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	if got := SocketPath(long); !strings.HasPrefix(got, "/tmp/reynfs-") {
		t.Errorf("long store without XDG_RUNTIME_DIR: %s", got)
	}
}

func TestSocketDirChecks(t *testing.T) {
	base := t.TempDir()
	good := filepath.Join(base, "good")
	if err := ensureSocketDir(filepath.Join(good, "x.sock")); err != nil {
		t.Fatalf("a new socket folder: %v", err)
	}
	open := filepath.Join(base, "open")
	mkdirMode(t, open, 0o755)
	link := filepath.Join(base, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{"open to others": open, "symlink": link}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(base, "theirs")
		mkdirMode(t, theirs, 0o700)
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases["someone else's"] = theirs
	}
	for name, dir := range cases {
		if err := ensureSocketDir(filepath.Join(dir, "x.sock")); !errors.Is(err, ErrDenied) {
			t.Errorf("%s socket folder: %v; want refused", name, err)
		}
	}
	shared := filepath.Join(base, "shared")
	mkdirMode(t, shared, 0o777)
	if err := ensureSocketDir(filepath.Join(shared, "d", "x.sock")); !errors.Is(err, ErrDenied) {
		t.Errorf("socket folder in a world-writable, non-sticky folder: %v; want refused", err)
	}
}

// TestCallHonoursContext: the socket is 0600 whatever the umask, and a
// client waiting on a daemon that does not answer returns when its context
// ends, with the cause.
func TestCallHonoursContext(t *testing.T) {
	store, err := os.MkdirTemp("", "rc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(store) })
	old := syscall.Umask(0)
	ln, err := listen(SocketPath(store))
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if fi, err := os.Lstat(SocketPath(store)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket under umask 0: %v, %v; want 0600", fi.Mode(), err)
	}
	go func() { // accepts and never answers
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	cause := errors.New("test signal")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(100*time.Millisecond, func() { cancel(cause) })
	start := time.Now()
	err = Call(ctx, store, api.StatusParams{}, nil, time.Minute)
	if !errors.Is(err, cause) || time.Since(start) > 5*time.Second {
		t.Fatalf("Call cancelled after 100 ms: %v after %s; want the cause at once", err, time.Since(start))
	}
	if err := Call(context.Background(), filepath.Join(store, "none"), api.StatusParams{}, nil, time.Second); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Call without a daemon: %v; want ErrNotRunning", err)
	}
}

func TestOverlapsMounts(t *testing.T) {
	ms := []Mount{
		{Point: "/w/a", FsType: FsType, Source: "/st/a"},
		{Point: "/mnt/other", FsType: "ext4", Source: "/dev/sda"},
	}
	for _, c := range []struct {
		name string
		p    Paths
		ok   bool
	}{
		{"unrelated", Paths{Dir: "/w/b", Mountpoint: "/w/b", Store: "/st/b"}, true},
		{"already mounted (said elsewhere)", Paths{Dir: "/w/a", Mountpoint: "/w/a", Store: "/st/x"}, true},
		{"same store (the lock says in use)", Paths{Dir: "/w/b", Mountpoint: "/w/b", Store: "/st/a"}, true},
		{"under a non-reynfs mount", Paths{Dir: "/mnt/other/p", Mountpoint: "/mnt/other/p", Store: "/st/b"}, true},
		{"project inside the mount", Paths{Dir: "/w/a/sub", Mountpoint: "/w/a/sub", Store: "/st/b"}, false},
		{"project is the mount, elsewhere", Paths{Dir: "/w/a", Mountpoint: "/w/c", Store: "/st/b"}, false},
		{"mountpoint inside the mount", Paths{Dir: "/w/b", Mountpoint: "/w/a/sub", Store: "/st/b"}, false},
		{"store inside the mount", Paths{Dir: "/w/b", Mountpoint: "/w/b", Store: "/w/a/s"}, false},
		{"project is the live store", Paths{Dir: "/st/a", Mountpoint: "/st/a", Store: "/st/b"}, false},
		{"project holds the live store", Paths{Dir: "/st", Mountpoint: "/st", Store: "/x/b"}, false},
		{"project inside the live store", Paths{Dir: "/st/a/db", Mountpoint: "/st/a/db", Store: "/st/b"}, false},
		{"store inside the live store", Paths{Dir: "/w/b", Mountpoint: "/w/b", Store: "/st/a/inner"}, false},
	} {
		err := c.p.overlapsMounts(ms)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrUsage)) {
			t.Errorf("%s: %v; want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestTrusted(t *testing.T) {
	for _, c := range []struct {
		uid, owner uint32
		ok         bool
	}{{1000, 1000, true}, {0, 1000, true}, {1001, 1000, false}, {65534, 0, false}, {0, 0, true}} {
		if api.Trusted(c.uid, c.owner) != c.ok {
			t.Errorf("api.Trusted(%d, %d) = %v", c.uid, c.owner, !c.ok)
		}
	}
}
