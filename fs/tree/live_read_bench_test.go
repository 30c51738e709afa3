package tree

import (
	"container/list"
	"fmt"
	"runtime"
	"testing"

	"github.com/reynfs/reynfs/cas"
)

// BenchmarkReadVecSequential is fio's sequential read in 1 MiB requests
// with every chunk read from the store: first=true reads chunks never
// read before (an index lookup and a BLAKE3 of 64 KiB each), first=false
// chunks read before (a pread and the CRCs of their pages). workers=1 is
// the serial fill, workers=4 the parallel one.
func BenchmarkReadVecSequential(b *testing.B) {
	const size = 64 << 20
	const req = 1 << 20
	for _, w := range []int{1, 4} {
		for _, first := range []bool{true, false} {
			b.Run(fmt.Sprintf("workers=%d/first=%v", w, first), func(b *testing.B) {
				old := fillWorkers
				fillWorkers = w
				defer func() { fillWorkers = old }()
				l, st := benchFile(b, size)
				forgetRecent(l)
				scratch := make([]byte, req)
				read := func() {
					for off := 0; off < size; off += req {
						if _, n, err := l.ReadVec(st.Ino, uint64(off), req, scratch); err != nil || n != req {
							b.Fatalf("ReadVec at %d: %d bytes, %v", off, n, err)
						}
					}
				}
				if !first {
					read()
				}
				b.SetBytes(req)
				b.ResetTimer()
				for i := 0; i < b.N; i += size / req {
					if first && i > 0 {
						b.StopTimer()
						l, st = benchFile(b, size)
						forgetRecent(l)
						b.StartTimer()
					}
					read()
				}
			})
		}
	}
}

// forgetRecent waits until the chunks written are committed and drops
// the copies staging keeps of them, so that reads go to the store.
func forgetRecent(l *Live) {
	for staged(l) > 0 {
		runtime.Gosched()
	}
	l.stage.mu.Lock()
	defer l.stage.mu.Unlock()
	l.stage.recentMax = 0
	l.stage.recent = map[cas.Hash]*list.Element{}
	l.stage.order.Init()
	l.stage.recentBytes = 0
}
