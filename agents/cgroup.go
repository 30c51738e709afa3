package agents

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Mode says how runs are tracked.
type Mode string

const (
	// ModeCgroup: each run has a cgroup v2 of its own (freeze, kill and
	// membership are exact).
	ModeCgroup Mode = "cgroup2"
	// ModeProcessGroup: no writable cgroup2; each run is a process group
	// and the starting process is a child subreaper. A process that calls
	// setsid or setpgid leaves the run unseen.
	ModeProcessGroup Mode = "process-group"
)

// ErrTimeout: a cgroup or process group did not reach the wanted state
// (frozen, empty) in time.
var ErrTimeout = errors.New("timed out")

// pollEvery is how often a wait re-reads cgroup.events or /proc. Polling
// keeps the code free of inotify plumbing; the waits are short and rare
// (a freeze or a cancel per run per rewind).
const pollEvery = 2 * time.Millisecond

// cgroup2Mount finds the first cgroup2 mount in a mountinfo text: its
// mount point and the cgroup path it shows at that point (its root field).
func cgroup2Mount(mountinfo []byte) (dir, root string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 1 || g[0] != "cgroup2" {
			continue
		}
		return unescapeMount(f[4]), unescapeMount(f[3]), nil
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("read mountinfo: %w", err)
	}
	return "", "", errors.New("find cgroup2: no cgroup2 file system is mounted")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupOf returns the cgroup v2 path of pid ("0::/a/b" gives "/a/b").
func cgroupOf(pid int) (string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("cgroup of %d: no cgroup v2 line", pid)
}

// cgEvents reads cgroup.events: whether the cgroup (or a descendant) has a
// process, and whether it is frozen.
func cgEvents(dir string) (populated, frozen bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false, false, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		switch line {
		case "populated 1":
			populated = true
		case "frozen 1":
			frozen = true
		}
	}
	return populated, frozen, nil
}

// cgWrite writes one value to a cgroup control file.
func cgWrite(dir, file, val string) error {
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(val)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cgProcs lists the pids in one cgroup (not its descendants).
func cgProcs(dir string) ([]int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for f := range strings.FieldsSeq(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// cgWait polls cgroup.events until ok says so or the deadline passes.
func cgWait(dir string, d time.Duration, what string, ok func(populated, frozen bool) bool) error {
	end := time.Now().Add(d)
	for {
		p, f, err := cgEvents(dir)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		if ok(p, f) {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("wait for %s of %s: %w after %v", what, dir, ErrTimeout, d)
		}
		time.Sleep(pollEvery)
	}
}

// cgRemove removes a run's cgroup and any cgroups its processes made
// inside it, deepest first. Cgroup directories hold only control files, so
// rmdir (not RemoveAll) is the operation.
func cgRemove(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove cgroup: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := cgRemove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

// procStat is what attribution and the fallback need from /proc/<pid>/stat.
type procStat struct {
	state byte
	ppid  int
	pgid  int
	start uint64 // field 22, clock ticks since boot: with the pid, names one process for ever
}

func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// comm (field 2) may hold spaces and parentheses: parse after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("read stat of %d: malformed", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 { // f[0] is field 3 (state), f[19] is field 22
		return procStat{}, fmt.Errorf("read stat of %d: malformed", pid)
	}
	var s procStat
	s.state = f[0][0]
	s.ppid, _ = strconv.Atoi(f[1])
	s.pgid, _ = strconv.Atoi(f[2])
	s.start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("read stat of %d: %w", pid, err)
	}
	return s, nil
}

// groupMembers lists the live processes of process group pgid by scanning
// /proc (the fallback's only way to see them).
func groupMembers(pgid int) []procStat {
	ents, _ := os.ReadDir("/proc")
	var out []procStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := readStat(pid); err == nil && s.pgid == pgid {
			out = append(out, s)
		}
	}
	return out
}

// groupWait polls until ok holds for the members of pgid, or the deadline.
// pgid 0 (a run not attached yet) has no process: kernel threads show
// pgid 0 and must never be taken for it.
func groupWait(pgid int, d time.Duration, what string, ok func([]procStat) bool) error {
	if pgid <= 1 {
		return nil
	}
	end := time.Now().Add(d)
	for {
		m := groupMembers(pgid)
		if ok(m) {
			return nil
		}
		if time.Now().After(end) {
			var states []string
			for _, s := range m {
				states = append(states, string(s.state))
			}
			return fmt.Errorf("wait for %s of process group %d (states %s): %w after %v", what, pgid, strings.Join(states, ""), ErrTimeout, d)
		}
		time.Sleep(pollEvery)
	}
}

// groupStopped: every member is stopped (T), dead (Z, X), or in an
// uninterruptible sleep (D). A D task has our SIGSTOP pending and stops
// before it returns to user space, so it issues no new system call; and a
// vfork parent whose child we stopped before its exec stays in D for good.
func groupStopped(m []procStat) bool {
	for _, s := range m {
		if s.state != 'T' && s.state != 't' && s.state != 'Z' && s.state != 'X' && s.state != 'D' {
			return false
		}
	}
	return true
}

// cgWalk calls fn for dir and every cgroup below it (a root process in a
// run may make its own child cgroups).
func cgWalk(dir string, fn func(dir string) error) error {
	if err := fn(dir); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := cgWalk(filepath.Join(dir, e.Name()), fn); err != nil {
				return err
			}
		}
	}
	return nil
}
