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

// BenchmarkManifestWrite: the cost of recording new marks, which a
// checkpoint waits for: in place into a slot with one fdatasync, against
// the replacement by a temp file, fsync, rename and fsync of the
// directory that every write used to be (and that the first write of a
// store still is).
func BenchmarkManifestWrite(b *testing.B) {
	m := Manifest{Format: 1, ID: "0123456789abcdef0123456789abcdef"}
	b.Run("slot", func(b *testing.B) {
		path := b.TempDir() + "/db.manifest"
		w := &manifestFile{path: path}
		defer w.close()
		for b.Loop() {
			m.Durable++
			if err := w.write(&m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rename", func(b *testing.B) {
		path := b.TempDir() + "/db.manifest"
		for b.Loop() {
			m.Durable++
			if err := writeManifest(path, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGenerationSync: what a checkpoint waits for once its record is
// enqueued: the commit, Badger's Sync and the manifest's new generation
// mark (without the flush and the Merkle root of rewind.Cut).
func BenchmarkGenerationSync(b *testing.B) {
	j := openT(b, b.TempDir(), Options{})
	n := uint64(0)
	for b.Loop() {
		n++
		r, blobs := benchRecord(n)
		j.Enqueue(r, blobs)
		g := &Record{Op: OpGeneration, GenKind: "manual", Root: blobs[0].Hash}
		j.Enqueue(g, nil)
		if err := j.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}
