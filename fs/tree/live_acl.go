package tree

import (
	"bytes"
	"syscall"

	"github.com/reynfs/reynfs/journal"
)

// XattrKillSgid is a SetXattr flag beside XATTR_CREATE and XATTR_REPLACE:
// the kernel asks that setting the access ACL also clears the setgid bit
// (FUSE_SETXATTR_ACL_KILL_SGID: the caller is not in the file's group and
// lacks CAP_FSETID), as posix_acl_update_mode does on ext4.
const XattrKillSgid = 1 << 16

// inheritACL decides a new inode's mode and ACLs (see acl.go): the umask
// when the parent has no default ACL, else the default ACL's masking. It
// sets r.Mode and returns the records that complete the inode after its
// create record, with r.Ino and r.Time set.
//
// They are separate records, so a crash may keep only a prefix of them:
// the create record then carries the owner's bits only, the ACLs follow,
// and the last record sets the final mode. Every prefix is at most as
// permissive as the result (an inherited entry that denies someone is
// never missing while the group or other bits would let them in).
func inheritACL(parent *Node, r *journal.Record, umask uint32) []*journal.Record {
	def, ok := parent.xattrs[XattrACLDefault]
	var a acl
	if ok {
		var err error
		if a, err = parseACL(def); err != nil {
			ok = false // a value the kernel never wrote (an import): as if absent
		}
	}
	if !ok {
		r.Mode &^= umask & 0o777
		return nil
	}
	access, mode, equiv := a.createMasq(r.Mode)
	r.Mode = mode &^ 0o077
	var out []*journal.Record
	if !equiv {
		out = append(out, &journal.Record{Op: journal.OpSetxattr, Ino: r.Ino, XName: XattrACLAccess,
			XValue: access.bytes(), Time: r.Time})
	}
	if r.Op == journal.OpMkdir {
		out = append(out, &journal.Record{Op: journal.OpSetxattr, Ino: r.Ino, XName: XattrACLDefault,
			XValue: append([]byte(nil), def...), Time: r.Time})
	}
	if mode != r.Mode {
		out = append(out, &journal.Record{Op: journal.OpSetattr, Ino: r.Ino, Valid: journal.SetMode,
			Mode: mode &^ syscall.S_IFMT, Time: r.Time})
	}
	return out
}

// setAccessACL sets (or, when the mode says it all, removes) n's access
// ACL and sets the mode's permission bits from it. The ACL goes first: it
// is what the kernel enforces, so a crash between the records keeps the
// new permissions. Caller holds l.mu.
func (l *Live) setAccessACL(c Caller, n *Node, value []byte, flags uint32) error {
	a, err := parseACL(value)
	if err != nil {
		return err
	}
	mode, equiv := a.equivMode(n.Mode)
	if flags&XattrKillSgid != 0 {
		mode &^= syscall.S_ISGID
	}
	now := l.now()
	_, has := n.xattrs[XattrACLAccess]
	switch {
	case !equiv:
		err = l.commitNode(c, n, &journal.Record{Op: journal.OpSetxattr, Ino: n.Ino, XName: XattrACLAccess,
			XValue: append([]byte(nil), value...), Flags: flags &^ XattrKillSgid, Time: now})
	case has:
		err = l.commitNode(c, n, &journal.Record{Op: journal.OpRemovexattr, Ino: n.Ino, XName: XattrACLAccess, Time: now})
	}
	if err != nil || mode == n.Mode {
		return err
	}
	return l.commitNode(c, n, &journal.Record{Op: journal.OpSetattr, Ino: n.Ino, Valid: journal.SetMode,
		Mode: mode &^ syscall.S_IFMT, Time: now})
}

// chmodACL keeps n's access ACL in step with a chmod to mode, before the
// mode itself changes (posix_acl_chmod). Caller holds l.mu.
func (l *Live) chmodACL(c Caller, n *Node, mode uint32, now int64) error {
	old, ok := n.xattrs[XattrACLAccess]
	if !ok || !aclMode(n.Mode) {
		return nil
	}
	a, err := parseACL(old)
	if err != nil {
		return nil // not an ACL the kernel wrote: left as it is
	}
	v := a.chmod(mode).bytes()
	if bytes.Equal(v, old) {
		return nil
	}
	return l.commitNode(c, n, &journal.Record{Op: journal.OpSetxattr, Ino: n.Ino, XName: XattrACLAccess, XValue: v, Time: now})
}
