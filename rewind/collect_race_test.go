package rewind

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
)

// TestCollectRacingWriters: collections with the tightest windows run
// back to back while a writer keeps deleting files and writing their
// contents again (so its commits deduplicate against objects the running
// collection condemned) and cutting generations. Afterwards every file
// reads what was last written to it, and every retained generation and
// the head reconstruct with all their objects.
func TestCollectRacingWriters(t *testing.T) {
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	defer func() { _ = w.j.Close() }()
	if err := SavePolicy(w.j, Policy{Seqs: Window{Count: 1}, Generations: Window{Count: 1}, Every: time.Minute}); err != nil {
		t.Fatal(err)
	}
	pool := make([][]byte, 4)
	for i := range pool {
		pool[i] = uniqueData(byte(10+i), 3*cas.ChunkSize/2)
	}
	want := map[string]int{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var collections atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if _, err := w.rw.Collect(CollectOptions{}); err != nil {
				t.Error(err)
				return
			}
			collections.Add(1)
		}
	}()
	deadline := time.Now().Add(1500 * time.Millisecond)
	for i := 0; time.Now().Before(deadline) || collections.Load() < 3; i++ {
		name := fmt.Sprintf("f%d", i%3)
		if _, ok := want[name]; ok {
			if err := w.live.Unlink(modelCaller, tree.RootIno, name); err != nil {
				t.Fatal(err)
			}
			delete(want, name)
			if i%2 == 0 {
				cutGen(t, w, KindManual, "")
			}
		}
		putFile(t, w, name, pool[i%len(pool)])
		want[name] = i % len(pool)
		if i%3 == 0 {
			cutGen(t, w, KindTurn, "")
		}
	}
	stop.Store(true)
	wg.Wait()
	if t.Failed() {
		return
	}
	if _, err := w.rw.Collect(CollectOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, c := range want {
		st, err := w.live.Lookup(tree.RootIno, name)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(pool[c])+1)
		if n, err := w.live.ReadAt(st.Ino, got, 0); err != nil || !bytes.Equal(got[:n], pool[c]) {
			t.Fatalf("%s after %d collections: %d bytes, %v", name, collections.Load(), n, err)
		}
	}
	gens, err := Timeline(w.j)
	if err != nil {
		t.Fatal(err)
	}
	var roots []cas.Hash
	for _, g := range gens {
		roots = append(roots, g.Rec.Root)
	}
	if _, err := cas.Verify(w.j.Objects(), roots); err != nil {
		t.Fatalf("retained generations after %d collections: %v", collections.Load(), err)
	}
	if _, err := Reconstruct(w.j, w.j.Head()); err != nil {
		t.Fatal(err)
	}
}
