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
// 256). Root can raise the mount's backing-device readahead in sysfs. At
// 1 MiB a sequential read of 256 MiB costs 256 READ round trips instead
// of 1,024, but only one or two are in flight (the kernel asks for the
// next window when the reader reaches the current one), and each waits
// for its 16 chunks' disk reads and checks. At 4 MiB the window holds up
// to four 1 MiB READs, which go-fuse serves concurrently, so one's disk
// wait or hash check overlaps the others'. fio's sequential read of 512
// MiB, medians of 9 interleaved runs, twice, on a heavily loaded machine
// (so only the direction is trustworthy): cold 447 -> 536 and 256 -> 300
// MiB/s, warm 482 -> 591 and 268 -> 295 (the loopback, at its default
// 128 KiB: cold 559 and 258, warm 610 and 307). The kernel's
// readahead grows only for sequential access, so random reads are not
// made bigger by it, and a short read of a big file ramps up from the
// kernel's small first window as before.

// readaheadKB is the readahead given to the mount: four READ requests of
// the largest size (maxRead). READs of chunks verified before are spliced
// (splice.go), which needs READs of half a pipe, 512 KiB: the window is
// then 2 MiB, four READs in flight as before. fio's warm sequential read
// of 512 MiB, medians of 6 interleaved runs on a loaded machine (load
// 8-11; MiB/s, and fio's CPU in ticks): 512 KiB READs with 4 MiB of
// readahead 895 (29), 2 MiB 865 (26), 1 MiB 940 (24), 512 KiB 836 (24),
// the loopback 962 (24); cold runs could not tell them apart (250-365
// MiB/s, old and new alike).
var readaheadKB = 4 * maxRead >> 10

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
