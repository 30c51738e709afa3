package rewind

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
)

// panicStore panics in PutBatch once calls batches have been stored.
type panicStore struct {
	*cas.Memory
	calls atomic.Int32
	after int32
}

func (s *panicStore) PutBatch(blobs []cas.Blob) error {
	if s.calls.Add(1) > s.after {
		panic("store bug")
	}
	return s.Memory.PutBatch(blobs)
}

// TestImportStorePanic: a panic in a batch's store, which runs on a
// goroutine of its own while the reader reads on, comes back as a panic on
// the caller's goroutine once the pipeline has stopped, and leaves no
// goroutine or descriptor behind (on its own goroutine it would end the
// process).
func TestImportStorePanic(t *testing.T) {
	src := bigTree(t, 60)
	done := leakCheck(t)
	next := uint64(2)
	im := &Importer{Store: &panicStore{Memory: cas.NewMemory(), after: 1}, Workers: 2,
		Alloc: func() (uint64, error) { next++; return next - 1, nil }}
	func() {
		defer func() {
			g, ok := recover().(*goPanic)
			if !ok || g.value != "store bug" {
				t.Errorf("recovered %v, want the store's panic", g)
			}
		}()
		_, err := im.Import(src)
		t.Errorf("import returned %v, want a panic", err)
	}()
	done()
}

// slowStore stores each batch after a pause and counts what it stored.
type slowStore struct {
	*cas.Memory
	stored atomic.Int64
}

func (s *slowStore) PutBatch(blobs []cas.Blob) error {
	time.Sleep(20 * time.Millisecond)
	if err := s.Memory.PutBatch(blobs); err != nil {
		return err
	}
	s.stored.Add(int64(len(blobs)))
	return nil
}

// TestImportWaitsForStores: Import returns only once every batch the
// readers handed to their store goroutines is stored: every chunk the
// tree names can be read when it returns.
func TestImportWaitsForStores(t *testing.T) {
	src := bigTree(t, 60)
	s := &slowStore{Memory: cas.NewMemory()}
	tr, _ := importTree(t, s, src, 3, nil, nil, 0)
	n := 0
	for ino := uint64(1); ino <= tr.MaxIno(); ino++ {
		nd := tr.Node(ino)
		if nd == nil || !nd.IsReg() {
			continue
		}
		for _, h := range nd.ChunkHashes() {
			n++
			if _, err := s.Memory.Get(h); err != nil {
				t.Fatalf("chunk %s of inode %d not stored when Import returned: %v", h.Short(), ino, err)
			}
		}
	}
	if n == 0 || s.stored.Load() == 0 {
		t.Fatalf("%d chunks named, %d stored: the test imported nothing", n, s.stored.Load())
	}
}
