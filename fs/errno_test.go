package fs

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

func TestToStatus(t *testing.T) {
	log := zerolog.Nop()
	for _, tc := range []struct {
		err  error
		want fuse.Status
	}{
		{nil, fuse.OK},
		{tree.ErrNotExist, fuse.ENOENT},
		{fmt.Errorf("lookup: %w", tree.ErrNotExist), fuse.ENOENT},
		{tree.ErrNotEmpty, fuse.Status(syscall.ENOTEMPTY)},
		{tree.ErrNoAttr, fuse.ENODATA},
		{tree.ErrStale, fuse.Status(syscall.ESTALE)},
		{ErrReadOnly, fuse.EROFS},
		{fmt.Errorf("read: %w", cas.ErrCorrupt), fuse.EIO},
		{syscall.EXDEV, fuse.EXDEV},
		{fmt.Errorf("wrapped: %w", syscall.EACCES), fuse.EACCES},
		{fmt.Errorf("append: %w", journal.ErrNoSpace), fuse.Status(syscall.ENOSPC)},
		{fmt.Errorf("append: %w: big", journal.ErrTooLarge), fuse.Status(syscall.EFBIG)},
		{fmt.Errorf("append: %w: bad", journal.ErrInvalid), fuse.EINVAL},
		{errors.New("something else"), fuse.EIO},
	} {
		if got := toStatus(&log, "test", tc.err); got != tc.want {
			t.Errorf("toStatus(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
