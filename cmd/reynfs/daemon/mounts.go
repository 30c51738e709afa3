package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// Mount is one line of /proc/self/mountinfo.
type Mount struct {
	Point  string
	FsType string
	Source string
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
		out = append(out, Mount{Point: unescape(fields[4]), FsType: fields[sep+1], Source: unescape(fields[sep+2])})
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
// gone ("transport endpoint is not connected"), and refuses a live one.
func ClearDeadMount(point string) error {
	m, ok := FindMount(point)
	if !ok {
		return nil
	}
	if !strings.HasPrefix(m.FsType, "fuse") {
		return nil // mounting over a non-FUSE mount is the user's business
	}
	if !dead(point) {
		return fmt.Errorf("%w: %s is already mounted (%s from %s); unmount it first", ErrUsage, point, m.FsType, m.Source)
	}
	_ = AbortConnection(point) // release whatever still waits on the dead connection (abort.go)
	return LazyUnmount(point)
}

// dead reports whether the FUSE mount at point has lost its daemon. statfs
// goes to the daemon every time (stat may be answered from the kernel's
// attribute cache for a second after the daemon died).
func dead(point string) bool {
	var st syscall.Statfs_t
	return errors.Is(syscall.Statfs(point, &st), syscall.ENOTCONN)
}

// clearIfDead lazily unmounts a FUSE mount at point whose daemon is gone
// (killed), so that the path can be used again; a live mount stays.
func clearIfDead(point string) error {
	if m, ok := FindMount(point); ok && strings.HasPrefix(m.FsType, "fuse") && dead(point) {
		return LazyUnmount(point)
	}
	return nil
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
