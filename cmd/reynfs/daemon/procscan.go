package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// DirUser is a process that holds the project directory, or something in
// it, open from before the mount: it keeps seeing and writing the
// directory underneath the mount, not the mount (DESIGN invariant 14).
type DirUser struct {
	Pid  int
	Comm string
	What string // "cwd", "root" or "open <path>"
}

func (u DirUser) String() string {
	return fmt.Sprintf("pid %d (%s) has %s inside the project directory", u.Pid, u.Comm, u.What)
}

// scanLimit bounds the /proc scan before a mount. Reading another
// process's cwd or fd links can block for as long as that process is stuck
// (seen: a process exec'ing a binary from a dead FUSE mount blocked every
// readlink of its /proc entries); the scan is only advice, so a mount must
// never wait on it.
const scanLimit = 2 * time.Second

// dirUsers scans /proc for processes whose cwd, root or open files are
// inside dir; this process and its parent (the mount command) are left out.
// It returns what it found within limit; stuck is the pid it was reading
// when the limit ran out (0 if the scan finished). The scan goes on in the
// background until the blocked read returns, and its result is dropped.
func dirUsers(dir string, limit time.Duration) (users []DirUser, stuck int) {
	type found struct {
		u    DirUser
		pid  int // the pid being read next (u is empty)
		done bool
	}
	read := readUser
	ch := make(chan found, 64)
	quit := make(chan struct{})
	go func() {
		send := func(f found) bool {
			select {
			case ch <- f:
				return true
			case <-quit:
				return false
			}
		}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() || pid == os.Getppid() {
				continue
			}
			if !send(found{pid: pid}) {
				return
			}
			if u, ok := read(pid, dir); ok && !send(found{u: u}) {
				return
			}
		}
		send(found{done: true})
	}()
	defer close(quit)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case f := <-ch:
			switch {
			case f.done:
				return users, 0
			case f.pid != 0:
				stuck = f.pid
			default:
				users = append(users, f.u)
			}
		case <-timer.C:
			return users, stuck
		}
	}
}

// readUser is dirUser; a test replaces it to stand for a process whose
// /proc entries block.
var readUser = dirUser

// dirUser says whether process pid has its cwd, root or an open file
// inside dir.
func dirUser(pid int, dir string) (DirUser, bool) {
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	what := ""
	for _, l := range []string{"cwd", "root"} {
		if t, err := os.Readlink(filepath.Join(proc, l)); err == nil && within(t, dir) && !(l == "root" && t == "/") {
			what = l
			break
		}
	}
	if what == "" {
		fds, _ := os.ReadDir(filepath.Join(proc, "fd"))
		for _, fd := range fds {
			if t, err := os.Readlink(filepath.Join(proc, "fd", fd.Name())); err == nil && within(t, dir) {
				what = "open " + t
				break
			}
		}
	}
	if what == "" {
		return DirUser{}, false
	}
	comm, _ := os.ReadFile(filepath.Join(proc, "comm"))
	return DirUser{Pid: pid, Comm: strings.TrimSpace(string(comm)), What: what}, true
}

// warnUsers logs the processes inside dir before it is mounted over: what
// they write lands underneath the mount; the write-back at unmount keeps
// it and reports it, but they do not see the mount's files.
func warnUsers(log zerolog.Logger, dir string, warn func(string)) {
	users, stuck := dirUsers(dir, scanLimit)
	if stuck != 0 {
		log.Warn().Int("pid", stuck).Dur("after", scanLimit).
			Msg("the scan for processes inside the project directory gave up: reading this process's /proc entries blocks (is it stuck on a dead mount?)")
		if warn != nil {
			warn(fmt.Sprintf("could not check every process for use of the project directory: reading pid %d's /proc entries blocked for %v (stuck on a dead mount?)", stuck, scanLimit))
		}
	}
	for _, u := range users {
		log.Warn().Int("pid", u.Pid).Str("comm", u.Comm).Str("uses", u.What).
			Msg("a process is inside the project directory from before the mount: it sees and writes the directory underneath, not the mount")
		if warn != nil {
			warn(u.String() + " from before the mount: it sees and writes the directory underneath, not the mount (cd out and back in)")
		}
	}
}
