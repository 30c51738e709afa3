package fs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// With FUSE_HANDLE_KILLPRIV_V2 the kernel marks the superblock SB_NOSEC:
// once it has seen that an inode has neither suid/sgid nor
// security.capability, writes to it no longer ask GETXATTR
// security.capability first (one request in five of a tar extraction,
// docs/benchmarks.md). In exchange the kernel strips the mode change that
// clears suid/sgid from its own requests, and clearing them becomes ours,
// as ext4 does it (setattr_should_drop_suidgid, cap_inode_killpriv):
//
//   - write, truncate, fallocate and copy_file_range by a caller without
//     CAP_FSETID clear suid, and sgid when the group may execute or the
//     caller is not in the file's group (and lacks CAP_FSETID);
//   - chown of a non-directory clears them the same way, for root too
//     (suid always; sgid as above);
//   - each of these removes security.capability, whoever calls.
//
// The kernel tells us in three ways: WRITE_KILL_SUIDGID on a write,
// FATTR_KILL_SUIDGID on a truncate or chown (it sets it when the caller
// lacks CAP_FSETID, and always for chown), and, for a file that has
// something to clear, a SETATTR with no attribute at all before a write,
// fallocate or copy_file_range (its file_remove_privs, whose mode change
// it stripped). That last one does not say whether the caller has
// CAP_FSETID, so we read it from /proc, only then (the file has suid,
// sgid or a capability, which is rare). Its reply carries the new mode,
// so the kernel's cached attributes are right at once.
//
// chown(f, -1, -1) arrives as that same empty SETATTR. From a caller
// with CAP_FSETID it can only be that chown unless the file has a
// capability, so suid goes as on ext4; with a capability it is taken for
// a write, and suid stays (ext4 would clear it: the one difference left).

// xattrCapability is the file capability attribute that writes remove.
const xattrCapability = "security.capability"

// privs is what the suid/sgid rules need to know of who asks.
type privs struct {
	fsetid bool // has CAP_FSETID
	gid    uint32
	groups []uint32
}

// inGroupOrCapable mirrors the kernel's in_group_or_capable.
func (p privs) inGroupOrCapable(gid uint32) bool {
	if p.fsetid || p.gid == gid {
		return true
	}
	for _, g := range p.groups {
		if g == gid {
			return true
		}
	}
	return false
}

// dropSuidgid returns mode without what a write by a caller lacking
// CAP_FSETID clears (setattr_should_drop_suidgid): suid, and sgid when the
// group may execute or the caller is not in group gid. It reads the
// caller's groups only when that last case arises.
func dropSuidgid(mode, gid uint32, who func() privs) uint32 {
	mode &^= syscall.S_ISUID
	if mode&syscall.S_ISGID != 0 && (mode&syscall.S_IXGRP != 0 || !who().inGroupOrCapable(gid)) {
		mode &^= syscall.S_ISGID
	}
	return mode
}

// callerPrivs reads the effective capabilities and groups of the thread
// behind a request from /proc. A thread that is gone (or a request of the
// kernel's own, pid 0) counts as privileged only if its uid is root.
func callerPrivs(h *fuse.InHeader) privs {
	p := privs{fsetid: h.Uid == 0, gid: h.Gid}
	if h.Pid == 0 {
		return p
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", h.Pid))
	if err != nil {
		return p
	}
	defer f.Close()
	return parseStatus(bufio.NewScanner(f), p)
}

// capFsetid is CAP_FSETID's bit in CapEff.
const capFsetid = 4

// parseStatus fills p from the CapEff: and Groups: lines of a
// /proc/PID/status file.
func parseStatus(sc *bufio.Scanner, p privs) privs {
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "CapEff":
			caps, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				return p
			}
			p.fsetid = caps&(1<<capFsetid) != 0
		case "Groups":
			for _, g := range strings.Fields(v) {
				if n, err := strconv.ParseUint(g, 10, 32); err == nil {
					p.groups = append(p.groups, uint32(n))
				}
			}
		}
	}
	return p
}

// killPriv clears what a write through a handle of epoch e clears:
// suid/sgid when kill is set (the kernel's WRITE_KILL_SUIDGID: the caller
// lacks CAP_FSETID), and security.capability always. It costs two lookups
// in memory when there is nothing to clear, which is nearly always: the
// kernel has usually cleared them just before, with an empty SETATTR. The
// mode change is checked against e like the write, so a handle from
// before a rewind changes nothing after it.
func (f *FS) killPriv(h *fuse.InHeader, c tree.Caller, e tree.Epoch, kill bool) error {
	st, err := f.live.GetAttr(h.NodeId)
	if err != nil || !st.IsReg() || f.stale(e) {
		return nil // the write itself reports it
	}
	if kill && st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
		mode := dropSuidgid(st.Mode, st.Gid, func() privs { return callerPrivs(h) })
		if mode != st.Mode {
			in := tree.SetAttrIn{Valid: journal.SetMode, Mode: mode, Epoch: e}
			if _, err := f.live.SetAttr(c, h.NodeId, in); err != nil {
				return err
			}
		}
	}
	return f.killCapability(c, h.NodeId)
}

// setAttrChanges are the setattr bits that change something (FATTR_FH and
// FATTR_LOCKOWNER only say how the request came).
const setAttrChanges = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_SIZE |
	fuse.FATTR_ATIME | fuse.FATTR_MTIME | fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW | fuse.FATTR_CTIME

// killPrivSetAttr adds to a setattr what a truncate, a chown or the
// kernel's empty remove-privileges SETATTR clears (see the top of this
// file): the mode change goes into the same record, so the reply tells
// the kernel; the capability is removed first.
func (f *FS) killPrivSetAttr(c tree.Caller, in *fuse.SetAttrIn, sa *tree.SetAttrIn) error {
	empty := in.Valid&setAttrChanges == 0
	if !empty && sa.Valid&(tree.SetSize|journal.SetUid|journal.SetGid) == 0 {
		return nil // chmod, utimens: nothing to clear
	}
	st, err := f.live.GetAttr(in.NodeId)
	if err != nil || !st.IsReg() || f.stale(sa.Epoch) {
		return nil // the setattr itself reports it; directories keep theirs
	}
	mode := st.Mode
	if sa.Valid&journal.SetMode != 0 {
		mode = sa.Mode
	}
	var who privs
	asked := false
	caller := func() privs {
		if !asked {
			who, asked = callerPrivs(&in.InHeader), true
		}
		return who
	}
	kill := in.Valid&fuse.FATTR_KILL_SUIDGID != 0
	if empty && mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
		// A caller with CAP_FSETID gets a remove-privileges SETATTR only
		// for a capability; without one it is chown(f, -1, -1).
		_, capErr := f.live.GetXattr(in.NodeId, xattrCapability)
		kill = !caller().fsetid || capErr != nil
	}
	if kill {
		if m := dropSuidgid(mode, st.Gid, caller); m != mode {
			sa.Valid |= journal.SetMode
			sa.Mode = m
		}
	}
	return f.killCapability(c, in.NodeId)
}

// killCapability removes security.capability if the file has it.
func (f *FS) killCapability(c tree.Caller, ino uint64) error {
	if _, err := f.live.GetXattr(ino, xattrCapability); err != nil {
		return nil // none (or no such node: the operation reports it)
	}
	err := f.live.RemoveXattr(c, ino, xattrCapability)
	if errors.Is(err, tree.ErrNoAttr) {
		return nil // removed meanwhile
	}
	return err
}

// stale reports whether a handle of epoch e belongs to a discarded future
// (a rewind since it was opened): what comes through it changes nothing.
func (f *FS) stale(e tree.Epoch) bool { return e != tree.NoHandle && e != f.live.Epoch() }
