package tree

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// Inode numbers of the fixture built by fixture().
const (
	fxD    = 2  // /d
	fxF    = 3  // /d/f, xattr user.a=1
	fxSub  = 4  // /d/sub
	fxG    = 5  // /d/sub/g
	fxE    = 6  // /e (empty)
	fxH    = 7  // /h and /d/h2 (two links)
	fxS    = 8  // /s -> d/f
	fxX    = 9  // /x
	fxY    = 10 // /x/y (empty)
	fxFifo = 11 // /p (fifo)
	fxNew  = 100
)

// fixture is the tree every Apply case starts from.
func fixture(t testing.TB) (*Tree, *cas.Memory) {
	t.Helper()
	tr, s := newTestTree(t)
	mustApply(t, tr,
		rMkdir(RootIno, "d", fxD),
		rCreate(fxD, "f", fxF),
		rMkdir(fxD, "sub", fxSub),
		rCreate(fxSub, "g", fxG),
		rMkdir(RootIno, "e", fxE),
		rCreate(RootIno, "h", fxH),
		rLink(fxH, fxD, "h2"),
		rSymlink(RootIno, "s", fxS, "d/f"),
		rMkdir(RootIno, "x", fxX),
		rMkdir(fxX, "y", fxY),
		rMknod(RootIno, "p", fxFifo, syscall.S_IFIFO|0o600, 0),
		rSetxattr(fxF, "user.a", "1", 0),
	)
	return tr, s
}

func attrs(tr *Tree) map[uint64]Attr {
	out := map[uint64]Attr{}
	for ino, n := range tr.nodes {
		out[ino] = n.Attr
	}
	return out
}

type applyCase struct {
	name  string
	rec   *journal.Record
	want  error    // nil: success
	drops []uint64 // inodes OnDrop must report (success only)
	check func(t *testing.T, tr *Tree)
}

func nlinkIs(ino uint64, want uint32) func(*testing.T, *Tree) {
	return func(t *testing.T, tr *Tree) {
		t.Helper()
		n := tr.Node(ino)
		if n == nil {
			t.Fatalf("inode %d gone", ino)
		}
		if n.Nlink != want {
			t.Errorf("inode %d nlink %d, want %d", ino, n.Nlink, want)
		}
	}
}

func lookupIs(parent uint64, name string, ino uint64) func(*testing.T, *Tree) {
	return func(t *testing.T, tr *Tree) {
		t.Helper()
		n, err := tr.Lookup(parent, name)
		switch {
		case ino == 0 && err == nil:
			t.Errorf("lookup %d/%q: found inode %d, want ENOENT", parent, name, n.Ino)
		case ino == 0:
		case err != nil:
			t.Errorf("lookup %d/%q: %v, want inode %d", parent, name, err, ino)
		case n.Ino != ino:
			t.Errorf("lookup %d/%q: inode %d, want %d", parent, name, n.Ino, ino)
		}
	}
}

func all(fs ...func(*testing.T, *Tree)) func(*testing.T, *Tree) {
	return func(t *testing.T, tr *Tree) {
		t.Helper()
		for _, f := range fs {
			f(t, tr)
		}
	}
}

func TestApply(t *testing.T) {
	long := strings.Repeat("n", MaxName)
	cases := []applyCase{
		// create, mkdir, symlink, mknod
		{name: "create in missing dir", rec: rCreate(99, "a", fxNew), want: ErrStale},
		{name: "create in a file", rec: rCreate(fxF, "a", fxNew), want: ErrNotDir},
		{name: "create existing file", rec: rCreate(fxD, "f", fxNew), want: ErrExist},
		{name: "mkdir over dir", rec: rMkdir(RootIno, "d", fxNew), want: ErrExist},
		{name: "mkdir over symlink", rec: rMkdir(RootIno, "s", fxNew), want: ErrExist},
		{name: "symlink over file", rec: rSymlink(RootIno, "h", fxNew, "x"), want: ErrExist},
		{name: "create reusing an inode number", rec: rCreate(RootIno, "a", fxF), want: ErrInvalid},
		{name: "create inode 0", rec: rCreate(RootIno, "a", 0), want: ErrInvalid},
		{name: "create dot", rec: rCreate(RootIno, ".", fxNew), want: ErrInvalid},
		{name: "create dotdot", rec: rCreate(RootIno, "..", fxNew), want: ErrInvalid},
		{name: "create with slash", rec: rCreate(RootIno, "a/b", fxNew), want: ErrInvalid},
		{name: "create with NUL", rec: rCreate(RootIno, "a\x00", fxNew), want: ErrInvalid},
		{name: "create 256-byte name", rec: rCreate(RootIno, long+"x", fxNew), want: ErrNameTooLong},
		{name: "create 255-byte name", rec: rCreate(RootIno, long, fxNew), check: lookupIs(RootIno, long, fxNew)},
		{name: "create with directory type", rec: rMknod(RootIno, "a", fxNew, syscall.S_IFDIR|0o755, 0), want: ErrInvalid},
		{name: "create with symlink type", rec: rMknod(RootIno, "a", fxNew, syscall.S_IFLNK|0o777, 0), want: ErrInvalid},
		{name: "create file", rec: rCreate(fxE, "a", fxNew), check: func(t *testing.T, tr *Tree) {
			n := tr.Node(fxNew)
			want := Attr{Ino: fxNew, Mode: syscall.S_IFREG | 0o644, Uid: 1, Gid: 2, Nlink: 1, Atime: 10, Mtime: 10, Ctime: 10}
			if n.Attr != want {
				t.Errorf("attr %+v, want %+v", n.Attr, want)
			}
			if e := tr.Node(fxE); e.Mtime != 10 || e.Ctime != 10 || e.Nlink != 2 {
				t.Errorf("parent mtime %d ctime %d nlink %d, want 10 10 2", e.Mtime, e.Ctime, e.Nlink)
			}
		}},
		{name: "create without type bits is a regular file", rec: rMknod(RootIno, "a", fxNew, 0o600, 0), check: func(t *testing.T, tr *Tree) {
			if m := tr.Node(fxNew).Mode; m != syscall.S_IFREG|0o600 {
				t.Errorf("mode %o", m)
			}
		}},
		{name: "mknod char device", rec: rMknod(RootIno, "c", fxNew, syscall.S_IFCHR|0o600, 0x0501), check: func(t *testing.T, tr *Tree) {
			if n := tr.Node(fxNew); n.Mode != syscall.S_IFCHR|0o600 || n.Rdev != 0x0501 {
				t.Errorf("mode %o rdev %x", n.Mode, n.Rdev)
			}
		}},
		{name: "mkdir counts in parent nlink", rec: rMkdir(fxD, "new", fxNew), check: all(nlinkIs(fxD, 4), nlinkIs(fxNew, 2))},
		{name: "mkdir keeps setgid and drops type bits", rec: &journal.Record{Op: journal.OpMkdir, Parent: RootIno, Name: "a", Ino: fxNew, Mode: syscall.S_IFREG | syscall.S_ISGID | 0o700, Time: 1}, check: func(t *testing.T, tr *Tree) {
			if m := tr.Node(fxNew).Mode; m != syscall.S_IFDIR|syscall.S_ISGID|0o700 {
				t.Errorf("mode %o", m)
			}
		}},
		{name: "symlink", rec: rSymlink(fxD, "l", fxNew, "../target"), check: func(t *testing.T, tr *Tree) {
			n := tr.Node(fxNew)
			if tg, err := n.Readlink(); err != nil || tg != "../target" || n.Size != 9 || n.Mode != syscall.S_IFLNK|0o777 {
				t.Errorf("readlink %q %v, size %d mode %o", tg, err, n.Size, n.Mode)
			}
		}},

		// link
		{name: "link missing inode", rec: rLink(99, RootIno, "a"), want: ErrNotExist},
		{name: "link a directory", rec: rLink(fxD, RootIno, "a"), want: ErrInvalid},
		{name: "link into missing dir", rec: rLink(fxF, 99, "a"), want: ErrStale},
		{name: "link into a file", rec: rLink(fxF, fxG, "a"), want: ErrNotDir},
		{name: "link over existing", rec: rLink(fxF, fxD, "sub"), want: ErrExist},
		{name: "link bad name", rec: rLink(fxF, fxD, ".."), want: ErrInvalid},
		{name: "link third name", rec: rLink(fxH, fxSub, "h3"), check: all(nlinkIs(fxH, 3), lookupIs(fxSub, "h3", fxH), func(t *testing.T, tr *Tree) {
			if c := tr.Node(fxH).Ctime; c != 13 {
				t.Errorf("ctime %d, want 13", c)
			}
		})},
		{name: "link same dir twice", rec: rLink(fxF, fxD, "f2"), check: nlinkIs(fxF, 2)},
		{name: "link symlink", rec: rLink(fxS, fxD, "s2"), check: nlinkIs(fxS, 2)},

		// unlink
		{name: "unlink missing", rec: rUnlink(fxD, "nope"), want: ErrNotExist},
		{name: "unlink in missing dir", rec: rUnlink(99, "f"), want: ErrStale},
		{name: "unlink in a file", rec: rUnlink(fxF, "f"), want: ErrNotDir},
		{name: "unlink a directory", rec: rUnlink(RootIno, "e"), want: ErrIsDir},
		{name: "unlink one of two links", rec: rUnlink(fxD, "h2"), check: all(nlinkIs(fxH, 1), lookupIs(fxD, "h2", 0), lookupIs(RootIno, "h", fxH))},
		{name: "unlink last link drops", rec: rUnlink(fxD, "f"), drops: []uint64{fxF}, check: lookupIs(fxD, "f", 0)},
		{name: "unlink symlink", rec: rUnlink(RootIno, "s"), drops: []uint64{fxS}},
		{name: "unlink fifo", rec: rUnlink(RootIno, "p"), drops: []uint64{fxFifo}},

		// rmdir
		{name: "rmdir missing", rec: rRmdir(RootIno, "nope"), want: ErrNotExist},
		{name: "rmdir a file", rec: rRmdir(fxD, "f"), want: ErrNotDir},
		{name: "rmdir a symlink", rec: rRmdir(RootIno, "s"), want: ErrNotDir},
		{name: "rmdir non-empty", rec: rRmdir(RootIno, "x"), want: ErrNotEmpty},
		{name: "rmdir in missing dir", rec: rRmdir(99, "e"), want: ErrStale},
		{name: "rmdir empty", rec: rRmdir(fxX, "y"), drops: []uint64{fxY}, check: nlinkIs(fxX, 2)},
		{name: "rmdir empty at root", rec: rRmdir(RootIno, "e"), drops: []uint64{fxE}, check: nlinkIs(RootIno, 4)},

		// rename
		{name: "rename missing", rec: rRename(fxD, "nope", RootIno, "a", 0), want: ErrNotExist},
		{name: "rename from missing dir", rec: rRename(99, "f", RootIno, "a", 0), want: ErrStale},
		{name: "rename to missing dir", rec: rRename(fxD, "f", 99, "a", 0), want: ErrStale},
		{name: "rename into a file", rec: rRename(fxD, "f", fxG, "a", 0), want: ErrNotDir},
		{name: "rename to long name", rec: rRename(fxD, "f", RootIno, long+"x", 0), want: ErrNameTooLong},
		{name: "rename to dotdot", rec: rRename(fxD, "f", RootIno, "..", 0), want: ErrInvalid},
		{name: "rename bad flags", rec: rRename(fxD, "f", RootIno, "a", 4), want: ErrInvalid},
		{name: "rename noreplace|exchange", rec: rRename(fxD, "f", RootIno, "h", journal.RenameNoreplace|journal.RenameExchange), want: ErrInvalid},
		{name: "rename dir over file", rec: rRename(fxD, "sub", fxD, "f", 0), want: ErrNotDir},
		{name: "rename dir over symlink", rec: rRename(RootIno, "e", RootIno, "s", 0), want: ErrNotDir},
		{name: "rename file over dir", rec: rRename(fxD, "f", RootIno, "e", 0), want: ErrIsDir},
		{name: "rename dir over non-empty dir", rec: rRename(RootIno, "e", RootIno, "x", 0), want: ErrNotEmpty},
		{name: "rename dir into own subdir", rec: rRename(RootIno, "d", fxSub, "z", 0), want: ErrInvalid},
		{name: "rename dir into itself", rec: rRename(RootIno, "d", fxD, "z", 0), want: ErrInvalid},
		{name: "rename dir over own child", rec: rRename(RootIno, "d", fxD, "sub", 0), want: ErrInvalid},
		{name: "rename dir over its ancestor", rec: rRename(fxD, "sub", RootIno, "d", 0), want: ErrNotEmpty},
		{name: "rename file", rec: rRename(fxD, "f", fxE, "f2", 0), check: all(lookupIs(fxD, "f", 0), lookupIs(fxE, "f2", fxF), nlinkIs(fxF, 1), func(t *testing.T, tr *Tree) {
			if c := tr.Node(fxF).Ctime; c != 16 {
				t.Errorf("ctime %d, want 16", c)
			}
			for _, d := range []uint64{fxD, fxE} {
				if n := tr.Node(d); n.Mtime != 16 || n.Ctime != 16 {
					t.Errorf("dir %d mtime %d ctime %d, want 16", d, n.Mtime, n.Ctime)
				}
			}
		})},
		{name: "rename dir moves nlink", rec: rRename(fxD, "sub", fxX, "sub", 0), check: all(nlinkIs(fxD, 2), nlinkIs(fxX, 4), lookupIs(fxX, "sub", fxSub), func(t *testing.T, tr *Tree) {
			if p := tr.Parent(fxSub); p != fxX {
				t.Errorf("parent of moved dir %d, want %d", p, fxX)
			}
		})},
		{name: "rename dir over empty dir", rec: rRename(fxX, "y", RootIno, "e", 0), drops: []uint64{fxE}, check: all(nlinkIs(RootIno, 5), nlinkIs(fxX, 2), lookupIs(RootIno, "e", fxY))},
		{name: "rename file over file drops it", rec: rRename(fxSub, "g", fxD, "f", 0), drops: []uint64{fxF}, check: all(lookupIs(fxD, "f", fxG), lookupIs(fxSub, "g", 0))},
		{name: "rename file over hard link keeps it", rec: rRename(fxD, "f", RootIno, "h", 0), check: all(nlinkIs(fxH, 1), lookupIs(fxD, "h2", fxH), lookupIs(RootIno, "h", fxF))},
		{name: "rename hard link over the other name", rec: rRename(RootIno, "h", fxD, "h2", 0), check: all(nlinkIs(fxH, 2), lookupIs(RootIno, "h", fxH), lookupIs(fxD, "h2", fxH))},
		{name: "rename onto itself", rec: rRename(fxD, "f", fxD, "f", 0), check: lookupIs(fxD, "f", fxF)},
		{name: "rename dir onto itself", rec: rRename(RootIno, "d", RootIno, "d", 0), check: nlinkIs(fxD, 3)},
		{name: "rename within dir", rec: rRename(fxD, "f", fxD, "f3", 0), check: all(lookupIs(fxD, "f3", fxF), nlinkIs(fxF, 1))},
		{name: "noreplace onto existing", rec: rRename(fxD, "f", RootIno, "h", journal.RenameNoreplace), want: ErrExist},
		{name: "noreplace onto other name of same inode", rec: rRename(RootIno, "h", fxD, "h2", journal.RenameNoreplace), want: ErrExist},
		{name: "noreplace onto new name", rec: rRename(fxD, "f", RootIno, "f", journal.RenameNoreplace), check: lookupIs(RootIno, "f", fxF)},
		{name: "exchange with missing", rec: rRename(fxD, "f", RootIno, "nope", journal.RenameExchange), want: ErrNotExist},
		{name: "exchange missing with existing", rec: rRename(fxD, "nope", RootIno, "h", journal.RenameExchange), want: ErrNotExist},
		{name: "exchange dir with its descendant", rec: rRename(RootIno, "d", fxSub, "g", journal.RenameExchange), want: ErrInvalid},
		{name: "exchange descendant with its ancestor", rec: rRename(fxSub, "g", RootIno, "d", journal.RenameExchange), want: ErrInvalid},
		{name: "exchange two files", rec: rRename(fxD, "f", fxSub, "g", journal.RenameExchange), check: all(lookupIs(fxD, "f", fxG), lookupIs(fxSub, "g", fxF), nlinkIs(fxF, 1), nlinkIs(fxG, 1))},
		{name: "exchange file and dir", rec: rRename(fxD, "f", RootIno, "e", journal.RenameExchange), check: all(lookupIs(fxD, "f", fxE), lookupIs(RootIno, "e", fxF), nlinkIs(fxD, 4), nlinkIs(RootIno, 4), func(t *testing.T, tr *Tree) {
			if p := tr.Parent(fxE); p != fxD {
				t.Errorf("parent of exchanged dir %d, want %d", p, fxD)
			}
		})},
		{name: "exchange two dirs", rec: rRename(fxD, "sub", fxX, "y", journal.RenameExchange), check: all(lookupIs(fxD, "sub", fxY), lookupIs(fxX, "y", fxSub), nlinkIs(fxD, 3), nlinkIs(fxX, 3))},
		{name: "exchange two names of one inode", rec: rRename(RootIno, "h", fxD, "h2", journal.RenameExchange), check: nlinkIs(fxH, 2)},
		{name: "exchange hard link with a file", rec: rRename(fxD, "h2", fxD, "f", journal.RenameExchange), check: all(lookupIs(fxD, "h2", fxF), lookupIs(fxD, "f", fxH), lookupIs(RootIno, "h", fxH), nlinkIs(fxH, 2))},

		// setattr
		{name: "setattr missing", rec: rChmod(99, 0o600, 20), want: ErrStale},
		{name: "chmod keeps the type", rec: rChmod(fxF, syscall.S_IFDIR|syscall.S_ISUID|0o4711, 20), check: func(t *testing.T, tr *Tree) {
			if n := tr.Node(fxF); n.Mode != syscall.S_IFREG|0o4711 || n.Ctime != 20 {
				t.Errorf("mode %o ctime %d", n.Mode, n.Ctime)
			}
		}},
		{name: "chown and times", rec: &journal.Record{Op: journal.OpSetattr, Ino: fxD, Valid: journal.SetUid | journal.SetGid | journal.SetAtime | journal.SetMtime, Uid: 7, Gid: 8, Atime: 30, Mtime: 31, Time: 32}, check: func(t *testing.T, tr *Tree) {
			n := tr.Node(fxD)
			if n.Uid != 7 || n.Gid != 8 || n.Atime != 30 || n.Mtime != 31 || n.Ctime != 32 || n.Mode != syscall.S_IFDIR|0o755 {
				t.Errorf("attr %+v", n.Attr)
			}
		}},
		{name: "setattr of one field only", rec: &journal.Record{Op: journal.OpSetattr, Ino: fxF, Valid: journal.SetGid, Gid: 9, Time: 40}, check: func(t *testing.T, tr *Tree) {
			if n := tr.Node(fxF); n.Uid != 1 || n.Gid != 9 || n.Mode != syscall.S_IFREG|0o644 || n.Mtime != 10 {
				t.Errorf("attr %+v", n.Attr)
			}
		}},

		// xattrs
		{name: "setxattr missing inode", rec: rSetxattr(99, "user.a", "v", 0), want: ErrStale},
		{name: "setxattr create existing", rec: rSetxattr(fxF, "user.a", "v", xattrCreate), want: ErrExist},
		{name: "setxattr replace missing", rec: rSetxattr(fxF, "user.b", "v", xattrReplace), want: ErrNoAttr},
		{name: "setxattr create|replace existing", rec: rSetxattr(fxF, "user.a", "v", xattrCreate|xattrReplace), want: ErrExist},
		{name: "setxattr create|replace missing", rec: rSetxattr(fxF, "user.b", "v", xattrCreate|xattrReplace), want: ErrNoAttr},
		{name: "setxattr empty name", rec: &journal.Record{Op: journal.OpSetxattr, Ino: fxF, XValue: []byte("v"), Time: 1}, want: ErrInvalid},
		{name: "setxattr create new", rec: rSetxattr(fxF, "user.b", "v", xattrCreate), check: xattrIs(fxF, "user.b", "v")},
		{name: "setxattr replace existing", rec: rSetxattr(fxF, "user.a", "2", xattrReplace), check: xattrIs(fxF, "user.a", "2")},
		{name: "setxattr overwrite", rec: rSetxattr(fxF, "user.a", "3", 0), check: xattrIs(fxF, "user.a", "3")},
		{name: "setxattr empty value", rec: rSetxattr(fxD, "user.e", "", 0), check: xattrIs(fxD, "user.e", "")},
		{name: "removexattr missing", rec: rRemovexattr(fxF, "user.b"), want: ErrNoAttr},
		{name: "removexattr missing inode", rec: rRemovexattr(99, "user.a"), want: ErrStale},
		{name: "removexattr", rec: rRemovexattr(fxF, "user.a"), check: func(t *testing.T, tr *Tree) {
			if _, err := tr.Node(fxF).Xattr("user.a"); err != ErrNoAttr || len(tr.Node(fxF).XattrNames()) != 0 {
				t.Errorf("xattr still there: %v %v", err, tr.Node(fxF).XattrNames())
			}
		}},

		// data
		{name: "data missing inode", rec: &journal.Record{Op: journal.OpData, Ino: 99, Size: 1, Time: 1}, want: ErrStale},
		{name: "data on a dir", rec: &journal.Record{Op: journal.OpData, Ino: fxD, Size: 1, Time: 1}, want: ErrInvalid},
		{name: "data on a symlink", rec: &journal.Record{Op: journal.OpData, Ino: fxS, Size: 1, Time: 1}, want: ErrInvalid},
		{name: "data chunk past size", rec: &journal.Record{Op: journal.OpData, Ino: fxF, Size: cas.ChunkSize, Chunks: []journal.Chunk{{Index: 1, Hash: cas.Sum([]byte("x"))}}, Time: 1}, want: ErrInvalid},
		{name: "data too big", rec: &journal.Record{Op: journal.OpData, Ino: fxF, Size: MaxFileSize + 1, Time: 1}, want: ErrFileTooBig},
		{name: "data sets size and mtime", rec: &journal.Record{Op: journal.OpData, Ino: fxH, Size: 3 * cas.ChunkSize, Mtime: 50, Time: 51}, check: func(t *testing.T, tr *Tree) {
			n := tr.Node(fxH)
			if n.Size != 3*cas.ChunkSize || n.Mtime != 50 || n.Ctime != 50 || len(n.ChunkHashes()) != 3 || n.Blocks() != 0 {
				t.Errorf("attr %+v, %d chunks, %d blocks", n.Attr, len(n.ChunkHashes()), n.Blocks())
			}
		}},

		// control records leave the tree alone, unknown ones are refused
		{name: "generation", rec: &journal.Record{Op: journal.OpGeneration, GenKind: "manual", Time: 1}},
		{name: "reset", rec: &journal.Record{Op: journal.OpReset, ResetTo: 1, Time: 1}},
		{name: "import is not Apply's", rec: &journal.Record{Op: journal.OpImport, Time: 1}, want: ErrInvalid},
		{name: "invalid op", rec: &journal.Record{Op: journal.OpInvalid}, want: ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, s := fixture(t)
			var drops []uint64
			tr.OnDrop = func(n *Node) { drops = append(drops, n.Ino) }
			before := storeRoot(t, tr, s)
			beforeAttrs, beforeNames := attrs(tr), snapshot(tr)

			err := tr.Apply(tc.rec)
			if !sameErr(tc.want, err) {
				t.Fatalf("Apply %v: error %v, want %v", tc.rec.Op, err, tc.want)
			}
			if cerr := tr.Check(); cerr != nil {
				t.Fatalf("Check after Apply: %v", cerr)
			}
			if !reflect.DeepEqual(drops, tc.drops) {
				t.Errorf("OnDrop saw %v, want %v", drops, tc.drops)
			}
			for _, ino := range tc.drops {
				if tr.Node(ino) != nil {
					t.Errorf("dropped inode %d still in the tree", ino)
				}
			}
			after := storeRoot(t, tr, s)
			if err != nil || tc.rec.Op >= journal.OpGeneration {
				if after != before {
					t.Errorf("failed Apply changed the root %s -> %s", before.Short(), after.Short())
				}
				if d := diffSnapshots(beforeNames, snapshot(tr)); d != "" {
					t.Errorf("failed Apply changed the namespace:\n%s", d)
				}
				if !reflect.DeepEqual(beforeAttrs, attrs(tr)) {
					t.Errorf("failed Apply changed attributes")
				}
				return
			}
			if tc.check != nil {
				tc.check(t, tr)
			}
			// The applied tree round-trips through the store.
			loaded, lerr := Load(s, after)
			if lerr != nil {
				t.Fatalf("Load: %v", lerr)
			}
			if !reflect.DeepEqual(attrs(loaded), attrs(tr)) {
				t.Errorf("Load gives other attributes")
			}
		})
	}
}

func xattrIs(ino uint64, name, val string) func(*testing.T, *Tree) {
	return func(t *testing.T, tr *Tree) {
		t.Helper()
		v, err := tr.Node(ino).Xattr(name)
		if err != nil || string(v) != val {
			t.Errorf("xattr %s = %q, %v; want %q", name, v, err, val)
		}
	}
}

// TestApplyNoopRenames: a rename between two names of one inode (and of a
// name onto itself) succeeds and changes nothing at all, as on ext4.
func TestApplyNoopRenames(t *testing.T) {
	for _, r := range []*journal.Record{
		rRename(RootIno, "h", fxD, "h2", 0),
		rRename(fxD, "h2", RootIno, "h", 0),
		rRename(fxD, "f", fxD, "f", 0),
		rRename(RootIno, "d", RootIno, "d", 0),
		rRename(RootIno, "h", fxD, "h2", journal.RenameExchange),
	} {
		tr, s := fixture(t)
		before := storeRoot(t, tr, s)
		mustApply(t, tr, r)
		if after := storeRoot(t, tr, s); after != before {
			t.Errorf("rename %q -> %q (flags %d) changed the tree", r.Name, r.NewName, r.Flags)
		}
	}
}

// TestApplyDirNlink: a directory's link count is 2 plus its subdirectories
// through a series of mkdir, rename and rmdir.
func TestApplyDirNlink(t *testing.T) {
	tr, _ := newTestTree(t)
	mustApply(t, tr, rMkdir(RootIno, "a", 2), rMkdir(RootIno, "b", 3))
	for i := range uint64(5) {
		mustApply(t, tr, rMkdir(2, fmt.Sprint("d", i), 10+i), rCreate(2, fmt.Sprint("f", i), 20+i))
	}
	want := func(ino uint64, n uint32) {
		t.Helper()
		if got := tr.Node(ino).Nlink; got != n {
			t.Errorf("dir %d nlink %d, want %d", ino, got, n)
		}
	}
	want(RootIno, 4)
	want(2, 7)
	mustApply(t, tr, rRename(2, "d0", 3, "d0", 0), rRename(2, "d1", 10, "d1", 0))
	want(2, 5)
	want(3, 3)
	want(10, 3)
	mustApply(t, tr, rRename(3, "d0", RootIno, "top", 0))
	want(RootIno, 5)
	want(3, 2)
	mustApply(t, tr, rRmdir(10, "d1"), rRmdir(RootIno, "top"))
	want(RootIno, 4)
	mustApply(t, tr, rRename(2, "d2", 3, "d3", 0), rRename(2, "d3", 3, "d3", 0)) // second replaces the first
	want(2, 3)
	want(3, 3)
}

// TestApplyModel applies random namespace operations to the tree and to the
// path model and compares the results and the namespaces after each step.
func TestApplyModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runApplyModel(t, seed, 600) })
	}
}

func runApplyModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0))
	tr, s := newTestTree(t)
	m := newModel()
	names := []string{"a", "b", "c", "d"}
	nextIno := uint64(2)
	var inos []uint64 // every inode ever made, live or not
	inos = append(inos, RootIno)
	pickIno := func() uint64 {
		if rng.IntN(20) == 0 {
			return 999 // never existed
		}
		return inos[rng.IntN(len(inos))]
	}
	pickDir := func() uint64 {
		// Mostly directories that exist, sometimes anything.
		for range 10 {
			ino := pickIno()
			if n := tr.Node(ino); n != nil && n.IsDir() {
				return ino
			}
		}
		return pickIno()
	}
	name := func() string { return names[rng.IntN(len(names))] }
	for step := range steps {
		var r *journal.Record
		var want error
		switch k := rng.IntN(10); k {
		case 0, 1:
			r = rCreate(pickDir(), name(), nextIno)
			want = m.create(r.Parent, r.Name, r.Ino, syscall.S_IFREG)
		case 2, 3:
			r = rMkdir(pickDir(), name(), nextIno)
			want = m.create(r.Parent, r.Name, r.Ino, syscall.S_IFDIR)
		case 4:
			r = rSymlink(pickDir(), name(), nextIno, "t")
			want = m.create(r.Parent, r.Name, r.Ino, syscall.S_IFLNK)
		case 5:
			r = rLink(pickIno(), pickDir(), name())
			want = m.link(r.Ino, r.Parent, r.Name)
		case 6:
			r = rUnlink(pickDir(), name())
			want = m.remove(r.Parent, r.Name, false)
		case 7:
			r = rRmdir(pickDir(), name())
			want = m.remove(r.Parent, r.Name, true)
		default:
			r = rRename(pickDir(), name(), pickDir(), name(), uint32(rng.IntN(3)))
			want = m.rename(r.Parent, r.Name, r.NewParent, r.NewName, r.Flags)
		}
		if r.Ino == nextIno {
			inos = append(inos, nextIno)
			nextIno++
		}
		before := storeRoot(t, tr, s)
		got := tr.Apply(r)
		desc := fmt.Sprintf("seed %d step %d: %v %d/%q -> %d/%q ino %d flags %d", seed, step, r.Op, r.Parent, r.Name, r.NewParent, r.NewName, r.Ino, r.Flags)
		if !sameErr(want, got) {
			t.Fatalf("%s: error %v, model says %v", desc, got, want)
		}
		if err := tr.Check(); err != nil {
			t.Fatalf("%s: Check: %v", desc, err)
		}
		if d := diffSnapshots(m.snapshot(), snapshot(tr)); d != "" {
			t.Fatalf("%s: namespace differs from the model:\n%s", desc, d)
		}
		if got != nil {
			if after := storeRoot(t, tr, s); after != before {
				t.Fatalf("%s: failed Apply changed the root", desc)
			}
		}
	}
	// The final tree survives a store round trip.
	root := storeRoot(t, tr, s)
	loaded, err := Load(s, root)
	if err != nil {
		t.Fatalf("seed %d: Load: %v", seed, err)
	}
	if d := diffSnapshots(snapshot(tr), snapshot(loaded)); d != "" {
		t.Fatalf("seed %d: loaded namespace differs:\n%s", seed, d)
	}
}
