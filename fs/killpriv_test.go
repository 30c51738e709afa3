package fs

import (
	"bufio"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The bits a write by a caller without CAP_FSETID clears, as ext4 clears
// them (setattr_should_drop_suidgid): suid always, sgid with group execute
// always, sgid without group execute only for a caller outside the group.
func TestDropSuidgid(t *testing.T) {
	const reg = syscall.S_IFREG
	outsider := func() privs { return privs{gid: 100} }
	member := func() privs { return privs{gid: 100, groups: []uint32{7}} }
	capable := func() privs { return privs{fsetid: true, gid: 100} }
	for _, c := range []struct {
		mode, want uint32
		who        func() privs
	}{
		{reg | 0o6777, reg | 0o777, outsider},
		{reg | 0o6777, reg | 0o777, member},
		{reg | 0o4755, reg | 0o755, outsider},
		{reg | 0o2767, reg | 0o767, outsider},  // sgid without group execute, not in group
		{reg | 0o2767, reg | 0o2767, member},   // ... in the group (supplementary)
		{reg | 0o2767, reg | 0o2767, capable},  // ... CAP_FSETID (chown by root)
		{reg | 0o6767, reg | 0o2767, member},   // suid goes, sgid stays
		{reg | 0o644, reg | 0o644, outsider},   // nothing to clear
		{reg | 0o1777, reg | 0o1777, outsider}, // sticky is not a privilege
		{reg | 0o2777, reg | 0o777, capable},   // group execute: always
	} {
		if got := dropSuidgid(c.mode, 7, c.who); got != c.want {
			t.Errorf("dropSuidgid(%o) = %o, want %o", c.mode, got, c.want)
		}
	}
	asked := false
	dropSuidgid(reg|0o4755, 7, func() privs { asked = true; return privs{} })
	if asked {
		t.Error("dropSuidgid read the caller's groups for a file without sgid")
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\tbash\nUid:\t1000\t1000\t1000\t1000\nGroups:\t4 24 1000 \nCapEff:\t0000000000000010\n"
	p := parseStatus(bufio.NewScanner(strings.NewReader(status)), privs{gid: 1000})
	if !p.fsetid || len(p.groups) != 3 || p.groups[1] != 24 || !p.inGroupOrCapable(4) {
		t.Errorf("CapEff with CAP_FSETID, groups 4 24 1000: got %+v", p)
	}
	p = parseStatus(bufio.NewScanner(strings.NewReader("Groups:\t\nCapEff:\t000001ffffffffef\n")), privs{gid: 5, fsetid: true})
	if p.fsetid || p.inGroupOrCapable(6) || !p.inGroupOrCapable(5) {
		t.Errorf("CapEff without bit 4 and no groups: got %+v", p)
	}
}

// callerPrivs reads this very process: the test runner's CAP_FSETID is
// whatever /proc says, and a vanished pid falls back on the uid.
func TestCallerPrivs(t *testing.T) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("read /proc/self/status: %v", err)
	}
	want := parseStatus(bufio.NewScanner(strings.NewReader(string(b))), privs{})
	h := &fuse.InHeader{Caller: fuse.Caller{Owner: fuse.Owner{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}, Pid: uint32(os.Getpid())}}
	if got := callerPrivs(h); got.fsetid != want.fsetid || len(got.groups) != len(want.groups) {
		t.Errorf("callerPrivs(self) = %+v, /proc/self/status says %+v", got, want)
	}
	gone := &fuse.InHeader{Caller: fuse.Caller{Owner: fuse.Owner{Uid: 1000}, Pid: 1 << 30}}
	if callerPrivs(gone).fsetid {
		t.Error("a vanished non-root caller counted as holding CAP_FSETID")
	}
	root := &fuse.InHeader{Caller: fuse.Caller{Owner: fuse.Owner{Uid: 0}}}
	if !callerPrivs(root).fsetid {
		t.Error("a kernel request (pid 0) of uid 0 did not count as privileged")
	}
}
