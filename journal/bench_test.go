package journal

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/reynfs/reynfs/cas"
)

// benchRecord returns a data record of about 100 encoded bytes and the one
// 4 KiB blob it names, unique per n.
func benchRecord(n uint64) (*Record, []cas.Blob) {
	data := make([]byte, 4096)
	binary.LittleEndian.PutUint64(data, n)
	b := cas.Blob{Hash: cas.Sum(data), Data: data}
	return &Record{Op: OpData, Time: 1781300000123456789, Pid: 4242, Comm: "benchmark-writer",
		Ino: n%1000 + 2, Size: 1 << 20, Kind: DataWrite,
		Chunks: []Chunk{{Index: n % 16, Hash: b.Hash}}}, []cas.Blob{b}
}

func benchAppend(b *testing.B, writers int, withSync bool) {
	j := openT(b, b.TempDir(), Options{})
	var n atomic.Uint64
	var order sync.Mutex
	b.SetBytes(4096)
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N / writers
	for w := range writers {
		count := per
		if w == 0 {
			count += b.N % writers
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range count {
				r, blobs := benchRecord(n.Add(1))
				order.Lock()
				p := j.Enqueue(r, blobs)
				order.Unlock()
				if err := p.Wait(); err != nil {
					b.Error(err)
					return
				}
				if withSync {
					if err := j.Sync(); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	st := j.Stats()
	b.ReportMetric(float64(st.Records)/float64(max(st.Commits, 1)), "records/commit")
	if withSync {
		b.ReportMetric(float64(st.Records)/float64(max(st.Syncs, 1)), "records/sync")
	}
}

func BenchmarkAppend1(b *testing.B)    { benchAppend(b, 1, false) }
func BenchmarkAppend8(b *testing.B)    { benchAppend(b, 8, false) }
func BenchmarkAppendSync(b *testing.B) { benchAppend(b, 8, true) }

func BenchmarkEncode(b *testing.B) {
	r, _ := benchRecord(1)
	r.Seq = 123456
	for b.Loop() {
		Encode(r)
	}
	b.ReportMetric(float64(len(Encode(r))), "bytes/record")
}

func BenchmarkDecode(b *testing.B) {
	r, _ := benchRecord(1)
	r.Seq = 123456
	enc := Encode(r)
	for b.Loop() {
		if _, err := Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
}
