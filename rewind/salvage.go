package rewind

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// SalvageResult says what Salvage wrote and what it could not.
type SalvageResult struct {
	Seq     uint64       `json:"seq"`               // the state written out
	From    string       `json:"from"`              // "head", or the generation used when head did not reconstruct
	Files   int          `json:"files"`             // entries written whole
	Skipped []PathDamage `json:"skipped,omitempty"` // entries left out or written with holes
}

// Salvage writes the newest readable state of a (damaged) store into out,
// a directory it creates: the head state if it reconstructs, else the
// newest generation whose root can be read. Every entry that can be read
// is written; a file with unreadable chunks is written with those ranges
// as holes and listed, a directory whose inode object is unreadable is
// left out with everything under it and listed. The store is only read.
func Salvage(j *journal.Journal, out string) (*SalvageResult, error) {
	if err := os.Mkdir(out, 0o700); err != nil {
		return nil, fmt.Errorf("salvage: %w (name a directory that does not exist yet)", err)
	}
	res := &SalvageResult{}
	var store cas.Store = j.Objects()
	root, err := headRoot(j, &store)
	if err == nil {
		res.Seq, res.From = j.Head(), "head"
	} else {
		headErr := err
		var gens []*journal.Record
		_ = j.Iter(0, func(r *journal.Record) error {
			if r.Op == journal.OpGeneration {
				gens = append(gens, r)
			}
			return nil
		})
		found := false
		for i := len(gens) - 1; i >= 0 && !found; i-- {
			if _, err := store.Get(gens[i].Root); err == nil {
				root, res.Seq, found = gens[i].Root, gens[i].Seq, true
				res.From = fmt.Sprintf("generation at seq %d (head does not reconstruct: %v)", gens[i].Seq, headErr)
			}
		}
		if !found {
			return nil, fmt.Errorf("salvage: no state can be read: %w", headErr)
		}
	}
	s := &salvager{store: store, res: res, links: map[uint64]string{}, buf: make([]byte, cas.ChunkSize)}
	s.dir(out, "", root, true)
	return res, nil
}

// headRoot reconstructs head and returns its root, widening *store with the
// objects the reconstruction made.
func headRoot(j *journal.Journal, store *cas.Store) (cas.Hash, error) {
	t, err := Reconstruct(j, j.Head())
	if err != nil {
		return cas.Hash{}, err
	}
	root, blobs, err := t.Root()
	if err != nil {
		return cas.Hash{}, err
	}
	*store = NewOverlay(j.Objects(), blobs)
	return root, nil
}

type salvager struct {
	store cas.Store
	res   *SalvageResult
	links map[uint64]string // inode number -> first path written (hard links)
	buf   []byte
}

func (s *salvager) skip(rel, format string, args ...any) {
	if rel == "" {
		rel = "/"
	}
	s.res.Skipped = append(s.res.Skipped, PathDamage{Path: rel, Problem: fmt.Sprintf(format, args...)})
}

func (s *salvager) load(h cas.Hash) (*cas.Inode, error) {
	data, err := s.store.Get(h)
	if err != nil {
		return nil, err
	}
	return cas.DecodeInode(data)
}

// dir writes the directory h at path (which exists when top is set).
func (s *salvager) dir(path, rel string, h cas.Hash, top bool) {
	in, err := s.load(h)
	if err != nil {
		s.skip(rel, "directory left out: %v", err)
		return
	}
	if !top {
		if err := os.Mkdir(path, 0o700); err != nil {
			s.skip(rel, "%v", err)
			return
		}
	}
	for _, e := range in.Entries {
		s.entry(filepath.Join(path, e.Name), rel+"/"+e.Name, e)
	}
	s.attrs(path, rel, in)
	s.res.Files++
}

func (s *salvager) entry(path, rel string, e cas.Entry) {
	in, err := s.load(e.Object)
	if err != nil {
		s.skip(rel, "left out: inode object %s: %v", e.Object.Short(), err)
		return
	}
	if first, ok := s.links[in.Ino]; ok && !in.IsDir() {
		if err := os.Link(first, path); err != nil {
			s.skip(rel, "hard link: %v", err)
		}
		return
	}
	s.links[in.Ino] = path
	switch {
	case in.IsDir():
		s.dir(path, rel, e.Object, false)
		return
	case in.IsSymlink():
		if err := os.Symlink(in.Target, path); err != nil {
			s.skip(rel, "%v", err)
			return
		}
	case in.IsRegular():
		if !s.file(path, rel, in) {
			return
		}
	default:
		if err := unix.Mknod(path, in.Mode, int(in.Rdev)); err != nil {
			s.skip(rel, "special file left out: %v", err)
			return
		}
	}
	s.attrs(path, rel, in)
	s.res.Files++
}

// file writes a regular file; unreadable chunks become holes and the file
// is listed. It returns false if nothing could be written.
func (s *salvager) file(path, rel string, in *cas.Inode) bool {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		s.skip(rel, "%v", err)
		return false
	}
	defer f.Close()
	bad := 0
	var first error
	for i, c := range in.Chunks {
		if c.IsZero() {
			continue
		}
		data, err := s.store.Get(c)
		if err != nil {
			if bad == 0 {
				first = fmt.Errorf("chunk %d %s: %w", i, c.Short(), err)
			}
			bad++
			continue
		}
		if _, err := f.WriteAt(data, int64(i)*cas.ChunkSize); err != nil {
			s.skip(rel, "%v", err)
			return false
		}
	}
	if err := f.Truncate(int64(in.Size)); err != nil {
		s.skip(rel, "%v", err)
		return false
	}
	if bad > 0 {
		s.skip(rel, "written with %d unreadable 64 KiB chunks as holes (first: %v)", bad, first)
		s.res.Files-- // counted by the caller, but not whole
	}
	return true
}

// attrs sets owner (when allowed), mode and times, without following a
// symlink.
func (s *salvager) attrs(path, rel string, in *cas.Inode) {
	if err := os.Lchown(path, int(in.Uid), int(in.Gid)); err != nil && !errors.Is(err, syscall.EPERM) {
		s.skip(rel, "owner: %v", err)
	}
	if !in.IsSymlink() {
		if err := unix.Fchmodat(unix.AT_FDCWD, path, in.Mode&0o7777, 0); err != nil {
			s.skip(rel, "mode: %v", err)
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(in.Atime), unix.NsecToTimespec(in.Mtime)}
	_ = unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, unix.AT_SYMLINK_NOFOLLOW)
}
