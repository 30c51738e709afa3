package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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

// dirUsers scans /proc for processes whose cwd, root or open files are
// inside dir; this process and its parent (the mount command) are left out.
func dirUsers(dir string) []DirUser {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []DirUser
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || pid == os.Getppid() {
			continue
		}
		proc := filepath.Join("/proc", e.Name())
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
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(proc, "comm"))
		out = append(out, DirUser{Pid: pid, Comm: strings.TrimSpace(string(comm)), What: what})
	}
	return out
}

// warnUsers logs the processes inside dir before it is mounted over: what
// they write lands underneath the mount; the write-back at unmount keeps
// it and reports it, but they do not see the mount's files.
func warnUsers(log zerolog.Logger, dir string, warn func(string)) {
	for _, u := range dirUsers(dir) {
		log.Warn().Int("pid", u.Pid).Str("comm", u.Comm).Str("uses", u.What).
			Msg("a process is inside the project directory from before the mount: it sees and writes the directory underneath, not the mount")
		if warn != nil {
			warn(u.String() + " from before the mount: it sees and writes the directory underneath, not the mount (cd out and back in)")
		}
	}
}
