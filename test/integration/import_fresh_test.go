package integration

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// importDaemonPid returns the pid of the daemon `reynfs mount` spawned for
// store (its command line names the store and the ready pipe), 0 if none.
func importDaemonPid(store string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if containsArg(args, store) && containsArg(args, "--ready-fd") && pidAlive(pid) {
			return pid
		}
	}
	return 0
}

func containsArg(args []string, s string) bool {
	for _, a := range args {
		if a == s {
			return true
		}
	}
	return false
}

// logBytes is the size of the store's segment log so far, without the
// zeros pre-written past its end (cas/prefill.go).
func logBytes(store string) int64 {
	segs, _ := filepath.Glob(filepath.Join(store, "db.log", "*.seg"))
	var n int64
	for _, s := range segs {
		n += nonZeroEnd(s)
	}
	return n
}

// nonZeroEnd returns the offset past the last non-zero byte of the file
// at path (0 if it cannot be read), reading back from its end.
func nonZeroEnd(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	buf := make([]byte, 64<<10)
	for hi := fi.Size(); hi > 0; {
		lo := max(hi-int64(len(buf)), 0)
		k, _ := f.ReadAt(buf[:hi-lo], lo)
		for i := k - 1; i >= 0; i-- {
			if buf[i] != 0 {
				return lo + int64(i) + 1
			}
		}
		hi = lo
	}
	return 0
}

// TestFirstImportKilledMountsAgain: kill -9 of the daemon in the middle of
// a first import, while its readers store chunks without looking them up
// (a fresh import), leaves a store that the next mount imports again,
// writing those chunks a second time: it serves the whole tree as the
// directory holds it, and fsck finds the store sound (cleanup).
func TestFirstImportKilledMountsAgain(t *testing.T) {
	requireFUSE(t)
	dir := filepath.Join(t.TempDir(), "proj")
	importTree(t, dir)
	// 48 MiB that does not compress: stored in many frames, so the
	// daemon can be killed with some of them in the log.
	for i := range 48 {
		data := make([]byte, 1<<20)
		rand.Read(data)
		writeFile(t, filepath.Join(dir, "data", fmt.Sprintf("r%02d", i)), data, 0o644)
	}
	want := importPrint(t, dir)
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &Mount{t: t, Dir: abs, Store: filepath.Join(t.TempDir(), "store"), env: testEnv(t)}
	t.Cleanup(m.cleanup)
	cmd := exec.Command(reynfsBin, "mount", m.Dir, "--store", m.Store)
	cmd.Env, cmd.Dir = m.env, "/"
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	daemon := 0
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if daemon > 0 {
			_ = syscall.Kill(daemon, syscall.SIGKILL)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for logBytes(m.Store) < 8<<20 {
		if isMounted(m.Dir) {
			t.Fatalf("the first mount finished before 8 MiB were in the log: make the import longer")
		}
		if time.Now().After(deadline) {
			t.Fatalf("the import stored %d bytes in 20 s\nlog:\n%s", logBytes(m.Store), m.LogTail(10))
		}
		time.Sleep(2 * time.Millisecond)
	}
	if daemon = importDaemonPid(m.Store); daemon == 0 {
		t.Fatalf("no daemon for %s", m.Store)
	}
	if err := syscall.Kill(daemon, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("reynfs mount still waiting 10 s after its daemon was killed")
	}
	if cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("reynfs mount exited 0 although its daemon was killed during the import")
	}
	for i := 0; i < 500 && pidAlive(daemon); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if isMounted(m.Dir) {
		t.Fatalf("the killed import left %s mounted: killed too late", m.Dir)
	}
	killedAt := logBytes(m.Store)
	m.Mount()
	if logBytes(m.Store) <= killedAt {
		t.Errorf("the second mount appended nothing to the log (%d bytes): it did not import again", killedAt)
	}
	got := importPrint(t, dir)
	for rel, w := range want {
		if g := got[rel]; g != w {
			t.Errorf("%s: mounted %q, native %q", rel, g, w)
		}
	}
	for rel := range got {
		if _, ok := want[rel]; !ok {
			t.Errorf("%s: in the mount, not in the directory", rel)
		}
	}
	m.Unmount()
}
