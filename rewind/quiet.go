package rewind

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
)

// QuietSlack is how far before the recorded time an entry's ctime still
// counts as "since": the kernel stamps ctime from a coarse clock that can
// lag the clock the time was read from by a tick.
const QuietSlack = time.Second

// UnderneathSince is Underneath for a directory that held base, untouched
// by reynfs, from the time since (Unix ns, read just before the import or
// write-back that put base there started; 0 when unknown). The kernel sets
// an inode's ctime on every change to it (content, mode, owner, xattr,
// link count, rename) and a directory's on every entry added, removed or
// renamed, so when no entry's ctime is at or after since, its entries are
// base's names, and each still has base's type, mode, owner, size and
// mtime (what a clock stepped back would not hide), nothing changed and
// nothing is imported: one fstatat per entry instead of an import that
// reads every xattr and builds and hashes a third tree. Anything else takes
// the full comparison, as do pinned paths (base is not what they hold);
// there a file touched since is read even when its stat matches base.
func UnderneathSince(store cas.Store, top *os.File, base, t *tree.Tree, pin PathSet, since int64) (Kept, error) {
	if since <= 0 {
		return Underneath(store, top, base, t, pin)
	}
	if len(pin) == 0 {
		q, err := Quiet(top, base, since)
		if err != nil {
			return Kept{}, err
		}
		if q {
			return Kept{}, nil
		}
	}
	return underneath(store, top, base, t, pin, since-int64(QuietSlack))
}

// Quiet reports whether the directory top still holds base exactly as
// far as lstat tells, with no ctime at or after since-QuietSlack.
func Quiet(top *os.File, base *tree.Tree, since int64) (bool, error) {
	return quietSince(top, base, since-int64(QuietSlack))
}

// quietSince is Quiet with no slack: cutoff is the ctime that counts.
func quietSince(top *os.File, base *tree.Tree, cutoff int64) (bool, error) {
	root := base.Node(tree.RootIno)
	var st unix.Stat_t
	if err := unix.Fstat(int(top.Fd()), &st); err != nil {
		return false, err
	}
	since := cutoff
	if root == nil || !quietNode(root, &st, since) {
		return false, nil
	}
	return quietDir(top, base, root, since)
}

// quietNode reports whether the native entry st is base node b, untouched
// since.
func quietNode(b *tree.Node, st *unix.Stat_t, since int64) bool {
	return ctime(st) < since && unchanged(b, st)
}

// quietDir compares the native directory d's entries with base's bdir,
// descending into its directories.
func quietDir(d *os.File, base *tree.Tree, bdir *tree.Node, since int64) (bool, error) {
	names, err := readNames(d)
	if err != nil {
		return false, err
	}
	entries := bdir.Entries()
	if len(names) != len(entries) {
		return false, nil
	}
	for _, name := range names {
		b := base.Node(entries[name])
		if b == nil {
			return false, nil
		}
		var st unix.Stat_t
		if err := unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return false, nil
			}
			return false, err
		}
		if !quietNode(b, &st, since) {
			return false, nil
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			continue
		}
		sub, err := openDirAt(d, name)
		if err != nil {
			return false, nil // replaced meanwhile: let the full comparison judge
		}
		q, err := quietDir(sub, base, b, since)
		sub.Close()
		if !q || err != nil {
			return false, err
		}
	}
	return true, nil
}
