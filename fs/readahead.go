package fs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The kernel offers a FUSE mount 128 KiB of readahead in INIT, and the
// reply can only lower it, so a sequential reader gets 256 KiB READ
// requests although the connection takes 1 MiB ones (MaxWrite, max_pages
// 256). Root can raise the mount's backing-device readahead in sysfs: with
// 1 MiB a sequential read of 256 MiB costs 256 READ round trips instead
// of 1,024. The kernel's readahead grows only for sequential access, so
// random reads are not made bigger by it.

// readaheadKB is the readahead given to the mount: one READ request at
// MaxWrite.
const readaheadKB = maxWrite >> 10

// bdiDir is where the kernel lists backing devices (a FUSE mount's is
// named MAJOR:MINOR of its device).
var bdiDir = "/sys/class/bdi"

// bdiPath names the readahead file of the FUSE connection conn (a device
// number as connOfDev makes it).
func bdiPath(conn uint64) string {
	return fmt.Sprintf("%s/%d:%d/read_ahead_kb", bdiDir, conn>>20, conn&(1<<20-1))
}

// raiseReadahead sets the mount's readahead to kb unless it is larger
// already. It needs root; as another user the kernel's default stays,
// which only costs more READ requests, so a failure is logged, not fatal.
func (f *FS) raiseReadahead(kb int) {
	p := bdiPath(f.conn)
	b, err := os.ReadFile(p)
	if err == nil {
		var cur int
		if cur, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil && cur >= kb {
			return
		}
	}
	if err == nil {
		err = os.WriteFile(p, []byte(strconv.Itoa(kb)), 0)
	}
	if err != nil {
		f.log.Debug().Err(err).Str("path", p).Msg("readahead stays the kernel's")
	}
}
