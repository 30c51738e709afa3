package fs

import (
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

var errnoTable = []struct {
	err   error
	errno syscall.Errno
}{
	{tree.ErrNotExist, syscall.ENOENT},
	{tree.ErrExist, syscall.EEXIST},
	{tree.ErrNotEmpty, syscall.ENOTEMPTY},
	{tree.ErrNotDir, syscall.ENOTDIR},
	{tree.ErrIsDir, syscall.EISDIR},
	{tree.ErrInvalid, syscall.EINVAL},
	{tree.ErrNoAttr, syscall.ENODATA},
	{tree.ErrNameTooLong, syscall.ENAMETOOLONG},
	{tree.ErrStale, syscall.ESTALE},
	{tree.ErrFileTooBig, syscall.EFBIG},
	{tree.ErrNoSpace, syscall.ENOSPC},
	{tree.ErrNotSupported, syscall.EOPNOTSUPP},
	{ErrReadOnly, syscall.EROFS},
	{journal.ErrTooLarge, syscall.EFBIG},
	{journal.ErrInvalid, syscall.EINVAL},
	{tree.ErrFailed, syscall.EIO},
	{journal.ErrFailed, syscall.EIO},
	{cas.ErrCorrupt, syscall.EIO},
	{cas.ErrNotFound, syscall.EIO},
}

// ErrReadOnly: a write to a read-only view.
var ErrReadOnly = errors.New("read-only file system")

// toStatus maps an error of the core to the FUSE status the kernel gets.
// Unknown errors become EIO with a log line; go-fuse itself would turn
// them into ENOSYS, which the kernel may cache as "not implemented".
func toStatus(log *zerolog.Logger, op string, err error) fuse.Status {
	if err == nil {
		return fuse.OK
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return fuse.Status(errno)
	}
	for _, e := range errnoTable {
		if errors.Is(err, e.err) {
			if e.errno == syscall.EIO {
				log.Error().Err(err).Str("op", op).Msg("i/o error")
			}
			return fuse.Status(e.errno)
		}
	}
	log.Error().Err(err).Str("op", op).Msg("unexpected error, answering EIO")
	return fuse.EIO
}
