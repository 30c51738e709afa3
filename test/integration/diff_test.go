package integration

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// differ applies one random operation at a time to a native directory (the
// kernel's own file system is the oracle) and to a reynfs mount, and fails
// at the first errno, result or tree that differs.
type differ struct {
	t       *testing.T
	seed    uint64
	r       *rand.Rand
	roots   [2]string // 0: native oracle, 1: reynfs mount
	handles []*handle
	step    int
	history []string       // last operations, for the failure message
	tally   map[string]int // "op errno" → count, logged at the end
}

// handle is one open file description on each side.
type handle struct {
	fd   [2]int
	path string
	desc string
}

var (
	diffDirs  = []string{"", "d0", "d1", "d0/d2", "d1/d0", "d0/d2/d1"}
	diffNames = []string{"f0", "f1", "f2", "f3", "d0", "d1", "d2", "l0", "l1"}
)

// TestDifferential: ≥ 2000 seeded random operations against native and
// mount; REYNFS_SEED=N reproduces a run, REYNFS_STEPS=N changes its length.
func TestDifferential(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("REYNFS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("REYNFS_SEED: %v", err)
		}
	}
	steps := 4000
	if testing.Short() {
		steps = 2000
	}
	if s := os.Getenv("REYNFS_STEPS"); s != "" {
		steps, _ = strconv.Atoi(s)
	}
	m := mountProject(t, t.TempDir())
	d := &differ{t: t, seed: seed, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), roots: [2]string{t.TempDir(), m.Dir}, tally: map[string]int{}}
	t.Cleanup(func() { // before the unmount: a failed run leaves handles open
		for _, h := range d.handles {
			unix.Close(h.fd[0])
			unix.Close(h.fd[1])
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reproduce with: REYNFS_SEED=%d go test -run 'TestDifferential$' ./test/integration/", seed)
		}
	})
	t.Logf("seed %d, %d steps", seed, steps)
	for d.step = 1; d.step <= steps; d.step++ {
		d.randomOp()
		if d.step%200 == 0 {
			d.compareTrees("mounted")
		}
	}
	d.closeAll()
	d.compareTrees("mounted, end")
	final, _ := snapshot(d.roots[0])
	t.Logf("%d names at the end; outcomes: %v", len(final), d.tally)
	m.Unmount()
	d.compareTrees("written back")
	m.Mount()
	d.compareTrees("remounted")
}

// pick returns a path for an operation on kind f(ile), d(ir), l(ink) or
// a(ny): mostly an existing one (as the oracle has it), else a new name
// in an existing directory, sometimes anything at all (for the errnos).
func (d *differ) pick(kind byte) string {
	byKind := map[byte][]string{'a': nil, 'd': {""}}
	_ = filepath.WalkDir(d.roots[0], func(p string, e os.DirEntry, err error) error {
		if err != nil || p == d.roots[0] {
			return nil
		}
		rel, _ := filepath.Rel(d.roots[0], p)
		k := byte('f')
		switch {
		case e.IsDir():
			k = 'd'
		case e.Type()&os.ModeSymlink != 0:
			k = 'l'
		}
		byKind[k] = append(byKind[k], rel)
		byKind['a'] = append(byKind['a'], rel)
		return nil
	})
	names := map[byte][]string{'f': {"f0", "f1", "f2", "f3"}, 'd': {"d0", "d1", "d2"}, 'l': {"l0", "l1"}, 'a': diffNames}[kind]
	switch n := d.r.IntN(10); {
	case n < 5 && len(byKind[kind]) > 0 && (kind != 'd' || len(byKind[kind]) > 1):
		if kind == 'd' { // never the root itself
			return byKind[kind][1+d.r.IntN(len(byKind[kind])-1)]
		}
		return byKind[kind][d.r.IntN(len(byKind[kind]))]
	case n < 9:
		dirs := byKind['d']
		return filepath.Join(dirs[d.r.IntN(len(dirs))], names[d.r.IntN(len(names))])
	}
	return filepath.Join(diffDirs[d.r.IntN(len(diffDirs))], diffNames[d.r.IntN(len(diffNames))])
}

// both runs f on each side and fails if the errno or result differ.
func (d *differ) both(desc string, f func(side int, p func(string) string) (string, error)) (string, error) {
	d.history = append(d.history, fmt.Sprintf("%d: %s", d.step, desc))
	if len(d.history) > historyLen() {
		d.history = d.history[1:]
	}
	var res [2]string
	var errs [2]error
	for side := range 2 {
		root := d.roots[side]
		res[side], errs[side] = f(side, func(rel string) string { return filepath.Join(root, rel) })
	}
	op, _, _ := strings.Cut(desc, "(")
	d.tally[op+" "+errnoOf(errs[0])]++
	if en, em := errnoOf(errs[0]), errnoOf(errs[1]); en != em {
		d.fail("errno", fmt.Sprintf("native %s, reynfs %s", en, em))
	} else if errs[0] == nil && res[0] != res[1] {
		d.fail("result", fmt.Sprintf("native %q\nreynfs %q", res[0], res[1]))
	}
	return res[0], errs[0]
}

func (d *differ) fail(what, detail string) {
	d.t.Helper()
	d.t.Fatalf("seed %d step %d: %s differs: %s\nlast operations:\n%s", d.seed, d.step, what, detail, strings.Join(d.history, "\n"))
}

func errnoOf(err error) string {
	var en unix.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &en):
		return unix.ErrnoName(en)
	}
	return err.Error()
}

func (d *differ) data(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(d.r.Uint32())
	}
	return b
}

// offset picks write positions that hit holes and 64 KiB chunk boundaries.
func (d *differ) offset() int64 {
	switch d.r.IntN(5) {
	case 0:
		return 0
	case 1:
		return int64(d.r.IntN(4)+1)*65536 - int64(d.r.IntN(300))
	case 2:
		return int64(d.r.IntN(400 << 10))
	default:
		return int64(d.r.IntN(9000))
	}
}

func (d *differ) length() int {
	if d.r.IntN(8) == 0 {
		return d.r.IntN(140<<10) + 1
	}
	return d.r.IntN(9000) + 1
}

// withFile runs f on a kept handle, or on the path opened with flags.
func (d *differ) withFile(desc string, flags int, f func(fd int) (string, error)) {
	d.t.Helper()
	if len(d.handles) > 0 && d.r.IntN(2) == 0 {
		h := d.handles[d.r.IntN(len(d.handles))]
		d.both(desc+" via "+h.desc, func(side int, _ func(string) string) (string, error) { return f(h.fd[side]) })
		return
	}
	p := d.pick('f')
	d.both(fmt.Sprintf("%s via open(%s, %#o)", desc, p, flags), func(_ int, abs func(string) string) (string, error) {
		fd, err := unix.Open(abs(p), flags|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", err
		}
		defer unix.Close(fd)
		return f(fd)
	})
}

func (d *differ) randomOp() {
	r := d.r
	kinds := []byte("fffdla")
	p, q := d.pick('a'), d.pick(kinds[r.IntN(len(kinds))])
	if r.IntN(10) == 0 {
		q = filepath.Join(p, diffNames[r.IntN(len(diffNames))]) // into its own subtree
	}
	modes := []uint32{0o644, 0o600, 0o755, 0o444, 0o1777, 0o4755, 0o700}
	mode := modes[r.IntN(len(modes))]
	xnames := []string{"user.a", "user.b", "user.long.name"}
	xn := xnames[r.IntN(len(xnames))]
	none := func(err error) (string, error) { return "", err }
	switch op := r.IntN(27); op {
	case 0, 1, 2: // open with O_CREAT/O_EXCL/O_TRUNC/O_APPEND
		flags := []int{unix.O_RDONLY, unix.O_WRONLY, unix.O_RDWR}[r.IntN(3)]
		for _, fl := range []int{unix.O_CREAT, unix.O_EXCL, unix.O_TRUNC, unix.O_APPEND} {
			if r.IntN(3) == 0 {
				flags |= fl
			}
		}
		keep := r.IntN(2) == 0
		p = d.pick('f')
		h := &handle{path: p, desc: fmt.Sprintf("fd(%s, %#o)", p, flags)}
		_, err := d.both(fmt.Sprintf("open(%s, %#o, %o) keep=%v", p, flags, mode, keep), func(side int, abs func(string) string) (string, error) {
			fd, err := unix.Open(abs(p), flags|unix.O_CLOEXEC, mode)
			h.fd[side] = fd
			return "", err
		})
		if err != nil {
			return
		}
		if keep {
			d.handles = append(d.handles, h)
			if len(d.handles) > 4 {
				d.closeHandle(0)
			}
		} else {
			unix.Close(h.fd[0])
			unix.Close(h.fd[1])
		}
	case 3:
		if len(d.handles) > 0 {
			d.closeHandle(r.IntN(len(d.handles)))
		}
	case 4, 5, 6: // pwrite, also past EOF and across chunk boundaries
		off, b := d.offset(), d.data(d.length())
		d.withFile(fmt.Sprintf("pwrite(off %d, len %d)", off, len(b)), unix.O_WRONLY, func(fd int) (string, error) {
			n, err := unix.Pwrite(fd, b, off)
			return strconv.Itoa(n), err
		})
	case 7: // write at the file position (appends on O_APPEND handles)
		b := d.data(d.r.IntN(5000) + 1)
		d.withFile(fmt.Sprintf("write(len %d)", len(b)), unix.O_WRONLY|unix.O_APPEND, func(fd int) (string, error) {
			n, err := unix.Write(fd, b)
			return strconv.Itoa(n), err
		})
	case 8, 9: // pread
		off, n := d.offset(), d.length()
		d.withFile(fmt.Sprintf("pread(off %d, len %d)", off, n), unix.O_RDONLY, func(fd int) (string, error) {
			b := make([]byte, n)
			m, err := unix.Pread(fd, b, off)
			if m < 0 {
				m = 0
			}
			return fmt.Sprintf("n=%d sha=%x", m, sha256.Sum256(b[:m])), err
		})
	case 10: // truncate up or down
		size := d.offset()
		if r.IntN(2) == 0 {
			d.both(fmt.Sprintf("truncate(%s, %d)", p, size), func(_ int, abs func(string) string) (string, error) {
				return none(unix.Truncate(abs(p), size))
			})
		} else {
			d.withFile(fmt.Sprintf("ftruncate(%d)", size), unix.O_WRONLY, func(fd int) (string, error) { return none(unix.Ftruncate(fd, size)) })
		}
	case 11:
		p = d.pick('d')
		d.both(fmt.Sprintf("mkdir(%s, %o)", p, mode&0o777), func(_ int, abs func(string) string) (string, error) {
			return none(unix.Mkdir(abs(p), mode&0o777))
		})
	case 12:
		p = d.pick('d')
		d.both("rmdir("+p+")", func(_ int, abs func(string) string) (string, error) { return none(unix.Rmdir(abs(p))) })
	case 13:
		d.both("unlink("+p+")", func(_ int, abs func(string) string) (string, error) { return none(unix.Unlink(abs(p))) })
	case 14, 15: // rename, renameat2 NOREPLACE / EXCHANGE
		flags := []uint{0, 0, unix.RENAME_NOREPLACE, unix.RENAME_EXCHANGE}[r.IntN(4)]
		d.both(fmt.Sprintf("renameat2(%s, %s, %#x)", p, q, flags), func(_ int, abs func(string) string) (string, error) {
			return none(unix.Renameat2(unix.AT_FDCWD, abs(p), unix.AT_FDCWD, abs(q), flags))
		})
	case 16:
		p, q = d.pick('f'), d.pick('f')
		d.both(fmt.Sprintf("link(%s, %s)", p, q), func(_ int, abs func(string) string) (string, error) { return none(unix.Link(abs(p), abs(q))) })
	case 17: // relative targets only, so both sides resolve inside their root
		p = d.pick('l')
		target := []string{"f0", "d0/f1", "d1", "l0", "missing", "d0/d2/f2"}[r.IntN(6)]
		d.both(fmt.Sprintf("symlink(%s, %s)", target, p), func(_ int, abs func(string) string) (string, error) {
			return none(unix.Symlink(target, abs(p)))
		})
	case 18:
		p = d.pick('l')
		d.both("readlink("+p+")", func(_ int, abs func(string) string) (string, error) { return os.Readlink(abs(p)) })
	case 19:
		d.both(fmt.Sprintf("chmod(%s, %o)", p, mode), func(_ int, abs func(string) string) (string, error) {
			return none(unix.Chmod(abs(p), mode))
		})
	case 20: // setxattr with 0, XATTR_CREATE, XATTR_REPLACE; l-variant on symlinks
		flags := []int{0, unix.XATTR_CREATE, unix.XATTR_REPLACE}[r.IntN(3)]
		v := d.data(r.IntN(200))
		set := unix.Setxattr
		if r.IntN(4) == 0 {
			set = unix.Lsetxattr
		}
		d.both(fmt.Sprintf("setxattr(%s, %s, len %d, %d)", p, xn, len(v), flags), func(_ int, abs func(string) string) (string, error) {
			return none(set(abs(p), xn, v, flags))
		})
	case 21:
		d.both(fmt.Sprintf("getxattr(%s, %s)", p, xn), func(_ int, abs func(string) string) (string, error) {
			b := make([]byte, 4096)
			n, err := unix.Getxattr(abs(p), xn, b)
			if err != nil {
				return "", err
			}
			return string(b[:n]), nil
		})
	case 22:
		d.both(fmt.Sprintf("removexattr(%s, %s)", p, xn), func(_ int, abs func(string) string) (string, error) {
			return none(unix.Removexattr(abs(p), xn))
		})
	case 23: // fallocate: plain, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE
		fm := []uint32{0, unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE,
			unix.FALLOC_FL_ZERO_RANGE, unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE}[r.IntN(5)]
		off, n := d.offset(), int64(d.length())
		d.withFile(fmt.Sprintf("fallocate(%#x, off %d, len %d)", fm, off, n), unix.O_RDWR, func(fd int) (string, error) {
			return none(unix.Fallocate(fd, fm, off, n))
		})
	case 24: // utimensat, then the times are compared
		ts := []unix.Timespec{unix.NsecToTimespec(r.Int64N(2e18)), unix.NsecToTimespec(r.Int64N(2e18))}
		flags := []int{0, unix.AT_SYMLINK_NOFOLLOW}[r.IntN(2)]
		d.both(fmt.Sprintf("utimensat(%s, %v, %#x)", p, ts, flags), func(_ int, abs func(string) string) (string, error) {
			if err := unix.UtimesNanoAt(unix.AT_FDCWD, abs(p), ts, flags); err != nil {
				return "", err
			}
			var st unix.Stat_t
			err := unix.Fstatat(unix.AT_FDCWD, abs(p), &st, flags)
			return fmt.Sprintf("atime %d mtime %d", st.Atim.Nano(), st.Mtim.Nano()), err
		})
	case 25:
		d.both("lstat("+p+")", func(_ int, abs func(string) string) (string, error) {
			var st unix.Stat_t
			err := unix.Lstat(abs(p), &st)
			size := st.Size
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				size = 0
			}
			return fmt.Sprintf("mode %o size %d nlink %d", st.Mode, size, st.Nlink), err
		})
	case 26:
		dir := diffDirs[r.IntN(len(diffDirs))]
		d.both("readdir("+dir+")", func(_ int, abs func(string) string) (string, error) {
			ents, err := os.ReadDir(abs(dir))
			var names []string
			for _, e := range ents {
				names = append(names, fmt.Sprintf("%s:%v", e.Name(), e.Type()))
			}
			sort.Strings(names)
			return strings.Join(names, " "), err
		})
	}
}

func (d *differ) closeHandle(i int) {
	h := d.handles[i]
	d.handles = append(d.handles[:i], d.handles[i+1:]...)
	d.both("close("+h.desc+")", func(side int, _ func(string) string) (string, error) { return none(unix.Close(h.fd[side])) })
}

func none(err error) (string, error) { return "", err }

func (d *differ) closeAll() {
	for len(d.handles) > 0 {
		d.closeHandle(0)
	}
}

// compareTrees compares the whole trees: names, types, sizes, modes, link
// counts, symlink targets, contents and xattrs.
func (d *differ) compareTrees(when string) {
	d.t.Helper()
	want, err := snapshot(d.roots[0])
	if err != nil {
		d.t.Fatal(err)
	}
	got, err := snapshot(d.roots[1])
	if err != nil {
		d.fail("tree walk ("+when+")", err.Error())
	}
	delete(want, ".")
	delete(got, ".")
	if diffs := compareTrees(want, got, cmpOpts{dirNlink: true}); len(diffs) > 0 {
		d.fail("tree ("+when+")", "\n"+truncList(diffs, 30))
	}
	if w, g := linkGroups(want), linkGroups(got); fmt.Sprint(w) != fmt.Sprint(g) {
		d.fail("hard links ("+when+")", fmt.Sprintf("native %v\nreynfs %v", w, g))
	}
}

// historyLen is how many operations a failure lists (REYNFS_HISTORY, 25).
func historyLen() int {
	if n, err := strconv.Atoi(os.Getenv("REYNFS_HISTORY")); err == nil && n > 0 {
		return n
	}
	return 25
}
