package tree

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/journal"
)

// mkACL builds an ACL value from setfacl-like text: "u::rwx,u:65534:---,g::r-x,m::r-x,o::r--".
func mkACL(t testing.TB, text string) []byte {
	t.Helper()
	tags := map[string][2]uint16{"u": {aclUserObj, aclUser}, "g": {aclGroupObj, aclGroup}, "m": {aclMask, aclMask}, "o": {aclOther, aclOther}}
	var a acl
	for _, f := range strings.Split(text, ",") {
		parts := strings.Split(f, ":")
		if len(parts) != 3 || len(parts[2]) != 3 {
			t.Fatalf("bad ACL entry %q", f)
		}
		var perm uint16
		for i, c := range parts[2] {
			if c != '-' {
				perm |= 4 >> i
			}
		}
		e := aclEntry{tag: tags[parts[0]][0], perm: perm, id: 0xffffffff}
		if parts[1] != "" {
			e.tag = tags[parts[0]][1]
			fmt.Sscan(parts[1], &e.id)
		}
		a = append(a, e)
	}
	return a.bytes()
}

// aclText renders a value back, for messages and comparisons.
func aclText(b []byte) string {
	a, err := parseACL(b)
	if err != nil {
		return fmt.Sprintf("invalid(%v)", err)
	}
	names := map[uint16]string{aclUserObj: "u", aclUser: "u", aclGroupObj: "g", aclGroup: "g", aclMask: "m", aclOther: "o"}
	var out []string
	for _, e := range a {
		id := ""
		if e.tag == aclUser || e.tag == aclGroup {
			id = fmt.Sprint(e.id)
		}
		p := []byte("---")
		for i, c := range "rwx" {
			if e.perm&(4>>i) != 0 {
				p[i] = byte(c)
			}
		}
		out = append(out, names[e.tag]+":"+id+":"+string(p))
	}
	return strings.Join(out, ",")
}

func TestACLParse(t *testing.T) {
	v := mkACL(t, "u::rwx,u:65534:---,g::r-x,m::r-x,o::r--")
	if got := aclText(v); got != "u::rwx,u:65534:---,g::r-x,m::r-x,o::r--" {
		t.Fatalf("round trip: %s", got)
	}
	for _, bad := range [][]byte{nil, {2, 0, 0}, {1, 0, 0, 0}, append(bytes.Clone(v), 0), mkACL(t, "u::rwx,g::r-x")} {
		if _, err := parseACL(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("parseACL(%x): %v, want ErrInvalid", bad, err)
		}
	}
}

// The cases below are what ext4 does (checked with setfacl, touch, mkdir
// and getfacl on ext4 under umask 022).
func TestACLModes(t *testing.T) {
	mode, equiv := mustParse(t, mkACL(t, "u::rwx,g::r-x,o::r-x")).equivMode(syscall.S_IFREG | 0o600)
	if mode != syscall.S_IFREG|0o755 || !equiv {
		t.Errorf("minimal ACL: mode %o equiv %v, want 100755 true", mode, equiv)
	}
	mode, equiv = mustParse(t, mkACL(t, "u::rwx,u:65534:---,g::rwx,m::r-x,o::---")).equivMode(syscall.S_IFREG | 0o4777)
	if mode != syscall.S_IFREG|0o4750 || equiv {
		t.Errorf("ACL with a mask: mode %o equiv %v, want 104750 false (group bits show the mask)", mode, equiv)
	}
	got := aclText(mustParse(t, mkACL(t, "u::rwx,u:65534:---,g::r-x,m::r-x,o::r-x")).chmod(0o640).bytes())
	if got != "u::rw-,u:65534:---,g::r-x,m::r--,o::---" {
		t.Errorf("chmod 640 with a mask: %s", got)
	}
	got = aclText(mustParse(t, mkACL(t, "u::rwx,g::r-x,o::r-x")).chmod(0o640).bytes())
	if got != "u::rw-,g::r--,o::---" {
		t.Errorf("chmod 640 without a mask: %s", got)
	}
	def := mustParse(t, mkACL(t, "u::rwx,u:65534:---,g::r-x,m::r-x,o::r-x"))
	a, mode, equiv := def.createMasq(syscall.S_IFREG | 0o666)
	if aclText(a.bytes()) != "u::rw-,u:65534:---,g::r-x,m::r--,o::r--" || mode != syscall.S_IFREG|0o644 || equiv {
		t.Errorf("creat 0666 under a default ACL: %s mode %o equiv %v", aclText(a.bytes()), mode, equiv)
	}
	a, mode, equiv = mustParse(t, mkACL(t, "u::rwx,g::r-x,o::---")).createMasq(syscall.S_IFDIR | 0o777)
	if aclText(a.bytes()) != "u::rwx,g::r-x,o::---" || mode != syscall.S_IFDIR|0o750 || !equiv {
		t.Errorf("mkdir 0777 under a minimal default ACL: %s mode %o equiv %v", aclText(a.bytes()), mode, equiv)
	}
}

func mustParse(t testing.TB, b []byte) acl {
	t.Helper()
	a, err := parseACL(b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The live tree keeps mode and ACL in step, inherits default ACLs, applies
// the umask only without one, and a replay of its journal shows the same.
func TestLiveACL(t *testing.T) {
	l, j := newTestLive(t)
	c := testCaller
	c.Umask = 0o022
	f, err := l.Create(c, RootIno, "f", syscall.S_IFREG|0o666, 0)
	if err != nil || f.Mode != syscall.S_IFREG|0o644 {
		t.Fatalf("create 0666 under umask 022: mode %o, %v; want 0644", f.Mode, err)
	}
	// sed -i and cp -p copy a mode as a minimal ACL: the mode changes,
	// and nothing is stored.
	if err := l.SetXattr(c, f.Ino, XattrACLAccess, mkACL(t, "u::rwx,g::r-x,o::r-x"), 0); err != nil {
		t.Fatal(err)
	}
	if st, _ := l.GetAttr(f.Ino); st.Mode != syscall.S_IFREG|0o755 {
		t.Errorf("minimal access ACL r-x: mode %o, want 0755", st.Mode)
	}
	if _, err := l.GetXattr(f.Ino, XattrACLAccess); !errors.Is(err, ErrNoAttr) {
		t.Errorf("minimal access ACL stored: %v", err)
	}
	// A named entry is stored, and the group bits show the mask.
	if err := l.SetXattr(c, f.Ino, XattrACLAccess, mkACL(t, "u::rw-,u:65534:---,g::r--,m::rw-,o::---"), 0); err != nil {
		t.Fatal(err)
	}
	if st, _ := l.GetAttr(f.Ino); st.Mode != syscall.S_IFREG|0o660 {
		t.Errorf("ACL with mask rw-: mode %o, want 0660", st.Mode)
	}
	// chmod rewrites the ACL's owner, mask and other entries.
	if _, err := l.SetAttr(c, f.Ino, SetAttrIn{Valid: journal.SetMode, Mode: 0o2604}); err != nil {
		t.Fatal(err)
	}
	if v, _ := l.GetXattr(f.Ino, XattrACLAccess); aclText(v) != "u::rw-,u:65534:---,g::r--,m::---,o::r--" {
		t.Errorf("after chmod 2604: ACL %s", aclText(v))
	}
	// The kernel asks to clear setgid for a caller outside the group.
	if err := l.SetXattr(c, f.Ino, XattrACLAccess, mkACL(t, "u::rw-,g::r--,o::r--"), XattrKillSgid); err != nil {
		t.Fatal(err)
	}
	if st, _ := l.GetAttr(f.Ino); st.Mode != syscall.S_IFREG|0o644 {
		t.Errorf("minimal ACL with kill-sgid: mode %o, want 0644", st.Mode)
	}
	if _, err := l.GetXattr(f.Ino, XattrACLAccess); !errors.Is(err, ErrNoAttr) {
		t.Errorf("a minimal ACL must remove the stored one: %v", err)
	}

	// A directory with a default ACL: no umask, the ACL masks the mode.
	d, err := l.Mkdir(c, RootIno, "d", 0o777)
	if err != nil || d.Mode != syscall.S_IFDIR|0o755 {
		t.Fatalf("mkdir 0777 under umask 022: %o, %v", d.Mode, err)
	}
	def := mkACL(t, "u::rwx,u:65534:---,g::r-x,m::rwx,o::---")
	if err := l.SetXattr(c, d.Ino, XattrACLDefault, def, 0); err != nil {
		t.Fatal(err)
	}
	c.Umask = 0o077 // ignored below a default ACL
	g, err := l.Create(c, d.Ino, "g", syscall.S_IFREG|0o666, 0)
	if err != nil || g.Mode != syscall.S_IFREG|0o660 {
		t.Fatalf("create 0666 under the default ACL: mode %o, %v; want 0660", g.Mode, err)
	}
	if v, _ := l.GetXattr(g.Ino, XattrACLAccess); aclText(v) != "u::rw-,u:65534:---,g::r-x,m::rw-,o::---" {
		t.Errorf("inherited access ACL %s", aclText(v))
	}
	if _, err := l.GetXattr(g.Ino, XattrACLDefault); !errors.Is(err, ErrNoAttr) {
		t.Errorf("a file inherited the default ACL: %v", err)
	}
	sub, err := l.Mkdir(c, d.Ino, "sub", 0o755)
	if err != nil || sub.Mode != syscall.S_IFDIR|0o750 {
		t.Fatalf("mkdir 0755 under the default ACL: mode %o, %v; want 0750", sub.Mode, err)
	}
	if v, _ := l.GetXattr(sub.Ino, XattrACLDefault); !bytes.Equal(v, def) {
		t.Errorf("subdirectory's default ACL %s, want the parent's", aclText(v))
	}
	if v, _ := l.GetXattr(sub.Ino, XattrACLAccess); aclText(v) != "u::rwx,u:65534:---,g::r-x,m::r-x,o::---" {
		t.Errorf("subdirectory's access ACL %s", aclText(v))
	}
	sym, err := l.Symlink(c, d.Ino, "l", "g")
	if err != nil || sym.Mode != syscall.S_IFLNK|0o777 {
		t.Fatalf("symlink under the default ACL: %o, %v", sym.Mode, err)
	}
	if names, _ := l.ListXattr(sym.Ino); len(names) != 0 {
		t.Errorf("symlink got xattrs %v", names)
	}

	// A replay of the journal shows the same modes and ACLs.
	if err := l.Sync(c); err != nil {
		t.Fatal(err)
	}
	tr := replay(t, j)
	for _, ino := range []uint64{f.Ino, d.Ino, g.Ino, sub.Ino, sym.Ino} {
		want, _ := l.GetAttr(ino)
		n := tr.Node(ino)
		if n == nil || n.Mode != want.Mode {
			t.Errorf("replay: inode %d mode %v, want %o", ino, n, want.Mode)
			continue
		}
		lv, _ := l.ListXattr(ino)
		if got := n.XattrNames(); strings.Join(got, " ") != strings.Join(lv, " ") {
			t.Errorf("replay: inode %d xattrs %v, want %v", ino, got, lv)
		}
		for _, name := range lv {
			a, _ := l.GetXattr(ino, name)
			b, _ := n.Xattr(name)
			if !bytes.Equal(a, b) {
				t.Errorf("replay: inode %d %s = %s, want %s", ino, name, aclText(b), aclText(a))
			}
		}
	}
}
