package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	reynfsfs "github.com/reynfs/reynfs/fs"
)

// Deadlocks, stale handles and a daemon that cannot die (issue 8 items 6,
// 7 and 8; invariants 5 and 12). Every operation that could hang has a
// deadline; on a hang the test fails and aborts the mount's FUSE
// connection through fusectl, which releases every blocked process and
// thread, so the mount's cleanup can still unmount.

// runWithin runs the reynfs binary with m's environment and fails the test
// if it does not finish within d.
func runWithin(t testing.TB, m *Mount, d time.Duration, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, reynfsBin, args...)
	cmd.Env, cmd.Dir, cmd.WaitDelay = m.env, "/", time.Second
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := Result{Stdout: so.String(), Stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		abortConn(t, m.Dir) // release whatever waits on the hung mount
		t.Fatalf("reynfs %s: no answer within %v (hung)\nlog:\n%s", strings.Join(args, " "), d, m.LogTail(10))
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		t.Fatalf("reynfs %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// abortConn aborts the FUSE connection mounted at dir (fusectl), if any.
func abortConn(t testing.TB, dir string) {
	conn, ok, err := reynfsfs.ConnectionOf(dir)
	if err != nil || !ok {
		return
	}
	if err := reynfsfs.Abort(conn); err != nil {
		t.Logf("abort connection %d of %s: %v", conn, dir, err)
	} else {
		t.Logf("aborted FUSE connection %d of %s", conn, dir)
	}
}

// watchdog fails the test and aborts the mount's connection if stop is not
// called within d: whatever hangs on the mount then returns.
func watchdog(t testing.TB, m *Mount, d time.Duration, what string) (stop func()) {
	timer := time.AfterFunc(d, func() {
		t.Errorf("%s: still running after %v: the mount hangs; aborting its connection\nlog:\n%s", what, d, m.LogTail(10))
		abortConn(t, m.Dir)
	})
	return func() { timer.Stop() }
}

// mountGuarded is mountProject plus a cleanup, run before the mount's
// own, that aborts the connection of a failed test's mount when it no
// longer answers, so that blocked writers return and the unmount works.
func mountGuarded(t *testing.T, dir string) *Mount {
	m := mountProject(t, dir)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		answered := make(chan struct{})
		go func() {
			var st unix.Statfs_t
			_ = unix.Statfs(m.Dir, &st)
			close(answered)
		}()
		select {
		case <-answered:
		case <-time.After(3 * time.Second):
			abortConn(t, m.Dir)
		}
	})
	return m
}

// load is a set of writers running in the mount until stopped.
type load struct {
	stop   chan struct{}
	wg     sync.WaitGroup
	ops    atomic.Int64 // file writes that succeeded
	mapper *exec.Cmd
}

// dirtyEnv makes the test binary a process that dirties a shared writable
// mapping of the file it names, page by page, until killed. It is a
// process of its own because a page fault blocked on a hung mount holds
// the mmap lock of its process, which would stall the test's Go runtime
// (and with it every deadline) too.
const dirtyEnv = "REYNFS_TEST_DIRTY_MAPPING"

func init() {
	if p := os.Getenv(dirtyEnv); p != "" {
		for n := 0; ; n++ {
			dirtyMapping(p, byte(n))
		}
	}
}

// startLoad starts writers file writers (open, write 256 KiB, close, in a
// loop) and a process that dirties a shared writable mapping of mapped
// (1 MiB, which must exist).
func startLoad(t testing.TB, dir string, writers int, mapped string) *load {
	t.Helper()
	l := &load{stop: make(chan struct{})}
	l.mapper = exec.Command(os.Args[0])
	l.mapper.Env = append(os.Environ(), dirtyEnv+"="+mapped)
	l.mapper.Dir = "/"
	if err := l.mapper.Start(); err != nil {
		t.Fatalf("start the mapping writer: %v", err)
	}
	stopped := func() bool {
		select {
		case <-l.stop:
			return true
		default:
			return false
		}
	}
	buf := make([]byte, 64<<10)
	for i := range writers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			p := filepath.Join(dir, fmt.Sprintf("w%d", i))
			for n := 0; !stopped(); n++ {
				f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				ok := true
				for k := range 4 {
					if _, err := f.WriteAt(buf, int64(k*len(buf))); err != nil {
						ok = false
						break
					}
				}
				if f.Close() == nil && ok {
					l.ops.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		_ = l.mapper.Wait()
	}()
	return l
}

// dirtyMapping maps p shared and writable and dirties its pages. A fault
// on a mount whose daemon died is a panic here, not a crash.
func dirtyMapping(p string, v byte) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { _ = recover() }()
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		time.Sleep(time.Millisecond)
		return
	}
	defer unix.Close(fd)
	mem, err := unix.Mmap(fd, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		time.Sleep(time.Millisecond)
		return
	}
	defer unix.Munmap(mem)
	for k := range 256 {
		mem[k*4096+int(v)] = v
		if k%16 == 0 {
			time.Sleep(200 * time.Microsecond)
		}
	}
}

// finish stops the load and waits for it, aborting the mount's connection
// if the writers are stuck in it.
func (l *load) finish(t testing.TB, m *Mount) {
	close(l.stop)
	_ = l.mapper.Process.Kill()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(5 * time.Second):
	}
	t.Errorf("writers still blocked in the mount 5s after being stopped (killed): it hangs")
	abortConn(t, m.Dir)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("writers still blocked 10s after the connection was aborted")
	}
}

// makeMapped creates a 1 MiB file at p (through the mount).
func makeMapped(t testing.TB, p string) {
	t.Helper()
	writeFile(t, p, []byte(strings.Repeat("m", 1<<20)), 0o644)
}

var genRe = regexp.MustCompile(`^g(\d+) at seq (\d+)`)

// checkpointWithin cuts a generation (bounded) and returns its id and seq.
func checkpointWithin(t testing.TB, m *Mount, label string) (id string, seq uint64) {
	t.Helper()
	r := runWithin(t, m, 30*time.Second, "checkpoint", "-m", label, "--store", m.Store)
	sm := genRe.FindStringSubmatch(r.Stdout)
	if r.Code != 0 || sm == nil {
		t.Fatalf("reynfs checkpoint -m %s: exit %d: %s%s", label, r.Code, r.Stdout, r.Stderr)
	}
	seq, _ = strconv.ParseUint(sm[2], 10, 64)
	return "g" + sm[1], seq
}

// TestRewindLoopUnderWriters: 20 rewinds and checkpoints while three
// writers and a shared writable mapping keep the mount busy. Rewind used
// to send the kernel's invalidations while holding the live lock; the
// kernel writes a dirty mapped page back before dropping it, the WRITE
// waits for that lock, and the mount hung (item 6).
func TestRewindLoopUnderWriters(t *testing.T) {
	dir := t.TempDir()
	m := mountGuarded(t, dir)
	mapped := filepath.Join(dir, "mapped")
	makeMapped(t, mapped)
	_, base := checkpointWithin(t, m, "base")
	stop := watchdog(t, m, 90*time.Second, "rewind loop")
	defer stop()
	l := startLoad(t, dir, 3, mapped)
	for i := range 20 {
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		r := runWithin(t, m, 20*time.Second, rwRewindArgs(m, strconv.FormatUint(base, 10))...)
		if r.Code != 0 {
			l.finish(t, m)
			t.Fatalf("rewind %d: exit %d: %s", i, r.Code, r.Stderr)
		}
		if i%4 == 3 {
			checkpointWithin(t, m, fmt.Sprintf("under load %d", i))
		}
	}
	l.finish(t, m)
	if l.ops.Load() == 0 {
		t.Errorf("no file writer got anything done during the rewinds: the test tested nothing")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Errorf("statfs of the mount after the rewinds: %v", err)
	}
	t.Logf("20 rewinds under load; %d writer operations went through", l.ops.Load())
}

// TestStaleHandleWritesNeverLand: in each of 50 rounds, handles are opened
// on four files, writers race a rewind through them (write, extending
// write, ftruncate, fallocate) until the rewind makes them stale, and the
// files after the rewind must be exactly the target's. The epoch check
// used to run before the write took the live lock, so a write could pass
// it and land after the swap (item 7, invariant 5). The kernel lets one
// write per file into the daemon at a time, hence several files.
func TestStaleHandleWritesNeverLand(t *testing.T) {
	dir := t.TempDir()
	m := mountGuarded(t, dir)
	const files = 4
	want := strings.Repeat("base content\n", 8)
	name := func(i int) string { return fmt.Sprintf("f%d", i) }
	for i := range files {
		writeFile(t, filepath.Join(dir, name(i)), []byte(want), 0o644)
	}
	_, base := checkpointWithin(t, m, "base")
	stop := watchdog(t, m, 150*time.Second, "stale-handle rounds")
	defer stop()
	const rounds = 50
	bad := 0
	for round := range rounds {
		var wg, started sync.WaitGroup
		var hs []*os.File
		stale := []byte(fmt.Sprintf("STALE %d ", round))
		for i := range 2 * files {
			h, err := os.OpenFile(filepath.Join(dir, name(i%files)), os.O_RDWR, 0)
			if err != nil {
				t.Fatalf("round %d: open: %v", round, err)
			}
			hs = append(hs, h)
			wg.Add(1)
			started.Add(1)
			go func() {
				defer wg.Done()
				fd := int(h.Fd())
				for n := 0; n < 200000; n++ {
					if n == 1 {
						// One change journaled before the rewind starts: it
						// then has a future to discard, not the target state
						// it would answer "already at" to without a swap.
						_ = h.Sync()
						started.Done()
					}
					var err error
					switch {
					case i < files:
						_, err = h.WriteAt(stale, int64(n%4*len(stale)))
					case i == files:
						_, err = h.WriteAt(stale, int64(len(want)+n%64)) // extends the file
					case n%2 == 0:
						err = unix.Ftruncate(fd, int64(len(want)/2))
					default:
						err = unix.Fallocate(fd, 0, 0, int64(len(want)*2))
					}
					if err != nil {
						if n == 0 {
							t.Errorf("round %d: writer %d failed before the rewind: %v", round, i, err)
							started.Done()
						}
						return // ESTALE once the rewind swapped
					}
				}
			}()
		}
		started.Wait()
		time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
		r := runWithin(t, m, 20*time.Second, rwRewindArgs(m, strconv.FormatUint(base, 10))...)
		if r.Code != 0 {
			t.Fatalf("round %d: rewind: exit %d: %s", round, r.Code, r.Stderr)
		}
		if strings.Contains(r.Stdout, "already at") {
			t.Fatalf("round %d: the rewind was a no-op (%q) though every writer had journaled a change: the round tests nothing", round, strings.TrimSpace(r.Stdout))
		}
		wg.Wait() // every writer stops at its first ESTALE
		for _, h := range hs {
			_ = h.Close()
		}
		// What the daemon holds now (buffered writes included: a
		// checkpoint journals them), read from the store.
		id, _ := checkpointWithin(t, m, fmt.Sprintf("round %d", round))
		for i := range files {
			got, err := os.ReadFile(filepath.Join(dir, ".reynfs", "generations", id, name(i)))
			if err != nil {
				t.Fatalf("round %d: read %s at %s: %v", round, name(i), id, err)
			}
			if string(got) != want {
				bad++
				if bad <= 5 {
					t.Errorf("round %d: after the rewind %s is %d bytes %.40q, want the target's %d bytes: a write through a handle opened before the rewind landed",
						round, name(i), len(got), got, len(want))
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d times in %d rewinds a stale handle's write got into the new tree", bad, rounds)
	}
}

// processGone reports whether pid has no thread left that is not a
// zombie: a daemon with one thread stuck in the kernel looks dead to a
// check of its leader only.
func processGone(pid int) (bool, string) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return true, ""
	}
	var live []string
	for _, e := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X' {
			wchan, _ := os.ReadFile(filepath.Join(dir, e.Name(), "wchan"))
			live = append(live, fmt.Sprintf("%s %c %s", e.Name(), s[i+2], wchan))
		}
	}
	return len(live) == 0, strings.Join(live, ", ")
}

// TestKill9DaemonDiesAndRemounts: kill -9 of the daemon at a random point
// of checkpoints, rewinds and heavy writes (with a dirty shared mapping):
// the daemon must be gone within 5 s, and a following mount of the same
// directory must succeed within 30 s. A daemon thread in syncfs on its own
// mount, or in a notification that writes back a dirty page, used to wait
// for the daemon itself, keep /dev/fuse open and so the process alive
// (item 8).
func TestKill9DaemonDiesAndRemounts(t *testing.T) {
	dir := t.TempDir()
	m := mountGuarded(t, dir)
	mapped := filepath.Join(dir, "mapped")
	makeMapped(t, mapped)
	_, base := checkpointWithin(t, m, "base")
	const rounds = 6
	for round := range rounds {
		stop := watchdog(t, m, 60*time.Second, fmt.Sprintf("kill -9 round %d", round))
		pid := m.pid
		l := startLoad(t, dir, 3, mapped)
		ctl := make(chan struct{})
		ctlDone := make(chan struct{})
		go func() { // checkpoints and rewinds, until the daemon dies
			defer close(ctlDone)
			for n := 0; ; n++ {
				select {
				case <-ctl:
					return
				default:
				}
				args := []string{"checkpoint", "-m", fmt.Sprintf("r%d.%d", round, n), "--store", m.Store}
				if n%3 == 2 {
					args = rwRewindArgs(m, strconv.FormatUint(base, 10))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				cmd := exec.CommandContext(ctx, reynfsBin, args...)
				cmd.Env, cmd.Dir, cmd.WaitDelay = m.env, "/", time.Second
				_ = cmd.Run()
				cancel()
			}
		}()
		time.Sleep(time.Duration(100+rand.IntN(500)) * time.Millisecond)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("round %d: kill -9 %d: %v", round, pid, err)
		}
		start := time.Now()
		gone, live := processGone(pid)
		for !gone && time.Since(start) < 5*time.Second {
			time.Sleep(20 * time.Millisecond)
			gone, live = processGone(pid)
		}
		if !gone {
			t.Errorf("round %d: daemon %d still has live threads 5s after kill -9: %s", round, pid, live)
			abortConn(t, dir)
		}
		goneAfter := time.Since(start)
		close(ctl)
		l.finish(t, m)
		<-ctlDone
		start = time.Now()
		r := runWithin(t, m, 30*time.Second, "mount", m.Dir, "--store", m.Store)
		if r.Code != 0 {
			t.Fatalf("round %d: reynfs mount after kill -9: exit %d: %s%s\nlog:\n%s", round, r.Code, r.Stdout, r.Stderr, m.LogTail(10))
		}
		m.pid = m.Pid()
		t.Logf("round %d: daemon gone: %v, %v after kill -9; remounted in %v", round, gone, goneAfter.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		stop()
		if t.Failed() {
			return
		}
	}
}
