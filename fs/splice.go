package fs

import (
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/hanwen/go-fuse/v2/splice"

	"github.com/reynfs/reynfs/fs/tree"
)

// A READ of chunks the store has verified is answered from a pipe: the
// store splices the chunks' bytes from its segment files into the pipe
// (cas.Splicer), other bytes (holes, write buffers, cached objects) are
// written into it, and go-fuse splices the pipe to /dev/fuse after the
// reply header (fuse.ReadResultPipe). The kernel then copies each byte
// once, from the segment's page cache to the FUSE file's, as for the
// go-fuse loopback's reads (fuse.ReadResultFd), where a pread and a
// writev copied them twice. A READ with nothing to splice is the
// writev of ReadVec's slices as before.
//
// go-fuse splices a reply only when it and a page more fit in the
// largest pipe an unprivileged process may make (/proc/sys/fs/pipe-max-
// size, 1 MiB by default), so READs are made at most half of that
// (maxRead, the mount's max_read): a 1 MiB READ would be copied. A pipe
// also holds a bounded number of buffers, one per page a splice or a
// write touches: spliceSlots counts them pessimistically, and a READ that
// might not fit is copied as before rather than block.

// maxRead is the largest READ the kernel sends: MaxWrite, or half the
// largest pipe when that is smaller (see above), in whole pages.
var maxRead = min(maxWrite, splice.MaxPipeSize()/2) &^ (pageSize - 1)

const pageSize = 4096

// replyHeader is the size of a READ reply's header (fuse_out_header).
const replyHeader = 16

// spliceMin is the smallest READ answered through a pipe. A pipe reply
// costs about seven system calls more than a writev (two pipes taken and
// drained, the header written to one and the one spliced into the
// other), which a small read does not win back by the copy it saves: a
// random 4 KiB read is a pread, a CRC of one page and a writev.
const spliceMin = 32 << 10

// canSplice reports whether a READ reply of size bytes is to go through
// a pipe: big enough (spliceMin), and not too big: go-fuse grows its pipe
// to the reply and a page more, and copies the reply past the largest
// pipe.
func canSplice(size int) bool {
	return splice.Resizable() && size >= spliceMin && size+replyHeader+pageSize <= splice.MaxPipeSize()
}

// pipeSlots is how many buffers a pipe grown to n bytes holds: the kernel
// rounds its pages up to a power of two (round_pipe_size).
func pipeSlots(n int) int {
	pages := (n + pageSize - 1) / pageSize
	slots := 1
	for slots < pages {
		slots <<= 1
	}
	return slots
}

// spliceSlots bounds the pipe buffers a reply of vecs and moves takes: a
// write or splice of n bytes touches at most n/pageSize+2 pages.
func spliceSlots(vecs [][]byte, moves []tree.Move) int {
	slots := 0
	for _, v := range vecs {
		if len(v) > 0 {
			slots += len(v)/pageSize + 2
		}
	}
	for _, m := range moves {
		slots += m.N/pageSize + 2
	}
	return slots
}

// spliceReply builds a READ reply of n bytes from vecs and moves (in slot
// order) in a pipe. It returns nil, and leaves nothing behind, when that
// cannot be done; the caller then reads the range again with ReadVec.
func (f *FS) spliceReply(vecs [][]byte, moves []tree.Move, n int) fuse.ReadResult {
	// go-fuse's pipe holds the header and then the reply: both the size
	// and the buffers must fit in the pipe it grows to.
	grow := n + replyHeader + pageSize
	if spliceSlots(vecs, moves)+1 > pipeSlots(grow) {
		return nil
	}
	pair, err := splice.Get()
	if err != nil {
		return nil
	}
	ok := false
	defer func() {
		if !ok {
			splice.Done(pair) // drains what the pipe holds
		}
	}()
	if pair.Grow(grow) != nil {
		return nil
	}
	wfd := int(pair.WriteFd())
	for slot, v := range vecs {
		if len(moves) > 0 && moves[0].Slot == slot {
			if err := f.live.Splice(moves[0], wfd); err != nil {
				f.log.Debug().Err(err).Msg("read: splice failed, copying")
				return nil
			}
			moves = moves[1:]
			continue
		}
		for len(v) > 0 {
			k, err := pair.Write(v)
			if err != nil || k <= 0 {
				f.log.Debug().Err(err).Msg("read: pipe write failed, copying")
				return nil
			}
			v = v[k:]
		}
	}
	ok = true
	return fuse.ReadResultPipe(pair, n)
}

// readSpliced answers a READ from the live tree through a pipe where it
// can (see above); replied reports whether it did.
func (f *FS) readSpliced(in *fuse.ReadIn, size int, buf []byte) (rr fuse.ReadResult, replied bool, err error) {
	vecs, moves, n, err := f.live.ReadSplit(in.NodeId, in.Offset, size, buf)
	if err != nil {
		return nil, true, err
	}
	if len(moves) > 0 {
		if rr := f.spliceReply(vecs, moves, n); rr != nil {
			return rr, true, nil
		}
		return nil, false, nil // the moves were not read: read it all
	}
	return vectorResult(vecs), true, nil
}

// vectorResult replies with vecs' non-empty slices by writev(2), also
// when there is one: go-fuse sends a fuse.ReadResultData by first trying
// to splice it (a pipe taken, grown and drained, the header written to
// it: four system calls for nothing), and a ReadResultVector directly.
func vectorResult(vecs [][]byte) fuse.ReadResult {
	out := vecs[:0]
	for _, v := range vecs {
		if len(v) > 0 {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return fuse.ReadResultData(nil)
	}
	return fuse.ReadResultVector(out)
}
