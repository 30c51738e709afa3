package fs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fuseSuperMagic is statfs's f_type of a FUSE mount.
const fuseSuperMagic = 0x65735546

// WriteBackTimeout bounds WriteBack: a syncfs that takes longer fails the
// checkpoint or rewind that asked for it instead of holding it forever.
const WriteBackTimeout = 30 * time.Second

// WriteBack has the kernel write the mount's dirty pages (from shared
// writable mappings) to the daemon, as syncfs(2) does: a checkpoint or a
// rewind then sees what processes wrote through their mappings. Linux
// does not forward syncfs itself to a FUSE server, so this only moves the
// kernel's pages; the caller journals and syncs. The daemon cannot skip it
// when nothing is mapped: FUSE never tells it about mmap (without
// writeback cache the pages go dirty in the kernel alone).
//
// The syncfs runs in the syncer, a helper process (this binary again)
// started with the mount, never in the daemon: the kernel waits for this
// daemon to answer the WRITEs, and a thread of ours blocked there,
// uninterruptibly, would keep the process alive after kill -9 and with it
// the /dev/fuse descriptor whose closing is what aborts the connection and
// ends the wait. The syncer holds nothing of the daemon's (no /dev/fuse),
// so when the daemon dies the connection aborts, the syncer's syncfs
// returns, and the syncer exits (its pipe reaches EOF; the parent-death
// signal kills it too). One long-lived helper, not a child per call: a
// process start costs more than the whole rest of a checkpoint. A syncer
// that does not answer within WriteBackTimeout is killed, abandoned to its
// reaper, and replaced at the next call. Never call it from a handler or
// under the live lock.
func (f *FS) WriteBack() error {
	if err := f.syncer.syncfs(WriteBackTimeout); err != nil {
		return fmt.Errorf("write back dirty pages: %w", err)
	}
	return nil
}

// syncer runs syncfs on one mount in a helper process, one request at a
// time: the daemon writes a newline, the helper answers with a line,
// empty when all went well, else the error.
type syncer struct {
	point string
	conn  uint64

	mu   sync.Mutex // serialises requests and guards the helper
	proc *os.Process
	req  *os.File // our end of the helper's stdin
	resp *os.File // our end of the helper's stdout
	rd   *bufio.Reader
}

func newSyncer(point string, conn uint64) *syncer { return &syncer{point: point, conn: conn} }

// start starts the helper. Like the watchdog it is forked from an OS
// thread that stays locked and blocked in wait(2) for the helper's life,
// so the parent-death signal comes when this process goes, not when the
// Go runtime retires a thread. s.mu is held.
func (s *syncer) start() error {
	inR, inW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start syncfs helper: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return fmt.Errorf("start syncfs helper: %w", err)
	}
	started := make(chan error, 1)
	cmd := exec.Command("/proc/self/exe", helperSyncfs, s.point, strconv.FormatUint(s.conn, 10))
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout = inR, outW
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the helper
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	err = <-started
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return fmt.Errorf("start syncfs helper: %w", err)
	}
	s.proc, s.req, s.resp, s.rd = cmd.Process, inW, outR, bufio.NewReader(outR)
	return nil
}

// drop kills and forgets the helper; its locked thread reaps it once it
// can die (a syncfs stuck on a live daemon returns when that daemon
// answers or dies). s.mu is held.
func (s *syncer) drop() {
	if s.proc == nil {
		return
	}
	_ = s.proc.Kill()
	s.req.Close()
	s.resp.Close()
	s.proc, s.req, s.resp, s.rd = nil, nil, nil, nil
}

// syncfs asks the helper for one syncfs and waits at most timeout for
// its answer, starting a helper first if there is none. A helper found
// dead (a broken pipe, EOF: killed by someone, or crashed) is replaced and
// asked again once; one that is only slow is not, so the caller never
// waits more than about twice timeout.
func (s *syncer) syncfs(timeout time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.ask(timeout)
	if errors.Is(err, errHelperGone) {
		err = s.ask(timeout)
	}
	return err
}

var errHelperGone = errors.New("syncfs helper gone")

// ask is one request of syncfs. s.mu is held.
func (s *syncer) ask(timeout time.Duration) error {
	if s.proc == nil {
		if err := s.start(); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(timeout)
	_ = s.req.SetWriteDeadline(deadline)
	_ = s.resp.SetReadDeadline(deadline)
	if _, err := s.req.Write([]byte{'\n'}); err != nil {
		s.drop()
		if errors.Is(err, syscall.EPIPE) {
			return fmt.Errorf("%w: %v", errHelperGone, err)
		}
		return fmt.Errorf("syncfs helper: %w", err)
	}
	line, err := s.rd.ReadString('\n')
	if err != nil {
		s.drop()
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("syncfs of %s took over %v", s.point, timeout)
		case errors.Is(err, io.EOF):
			return fmt.Errorf("%w: %v", errHelperGone, err)
		}
		return fmt.Errorf("syncfs helper: %w", err)
	}
	if msg := strings.TrimSpace(line); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// stop ends the helper at a clean unmount: EOF on its stdin.
func (s *syncer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	s.req.Close()
	s.resp.Close()
	s.proc, s.req, s.resp, s.rd = nil, nil, nil, nil
}

// syncfsMain is the helper: for each line on stdin, syncfs on the mount at
// point if it is still FUSE connection conn (unmounted already: nothing of
// ours is cached, and the directory underneath is none of our business),
// then one line on stdout. It exits at EOF, when its daemon is gone or
// done. The mount is opened anew each time: a descriptor kept open would
// make the mount busy for unmount.
func syncfsMain(point, conn string) int {
	in := bufio.NewReader(os.Stdin)
	for {
		if _, err := in.ReadString('\n'); err != nil {
			if err == io.EOF {
				return 0
			}
			return 1
		}
		msg := syncfsOnce(point, conn)
		if _, err := os.Stdout.WriteString(strings.ReplaceAll(msg, "\n", " ") + "\n"); err != nil {
			return 1
		}
	}
}

// syncfsOnce is one request of syncfsMain; it returns the error to report,
// or "".
func syncfsOnce(point, conn string) string {
	fd, err := unix.Open(point, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Sprintf("open %s: %v", point, err)
	}
	defer unix.Close(fd)
	var sfs unix.Statfs_t
	var st unix.Stat_t
	if unix.Fstatfs(fd, &sfs) != nil || sfs.Type != fuseSuperMagic || unix.Fstat(fd, &st) != nil ||
		strconv.FormatUint(connOfDev(st.Dev), 10) != conn {
		return ""
	}
	// An error here is a WRITE this daemon refused (a mapping of a file
	// whose handle a rewind made stale gets ESTALE, reported as EIO): the
	// daemon answered it already, and the pages it did take are in.
	_ = unix.Syncfs(fd)
	return ""
}
