package fs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A daemon whose thread is stuck in the kernel waiting for the daemon
// itself (a syncfs or an invalidation that has the kernel write back a
// shared mapping's dirty pages) cannot die: kill -9 ends every other
// thread, but the stuck one keeps the /dev/fuse descriptor open, so the
// connection is never aborted and the wait never ends. Clients hang, and so
// does a later `reynfs mount` of the directory. The kernel's way out is
// fusectl: writing to /sys/fs/fuse/connections/<conn>/abort fails every
// waiting request. This file holds that abort, the connection lookup (from
// /proc/self/mountinfo, never by a system call on the mount, which a dead
// daemon would leave hanging), and a watchdog process that aborts the
// connection once its daemon is dying.

// FusectlDir is where the kernel lists FUSE connections.
const FusectlDir = "/sys/fs/fuse/connections"

// Hidden first arguments under which the reynfs binary (or any binary
// that links this package) runs one helper and exits, from init, before
// main: the daemon starts them as /proc/self/exe.
const (
	helperSyncfs = "__reynfs-syncfs"
	helperWatch  = "__reynfs-watch"
)

func init() {
	if len(os.Args) != 4 {
		return
	}
	switch os.Args[1] {
	case helperSyncfs:
		closeFuseFds()
		os.Exit(syncfsMain(os.Args[2], os.Args[3]))
	case helperWatch:
		closeFuseFds()
		os.Exit(watchMain(os.Args[2], os.Args[3]))
	}
}

// closeFuseFds closes any /dev/fuse descriptor a helper inherited. go-fuse
// opens it without O_CLOEXEC and sets the flag only after the mount, so a
// fork in between would hand it over; a helper holding it would keep a
// dead daemon's connection alive.
func closeFuseFds() {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		if t, _ := os.Readlink("/proc/self/fd/" + e.Name()); t == "/dev/fuse" {
			_ = unix.Close(fd)
		}
	}
}

// cloexecAll marks every descriptor of this process but stdio
// close-on-exec, before the daemon starts its helpers: go-fuse's direct
// mount (as root) leaves /dev/fuse inheritable, and a helper holding it
// would keep a dead daemon's connection alive; descriptors the daemon
// inherited (the mount command's readiness pipe) are not the helpers'
// business either. Go opens its own files close-on-exec, and os/exec
// clears the flag on the descriptors it hands a child on purpose.
func cloexecAll() {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// connOfDev is the fusectl name of a FUSE mount's st_dev: the kernel's
// dev_t encoding (major << 20 | minor).
func connOfDev(dev uint64) uint64 { return uint64(unix.Major(dev))<<20 | uint64(unix.Minor(dev)) }

// ConnectionOf returns the FUSE connection of the mount at point (the
// last one mounted there), from /proc/self/mountinfo; ok is false when no
// FUSE file system is mounted at point.
func ConnectionOf(point string) (conn uint64, ok bool, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return 0, false, fmt.Errorf("find fuse connection: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent maj:min root point opts [optional...] - fstype source superopts
		fs := strings.Fields(sc.Text())
		sep := -1
		for i, s := range fs {
			if s == "-" {
				sep = i
				break
			}
		}
		if len(fs) < 5 || sep < 0 || sep+1 >= len(fs) || unescapeMount(fs[4]) != point ||
			(fs[sep+1] != "fuse" && !strings.HasPrefix(fs[sep+1], "fuse.")) {
			continue
		}
		maj, min, found := strings.Cut(fs[2], ":")
		a, err1 := strconv.ParseUint(maj, 10, 32)
		b, err2 := strconv.ParseUint(min, 10, 32)
		if !found || err1 != nil || err2 != nil {
			continue
		}
		conn, ok = a<<20|b, true
	}
	if err := sc.Err(); err != nil {
		return 0, false, fmt.Errorf("find fuse connection: %w", err)
	}
	return conn, ok, nil
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// Abort aborts FUSE connection conn: every request waiting on it fails
// and later ones get ENOTCONN, as when its daemon's /dev/fuse closes. It
// mounts fusectl first where it is missing (root only).
func Abort(conn uint64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(FusectlDir, &st); err != nil {
		return fmt.Errorf("abort fuse connection %d: %w", conn, err)
	}
	if st.Type != fusectlSuperMagic {
		if err := unix.Mount("fusectl", FusectlDir, "fusectl", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("abort fuse connection %d: mount fusectl: %w", conn, err)
		}
	}
	f, err := os.OpenFile(filepath.Join(FusectlDir, strconv.FormatUint(conn, 10), "abort"), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("abort fuse connection %d: %w", conn, err)
	}
	defer f.Close()
	if _, err := f.WriteString("1"); err != nil {
		return fmt.Errorf("abort fuse connection %d: %w", conn, err)
	}
	return nil
}

// fusectlSuperMagic is statfs's f_type of the fusectl file system.
const fusectlSuperMagic = 0x65735543

// watch finds the new mount's connection and starts its watchdog and its
// syncfs helper (syncfs.go), which live until the mount is gone.
func (f *FS) watch() error {
	cloexecAll()
	conn, ok, err := ConnectionOf(f.mountpoint)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("find fuse connection: nothing mounted at %s", f.mountpoint)
	}
	f.conn = conn
	stop, err := startWatchdog(conn, f.mountpoint)
	if err != nil {
		return err
	}
	f.syncer = newSyncer(f.mountpoint, conn)
	f.syncer.mu.Lock()
	err = f.syncer.start() // now, so that the first checkpoint does not pay for it
	f.syncer.mu.Unlock()
	if err != nil {
		stop()
		return err
	}
	go func() {
		f.server.Wait()
		stop()
		f.syncer.stop()
	}()
	return nil
}

// startWatchdog starts the watchdog of connection conn: a child that
// aborts the connection once this process is dying. It is started from an
// OS thread that stays locked and blocked in wait(2) for the child's whole
// life, so the kernel's parent-death signal (sent when the thread that
// forked exits) comes exactly when the process goes, not when the Go
// runtime retires a thread. stop ends it (clean unmount).
func startWatchdog(conn uint64, point string) (stop func(), err error) {
	started := make(chan *exec.Cmd, 1)
	failed := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the process
		cmd := exec.Command("/proc/self/exe", helperWatch, strconv.FormatUint(conn, 10), point)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGUSR1}
		if err := cmd.Start(); err != nil {
			failed <- err
			return
		}
		started <- cmd
		_ = cmd.Wait()
	}()
	select {
	case err := <-failed:
		return nil, fmt.Errorf("start watchdog: %w", err)
	case cmd := <-started:
		return func() { _ = cmd.Process.Signal(syscall.SIGTERM) }, nil
	}
}

// watchMain is the watchdog: it waits for the parent-death signal (or an
// orderly SIGTERM), and on the former aborts the connection if its daemon
// is dying and the connection is still the one mounted at point (a
// connection number is reused once its mount is gone).
func watchMain(connArg, point string) int {
	conn, err := strconv.ParseUint(connArg, 10, 64)
	if err != nil {
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	parent := os.Getppid()
	if parent == 1 {
		return 0 // the daemon is gone already
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case s := <-sigs:
			if s != syscall.SIGUSR1 {
				return 0 // stopped by the daemon (or by hand): nothing to abort
			}
		case <-tick.C: // a missed signal: the daemon reaped, we reparented
			if os.Getppid() == parent {
				continue
			}
		}
		if !dying(parent) {
			continue
		}
		if c, ok, _ := ConnectionOf(point); ok && c == conn {
			if err := Abort(conn); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return 0
	}
}

// dying reports whether process pid is gone or on its way out: a thread
// group exiting (kill -9, exit) has SIGKILL pending in every thread left,
// and its leader may be a zombie already.
func dying(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			switch k {
			case "State":
				if strings.HasPrefix(v, "Z") || strings.HasPrefix(v, "X") {
					return true
				}
			case "SigPnd", "ShdPnd":
				if mask, err := strconv.ParseUint(v, 16, 64); err == nil && mask&(1<<(syscall.SIGKILL-1)) != 0 {
					return true
				}
			}
		}
	}
	return false
}
