package fs

import (
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Only a handle that cannot write skips FLUSH on close: a writer's close
// is where its buffered writes are journaled.
func TestOpenFlagsFor(t *testing.T) {
	for _, c := range []struct {
		flags   uint32
		noflush bool
	}{
		{syscall.O_RDONLY, true},
		{syscall.O_RDONLY | syscall.O_NOATIME | syscall.O_CLOEXEC, true},
		{syscall.O_WRONLY, false},
		{syscall.O_RDWR, false},
		{syscall.O_WRONLY | syscall.O_APPEND, false},
		{syscall.O_RDONLY | syscall.O_TRUNC, false}, // truncates: not a pure reader
	} {
		got := openFlagsFor(c.flags)
		if got&fuse.FOPEN_NOFLUSH != 0 != c.noflush {
			t.Errorf("openFlagsFor(%#o) = %#x, want NOFLUSH %v", c.flags, got, c.noflush)
		}
		if got&fuse.FOPEN_KEEP_CACHE == 0 {
			t.Errorf("openFlagsFor(%#o) = %#x, lost KEEP_CACHE", c.flags, got)
		}
	}
}
