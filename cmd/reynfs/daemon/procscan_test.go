package daemon

import (
	"os"
	"testing"
	"time"
)

// A process whose /proc entries block (one exec'ing from a dead FUSE mount)
// must not hold up a mount: the scan gives up after its limit and names it.
func TestDirUsersBoundedByStuckProcess(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	orig := readUser
	t.Cleanup(func() { readUser = orig })
	readUser = func(pid int, dir string) (DirUser, bool) {
		if pid == 1 {
			<-release
		}
		return orig(pid, dir)
	}
	start := time.Now()
	_, stuck := dirUsers(t.TempDir(), 300*time.Millisecond)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("scan took %v with a limit of 300ms", d)
	}
	if stuck != 1 {
		t.Fatalf("stuck = %d, want pid 1", stuck)
	}
}

// Without a stuck process the scan finishes and finds a process whose cwd
// is inside the directory.
func TestDirUsersFindsCwd(t *testing.T) {
	dir := t.TempDir()
	p, err := os.StartProcess("/bin/sleep", []string{"sleep", "30"}, &os.ProcAttr{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(); _, _ = p.Wait() }()
	users, stuck := dirUsers(dir, 10*time.Second)
	if stuck != 0 {
		t.Fatalf("scan gave up at pid %d", stuck)
	}
	for _, u := range users {
		if u.Pid == p.Pid && u.What == "cwd" {
			return
		}
	}
	t.Fatalf("pid %d with cwd %s not found in %v", p.Pid, dir, users)
}
