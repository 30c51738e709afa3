package tree

// Whole chunk buffers: hashed before the tree's lock, in parallel.

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/reynfs/reynfs/cas"
)

// ChunkSum is what a flush needs to know of a whole chunk buffer: its
// hash (zero when the chunk is all zeros, a hole) and whether its bytes
// look incompressible (cas.Incompressible, passed on as Blob.Raw).
type ChunkSum struct {
	Hash cas.Hash
	Raw  bool
}

// WholeChunks copies each whole chunk slot that p written at off covers
// into a buffer of its own and sums it, in order; both are nil when p
// covers no whole slot. The work is shared among the CPUs when there is
// enough of it, and each chunk is hashed right after its copy, while its
// bytes are in the cache.
//
// Only the first chunk is judged for compressibility on the full sample
// (cas.Incompressible); when it looks random, the others are judged on
// the quick one (cas.IncompressibleQuick), and only when it does not do
// they get the full check too.
func WholeChunks(p []byte, off uint64) ([][]byte, []ChunkSum) {
	return wholeChunks(p, off, false)
}

// wholeChunks is WholeChunks; with borrow set, the buffers are p's own
// bytes (capacity cut at the chunk's end) instead of copies: the caller
// must see that nothing keeps them past its use of p (Prepared.Lent).
func wholeChunks(p []byte, off uint64, borrow bool) ([][]byte, []ChunkSum) {
	skip := (cas.ChunkSize - off%cas.ChunkSize) % cas.ChunkSize
	if uint64(len(p)) < skip+cas.ChunkSize {
		return nil, nil
	}
	k := int((uint64(len(p)) - skip) / cas.ChunkSize)
	bufs, sums := make([][]byte, k), make([]ChunkSum, k)
	parallel(k, k*cas.ChunkSize, func(i int) {
		at := skip + uint64(i)*cas.ChunkSize
		if borrow {
			bufs[i] = p[at : at+cas.ChunkSize : at+cas.ChunkSize]
		} else {
			// A copy, not make and copy: the buffer is not cleared first.
			bufs[i] = bytes.Clone(p[at : at+cas.ChunkSize])
		}
		if i == 0 {
			sums[i] = sumOf(bufs[i])
			return
		}
		if !allZero(bufs[i]) {
			sums[i] = ChunkSum{Hash: cas.Sum(bufs[i]), Raw: cas.IncompressibleQuick(bufs[i])}
		}
	})
	if k > 1 && !sums[0].Raw {
		var again []int
		for i := 1; i < k; i++ {
			if sums[i].Raw {
				again = append(again, i)
			}
		}
		parallel(len(again), len(again)*cas.ChunkSize, func(j int) {
			i := again[j]
			sums[i].Raw = cas.Incompressible(bufs[i])
		})
	}
	return bufs, sums
}

// sumOf sums one chunk buffer (see ChunkSum).
func sumOf(b []byte) ChunkSum {
	if allZero(b) {
		return ChunkSum{}
	}
	return ChunkSum{Hash: cas.Sum(b), Raw: cas.Incompressible(b)}
}

// parallel calls fn(0) ... fn(n-1), on up to GOMAXPROCS goroutines when
// the work covers at least two chunks' worth of bytes: a flush of a 1 MiB
// write hashes 16 chunks.
func parallel(n, bytes int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n, maxSumWorkers)
	if workers < 2 || bytes < 2*cas.ChunkSize {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
			fn(i)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// maxSumWorkers bounds the goroutines one hashing job uses.
const maxSumWorkers = 8
