package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// entry is what a tree comparison looks at for one name.
type entry struct {
	Type   string // file, dir, symlink, other
	Perm   uint32 // mode & 07777
	Size   int64  // files and symlinks
	Nlink  uint64
	Sum    string // sha256 of a file's content
	Target string // symlink target
	Xattrs map[string]string
	Mtime  int64 // ns
	Ino    uint64
}

// snapshot walks root (not following symlinks) and describes every name
// under it, keyed by path relative to root.
func snapshot(root string) (map[string]entry, error) {
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		e := entry{Perm: st.Mode & 0o7777, Nlink: uint64(st.Nlink), Mtime: st.Mtim.Nano(), Ino: st.Ino}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			e.Type, e.Size = "file", st.Size
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			e.Sum = hex.EncodeToString(s[:8])
		case unix.S_IFDIR:
			e.Type = "dir"
		case unix.S_IFLNK:
			e.Type, e.Size = "symlink", st.Size
			if e.Target, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			e.Type = fmt.Sprintf("other(%o)", st.Mode&unix.S_IFMT)
		}
		if e.Type != "symlink" {
			x, err := userXattrs(p)
			if err != nil {
				return err
			}
			e.Xattrs = x
		}
		out[rel] = e
		return nil
	})
	return out, err
}

// userXattrs returns the user.* extended attributes of path.
func userXattrs(p string) (map[string]string, error) {
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if errors.Is(err, unix.ENOTSUP) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listxattr %s: %w", p, err)
	}
	var out map[string]string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		v := make([]byte, 64<<10)
		m, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			return nil, fmt.Errorf("getxattr %s %s: %w", p, name, err)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = string(v[:m])
	}
	return out, nil
}

// cmpOpts says which fields a comparison includes.
type cmpOpts struct {
	mtime    bool // compare mtimes of files and dirs
	dirNlink bool // compare link counts of directories
}

// compareTrees lists the differences between want (the oracle) and got.
func compareTrees(want, got map[string]entry, o cmpOpts) []string {
	var diffs []string
	names := map[string]bool{}
	for k := range want {
		names[k] = true
	}
	for k := range got {
		names[k] = true
	}
	sorted := make([]string, 0, len(names))
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case !gok:
			diffs = append(diffs, fmt.Sprintf("%s: missing (want %s)", k, w.Type))
			continue
		case !wok:
			diffs = append(diffs, fmt.Sprintf("%s: unexpected %s", k, g.Type))
			continue
		}
		add := func(field string, want, got any) {
			diffs = append(diffs, fmt.Sprintf("%s: %s: want %v, got %v", k, field, want, got))
		}
		if w.Type != g.Type {
			add("type", w.Type, g.Type)
			continue
		}
		if w.Type != "symlink" && w.Perm != g.Perm {
			add("mode", fmt.Sprintf("%04o", w.Perm), fmt.Sprintf("%04o", g.Perm))
		}
		if w.Type != "dir" && w.Size != g.Size {
			add("size", w.Size, g.Size)
		}
		if w.Sum != g.Sum {
			add("content sha256", w.Sum, g.Sum)
		}
		if w.Target != g.Target {
			add("symlink target", w.Target, g.Target)
		}
		if (w.Type != "dir" || o.dirNlink) && w.Nlink != g.Nlink {
			add("nlink", w.Nlink, g.Nlink)
		}
		if fmt.Sprint(w.Xattrs) != fmt.Sprint(g.Xattrs) {
			add("xattrs", w.Xattrs, g.Xattrs)
		}
		if o.mtime && w.Type != "symlink" && w.Mtime != g.Mtime {
			add("mtime", w.Mtime, g.Mtime)
		}
	}
	return diffs
}

// linkGroups maps each regular file with nlink > 1 to the sorted names
// sharing its inode, so hard links can be compared across file systems.
func linkGroups(s map[string]entry) map[string]string {
	byIno := map[uint64][]string{}
	for k, e := range s {
		if e.Type == "file" && e.Nlink > 1 {
			byIno[e.Ino] = append(byIno[e.Ino], k)
		}
	}
	out := map[string]string{}
	for _, names := range byIno {
		sort.Strings(names)
		for _, n := range names {
			out[n] = strings.Join(names, ",")
		}
	}
	return out
}

// statIno returns the inode number and link count of path.
func statIno(p string) (uint64, uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return 0, 0, err
	}
	return st.Ino, uint64(st.Nlink), nil
}

// truncList shortens a list of differences for a failure message.
func truncList(d []string, n int) string {
	if len(d) > n {
		d = append(d[:n:n], fmt.Sprintf("... and %d more", len(d)-n))
	}
	return strings.Join(d, "\n")
}
