package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// FsType is the file-system type of a reynfs mount in /proc/self/mountinfo.
const FsType = "fuse.reynfs"

// Mount is one line of /proc/self/mountinfo.
type Mount struct {
	Point  string
	FsType string
	Source string // for a reynfs mount, its store
	Dev    string // maj:min; the minor names the fusectl connection
}

// Mounts lists the mounts of this mount namespace.
func Mounts() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent maj:min root point opts [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+2 >= len(fields) {
			continue
		}
		out = append(out, Mount{Point: unescape(fields[4]), FsType: fields[sep+1], Source: unescape(fields[sep+2]), Dev: fields[2]})
	}
	return out, sc.Err()
}

func unescape(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// FindMount returns the mount at point, if any (the last one wins).
func FindMount(point string) (Mount, bool) {
	ms, err := Mounts()
	if err != nil {
		return Mount{}, false
	}
	var found Mount
	ok := false
	for _, m := range ms {
		if m.Point == point {
			found, ok = m, true
		}
	}
	return found, ok
}

// ClearDeadMount lazily unmounts a FUSE mount at point whose daemon is
// gone ("transport endpoint is not connected"), after aborting its
// connection, and refuses a live one or one that does not answer (a hung
// or stopped daemon). It asks the mount with a bounded wait (probe): an
// unbounded statfs of a stopped daemon's mount would hang the caller.
func ClearDeadMount(point string) error {
	m, ok := FindMount(point)
	if !ok {
		return nil
	}
	if !strings.HasPrefix(m.FsType, "fuse") {
		return nil // mounting over a non-FUSE mount is the user's business
	}
	switch probe(m) {
	case mountAlive:
		return fmt.Errorf("%w: %s is already mounted (%s from %s); unmount it first", ErrUsage, point, m.FsType, m.Source)
	case mountHung:
		return hung(m)
	}
	_ = AbortConnection(point) // release whatever still waits on the dead connection (abort.go)
	return LazyUnmount(point)
}

// clearIfDead is ClearDeadMount for a path about to be resolved, which
// leaves a live FUSE mount alone (later checks say what is wrong with it)
// but refuses a hung one: every look at the path would hang too.
func clearIfDead(point string) error {
	m, ok := FindMount(point)
	if !ok || !strings.HasPrefix(m.FsType, "fuse") {
		return nil
	}
	switch probe(m) {
	case mountAlive:
		return nil
	case mountHung:
		return hung(m)
	}
	_ = AbortConnection(point)
	return LazyUnmount(point)
}

// hung is the error for a FUSE mount at a path reynfs must use whose
// daemon does not answer. The hint names the store: 'reynfs unmount DIR'
// would look at DIR, which waits on the daemon once the kernel's cached
// attributes of the mount's root expire.
func hung(m Mount) error {
	if m.FsType == FsType {
		return fmt.Errorf("%w: %s is mounted (store %s) but does not answer: its daemon is hung or stopped; 'reynfs unmount --store %s' aborts and detaches it",
			ErrStale, m.Point, m.Source, m.Source)
	}
	return fmt.Errorf("%w: %s is mounted (%s from %s) but does not answer: its daemon is hung or stopped; unmount it first (umount -f)",
		ErrStale, m.Point, m.FsType, m.Source)
}

// LazyUnmount detaches the mount at point: directly as root, otherwise
// through fusermount3.
func LazyUnmount(point string) error {
	if os.Geteuid() == 0 {
		if err := syscall.Unmount(point, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", point, err)
		}
		return nil
	}
	out, err := exec.Command("fusermount3", "-u", "-z", point).CombinedOutput()
	if err != nil {
		return fmt.Errorf("unmount %s: %v: %s", point, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ErrStale: a reynfs mount whose daemon is gone (killed, crashed); every
// access to it fails with "transport endpoint is not connected".
var ErrStale = errors.New("daemon dead, mount stale")

// MountOfStore returns the reynfs mount served from store, if any (the
// store is the mount's source in mountinfo).
func MountOfStore(store string) (Mount, bool) {
	ms, err := Mounts()
	if err != nil {
		return Mount{}, false
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].FsType == FsType && ms[i].Source == store {
			return ms[i], true
		}
	}
	return Mount{}, false
}

// Unanswered explains a reynfs mount of a store whose control socket does
// not answer: its daemon died (the usual case: "daemon dead, mount
// stale"), or hangs, or lost its socket. The mount is asked with a bounded
// wait; the store is left alone, for the next mount to recover.
func Unanswered(m Mount) error {
	switch probe(m) {
	case mountDead:
		return fmt.Errorf("%w: %s (store %s) has lost its daemon; run 'reynfs unmount %s' to clean it, then mount again: the store keeps every acknowledged change",
			ErrStale, m.Point, m.Source, m.Point)
	case mountHung:
		return fmt.Errorf("%w: %s (store %s) does not answer: its daemon is hung or stopped; 'reynfs unmount --store %s' aborts and detaches it",
			ErrStale, m.Point, m.Source, m.Source)
	}
	return fmt.Errorf("the mount %s answers but no control socket of its daemon does (looked for %s); 'reynfs unmount %s' unmounts it",
		m.Point, strings.Join(socketPaths(m.Source), ", "), m.Point)
}

type mountState int

const (
	mountAlive mountState = iota
	mountDead             // ENOTCONN: the daemon is gone
	mountHung             // no answer within probeWait
)

// probeWait bounds how long a probe waits on a mount that does not answer.
const probeWait = 2 * time.Second

// probe asks the mount itself: statfs goes to the daemon every time (stat
// may be answered from the kernel's cache). A probe left waiting on a hung
// daemon ends with the daemon or the process.
func probe(m Mount) mountState {
	res := make(chan error, 1)
	go func() {
		var st syscall.Statfs_t
		res <- syscall.Statfs(m.Point, &st)
	}()
	select {
	case err := <-res:
		if errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED) {
			return mountDead
		}
		return mountAlive
	case <-time.After(probeWait):
		return mountHung
	}
}

// InsideMount returns the reynfs mount that path is in or at, if any. It
// looks at mountinfo only, never at the path (a stale or stopped mount
// would answer with an error or not at all).
func InsideMount(path string) (Mount, bool) {
	ms, err := Mounts()
	if err != nil {
		return Mount{}, false
	}
	for _, m := range ms {
		if m.FsType == FsType && within(path, m.Point) {
			return m, true
		}
	}
	return Mount{}, false
}

// CleanStale removes a reynfs mount whose control socket does not answer.
// It first asks the mount itself, without waiting on it for long: a dead
// daemon's mount says ENOTCONN and is detached (lazily: processes with a
// cwd inside keep it until they leave); a mount that does not answer has a
// hung or stopped daemon, whose FUSE connection is aborted (as root,
// through fusectl) before the detach; a mount that answers has a live
// daemon that lost its socket, and a plain unmount lets it write back and
// exit as usual. It returns what it did, for people.
func CleanStale(m Mount) (string, error) {
	switch probe(m) {
	case mountAlive:
		if err := plainUnmount(m.Point); err != nil {
			return "", err
		}
		return "its daemon answered the mount but not its control socket; unmounted normally", nil
	case mountDead:
		if err := LazyUnmount(m.Point); err != nil {
			return "", err
		}
		return "its daemon had died; detached the dead mount", nil
	}
	aborted := abortConnection(m) == nil
	if err := LazyUnmount(m.Point); err != nil {
		return "", err
	}
	if aborted {
		return "its daemon did not answer; aborted its FUSE connection and detached the mount", nil
	}
	return "its daemon did not answer; detached the mount (processes blocked on it wait until the daemon ends)", nil
}

// abortConnection aborts the FUSE connection of m through fusectl (root).
func abortConnection(m Mount) error {
	_, minor, ok := strings.Cut(m.Dev, ":")
	if !ok || strings.Trim(minor, "0123456789") != "" {
		return fmt.Errorf("abort %s: device %q", m.Point, m.Dev)
	}
	f, err := os.OpenFile("/sys/fs/fuse/connections/"+minor+"/abort", os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("abort %s: %w", m.Point, err)
	}
	defer f.Close()
	_, err = f.WriteString("1")
	return err
}

// plainUnmount unmounts point as umount(8) would, without detaching.
func plainUnmount(point string) error {
	if os.Geteuid() == 0 {
		if err := syscall.Unmount(point, 0); err != nil {
			return fmt.Errorf("unmount %s: %w (is a process still using it?)", point, err)
		}
		return nil
	}
	out, err := exec.Command("fusermount3", "-u", point).CombinedOutput()
	if err != nil {
		return fmt.Errorf("unmount %s: %v: %s", point, err, strings.TrimSpace(string(out)))
	}
	return nil
}
