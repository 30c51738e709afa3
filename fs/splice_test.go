package fs

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/splice"

	"github.com/reynfs/reynfs/fs/tree"
)

// A READ of max_read bytes splices (it and go-fuse's page to spare fit
// the largest pipe), a small one or one past the pipe does not, and the
// pessimistic buffer count of a whole max_read of unaligned 64 KiB chunks
// fits the pipe go-fuse grows for it, with the header's buffer.
func TestSpliceBounds(t *testing.T) {
	if !splice.Resizable() {
		t.Skip("pipes cannot be resized here")
	}
	if !canSplice(maxRead) {
		t.Fatalf("a READ of max_read %d cannot splice (largest pipe %d)", maxRead, splice.MaxPipeSize())
	}
	if canSplice(spliceMin-1) || canSplice(splice.MaxPipeSize()) {
		t.Fatal("a READ below spliceMin or of the whole largest pipe splices")
	}
	if got := pipeSlots(maxRead + replyHeader + pageSize); got < (maxRead+replyHeader+pageSize)/pageSize || got&(got-1) != 0 {
		t.Fatalf("pipeSlots = %d, not a power of two holding the reply", got)
	}
	var moves []tree.Move
	var vecs [][]byte
	for slot := 0; slot < maxRead/(64<<10); slot++ {
		moves = append(moves, tree.Move{Slot: 2 * slot, N: 64 << 10})
		vecs = append(vecs, nil, nil)
	}
	need := spliceSlots(vecs, moves) + 1
	if need > pipeSlots(maxRead+replyHeader+pageSize) {
		t.Fatalf("a READ of %d chunks needs up to %d pipe buffers, more than the pipe's %d: it would never splice",
			len(moves), need, pipeSlots(maxRead+replyHeader+pageSize))
	}
	vecs[1] = make([]byte, 3*pageSize+1)
	if got := spliceSlots(vecs, moves); got != need-1+5 {
		t.Fatalf("spliceSlots with a 3-page-and-a-byte slice = %d, want %d", got, need-1+5)
	}
}
