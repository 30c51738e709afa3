package journal

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// shadow is a private view of a store's Badger directory that Badger can
// open read-only. Badger refuses a read-only open of a store whose
// memtable WAL needs truncating, which every store a crash left unclosed
// has (its preallocated *.mem files are longer than their entries). The
// shadow is a temporary directory of symlinks to the store's files, except
// that each *.mem is a copy of the entries Badger's replay accepts. The
// store itself is never written: its directory is only flocked shared (as
// Badger's own read-only open does), which keeps a writable open out
// while the shadow is in use.
type shadow struct {
	dir  string   // the temporary directory Badger opens
	lock *os.File // the store directory, flocked LOCK_SH
}

func newShadow(store string) (*shadow, error) {
	lock, err := os.Open(store)
	if err != nil {
		return nil, fmt.Errorf("read-only open: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w (a daemon or a writable open holds %s)", ErrLocked, store)
	}
	s := &shadow{lock: lock}
	if err := s.build(store); err != nil {
		s.close()
		return nil, fmt.Errorf("read-only open: %w", err)
	}
	return s, nil
}

func (s *shadow) build(store string) error {
	abs, err := filepath.Abs(store)
	if err != nil {
		return err
	}
	if s.dir, err = os.MkdirTemp("", "reynfs-ro-"); err != nil {
		return err
	}
	ents, err := os.ReadDir(abs)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		src, dst := filepath.Join(abs, name), filepath.Join(s.dir, name)
		if !e.Type().IsRegular() || name == "LOCK" {
			continue
		}
		if strings.HasSuffix(name, ".mem") {
			if err := copyReplayable(src, dst); err != nil {
				return err
			}
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Size() == 0 && strings.HasSuffix(name, ".vlog") {
			continue // created by a crash before Badger sized it: nothing in it
		}
		if err := os.Symlink(src, dst); err != nil {
			return err
		}
	}
	return nil
}

// copyReplayable copies the part of a memtable WAL that Badger's replay
// accepts (see scanLog): a read-only open then finds nothing to truncate.
func copyReplayable(src, dst string) error {
	sc, err := scanLog(src)
	if err != nil {
		return err
	}
	if sc.Size == 0 {
		return nil // Badger would recreate it empty
	}
	if sc.End == sc.Size {
		return os.Symlink(src, dst) // nothing to truncate: no copy
	}
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, io.NewSectionReader(in, 0, sc.End))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *shadow) close() {
	if s.dir != "" {
		_ = os.RemoveAll(s.dir) // symlinks and copies: nothing of the store
	}
	if s.lock != nil {
		s.lock.Close()
	}
}
