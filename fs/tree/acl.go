package tree

import (
	"encoding/binary"
	"syscall"
)

// POSIX ACLs as ext4 keeps them, for a mount that negotiates
// FUSE_POSIX_ACL. The kernel then enforces the ACLs it reads through
// getxattr and caches, but it leaves three things to the file system
// (fs/fuse/acl.c: "Fuse userspace is responsible for updating access
// permissions in the inode"; libfuse's FUSE_CAP_POSIX_ACL):
//
//   - setting system.posix_acl_access sets the mode's permission bits from
//     the ACL (posix_acl_update_mode), and an ACL the mode can say alone is
//     not stored at all (sed -i and cp -p copy modes this way);
//   - chmod rewrites the owner, mask (or group) and other entries of the
//     access ACL (posix_acl_chmod);
//   - a new inode in a directory with a default ACL inherits it
//     (posix_acl_create): its mode is masked by the ACL instead of the
//     umask, it gets the masked ACL as its access ACL, and a directory
//     also gets the default ACL. Without a default ACL the umask applies;
//     the kernel sends it with the request and, with FUSE_DONT_MASK, does
//     not apply it itself.
//
// The values are the kernel's xattr format: a little-endian version 2
// header, then one {tag u16, perm u16, id u32} per entry.

// Names of the ACL extended attributes.
const (
	XattrACLAccess  = "system.posix_acl_access"
	XattrACLDefault = "system.posix_acl_default"
)

// ACL entry tags (linux/posix_acl.h).
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20

	aclVersion   = 2
	aclEntrySize = 8
	aclHeader    = 4
)

type aclEntry struct {
	tag, perm uint16
	id        uint32
}

// acl is a parsed ACL xattr value, entries in stored order.
type acl []aclEntry

// parseACL decodes an ACL xattr value; it needs the three entries every
// ACL has (owner, group, other), as the kernel's posix_acl_valid does.
func parseACL(b []byte) (acl, error) {
	if len(b) < aclHeader || (len(b)-aclHeader)%aclEntrySize != 0 ||
		binary.LittleEndian.Uint32(b) != aclVersion {
		return nil, ErrInvalid
	}
	a := make(acl, 0, (len(b)-aclHeader)/aclEntrySize)
	var seen uint16
	for p := b[aclHeader:]; len(p) > 0; p = p[aclEntrySize:] {
		e := aclEntry{tag: binary.LittleEndian.Uint16(p), perm: binary.LittleEndian.Uint16(p[2:]) & 7,
			id: binary.LittleEndian.Uint32(p[4:])}
		switch e.tag {
		case aclUserObj, aclUser, aclGroupObj, aclGroup, aclMask, aclOther:
		default:
			return nil, ErrInvalid
		}
		seen |= e.tag
		a = append(a, e)
	}
	if seen&(aclUserObj|aclGroupObj|aclOther) != aclUserObj|aclGroupObj|aclOther {
		return nil, ErrInvalid
	}
	return a, nil
}

// bytes encodes the ACL in the xattr format.
func (a acl) bytes() []byte {
	b := make([]byte, aclHeader, aclHeader+len(a)*aclEntrySize)
	binary.LittleEndian.PutUint32(b, aclVersion)
	for _, e := range a {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// equivMode returns mode with its permission bits taken from the ACL, and
// whether the mode says all the ACL says (no named entries, no mask), in
// which case the ACL need not be stored (posix_acl_equiv_mode).
func (a acl) equivMode(mode uint32) (uint32, bool) {
	var user, group, other, mask uint32
	hasMask, equiv := false, true
	for _, e := range a {
		p := uint32(e.perm)
		switch e.tag {
		case aclUserObj:
			user = p
		case aclGroupObj:
			group = p
		case aclOther:
			other = p
		case aclMask:
			mask, hasMask, equiv = p, true, false
		default:
			equiv = false
		}
	}
	if hasMask {
		group = mask // the group class bits show the mask
	}
	return mode&^0o777 | user<<6 | group<<3 | other, equiv
}

// chmod returns a copy with the owner, other and mask (or, without a mask,
// the group) entries set from mode (posix_acl_chmod).
func (a acl) chmod(mode uint32) acl {
	out := append(acl(nil), a...)
	hasMask := false
	for _, e := range out {
		hasMask = hasMask || e.tag == aclMask
	}
	for i := range out {
		switch e := &out[i]; {
		case e.tag == aclUserObj:
			e.perm = uint16(mode>>6) & 7
		case e.tag == aclOther:
			e.perm = uint16(mode) & 7
		case e.tag == aclMask || e.tag == aclGroupObj && !hasMask:
			e.perm = uint16(mode>>3) & 7
		}
	}
	return out
}

// createMasq is a new inode's share of its directory's default ACL
// (posix_acl_create_masq): the ACL's owner, other and mask (or group)
// entries and the requested mode mask each other. It returns the masked
// copy, the new mode and whether the copy says no more than the mode.
func (a acl) createMasq(mode uint32) (acl, uint32, bool) {
	out := append(acl(nil), a...)
	perm := mode & 0o777
	equiv := true
	var group, mask *aclEntry
	for i := range out {
		e := &out[i]
		switch e.tag {
		case aclUserObj:
			e.perm &= uint16(perm>>6) & 7
			perm &= uint32(e.perm)<<6 | ^uint32(0o700)
		case aclOther:
			e.perm &= uint16(perm) & 7
			perm &= uint32(e.perm) | ^uint32(0o007)
		case aclGroupObj:
			group = e
		case aclMask:
			mask = e
			equiv = false
		default:
			equiv = false
		}
	}
	if mask == nil {
		mask = group
	}
	mask.perm &= uint16(perm>>3) & 7
	perm &= uint32(mask.perm)<<3 | ^uint32(0o070)
	return out, mode&^0o777 | perm&0o777, equiv
}

// aclMode reports whether an inode of this mode can carry ACLs (not a
// symlink: the kernel never asks for one's).
func aclMode(mode uint32) bool { return mode&syscall.S_IFMT != syscall.S_IFLNK }
