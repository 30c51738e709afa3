// Package castest is the conformance suite every cas.Store backend runs, so
// that a second backend (object storage, say) is checked by the same body as
// the first (restic's internal/backend/test does the same).
package castest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/reynfs/reynfs/cas"
)

// Run runs the suite. open returns a fresh, empty store for one subtest;
// it registers its own cleanup with t.
func Run(t *testing.T, open func(t *testing.T) cas.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s cas.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Dedup", testDedup},
		{"NotFound", testNotFound},
		{"Has", testHas},
		{"Empty", testEmpty},
		{"Large", testLarge},
		{"PutKeepsNoReference", testPutCopies},
		{"Concurrent", testConcurrent},
		{"PutBatch", testPutBatch},
		{"PutBatchBase", testPutBatchBase},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// Data returns n deterministic pseudo-random bytes for seed.
func Data(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func mustPut(t *testing.T, s cas.Store, data []byte) cas.Hash {
	t.Helper()
	h, err := s.Put(data)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if h != cas.Sum(data) {
		t.Fatalf("Put returned %s, want Sum %s", h.Short(), cas.Sum(data).Short())
	}
	return h
}

func mustGet(t *testing.T, s cas.Store, h cas.Hash, want []byte) {
	t.Helper()
	got, err := s.Get(h)
	if err != nil {
		t.Fatalf("Get %s: %v", h.Short(), err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get %s: %d bytes differ from the %d put", h.Short(), len(got), len(want))
	}
}

func testRoundTrip(t *testing.T, s cas.Store) {
	var hs []cas.Hash
	var objs [][]byte
	for i, n := range []int{1, 100, 4 << 10, cas.ChunkSize - 1, cas.ChunkSize} {
		d := Data(uint64(i), n)
		hs = append(hs, mustPut(t, s, d))
		objs = append(objs, d)
	}
	for i, h := range hs {
		mustGet(t, s, h, objs[i])
		mustGet(t, s, h, objs[i]) // a second, possibly cached, read
	}
}

func testDedup(t *testing.T, s cas.Store) {
	d := Data(1, 1000)
	h1 := mustPut(t, s, d)
	h2 := mustPut(t, s, append([]byte(nil), d...))
	if h1 != h2 {
		t.Fatalf("equal bytes got two names: %s, %s", h1.Short(), h2.Short())
	}
	mustGet(t, s, h1, d)
	other := mustPut(t, s, Data(2, 1000))
	if other == h1 {
		t.Fatal("different bytes got one name")
	}
}

func testNotFound(t *testing.T, s cas.Store) {
	h := cas.Sum([]byte("never stored"))
	got, err := s.Get(h)
	if !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("Get of a missing object: err %v, want ErrNotFound", err)
	}
	if got != nil {
		t.Fatal("Get of a missing object returned bytes")
	}
	if errors.Is(err, cas.ErrCorrupt) {
		t.Fatal("missing object reported as corrupt")
	}
}

func testHas(t *testing.T, s cas.Store) {
	d := Data(3, 10)
	h := cas.Sum(d)
	if ok, err := s.Has(h); err != nil || ok {
		t.Fatalf("Has before Put = %v, %v", ok, err)
	}
	mustPut(t, s, d)
	if ok, err := s.Has(h); err != nil || !ok {
		t.Fatalf("Has after Put = %v, %v", ok, err)
	}
	mustGet(t, s, h, d)
	if ok, err := s.Has(h); err != nil || !ok {
		t.Fatalf("Has after Get = %v, %v", ok, err)
	}
}

func testEmpty(t *testing.T, s cas.Store) {
	h := mustPut(t, s, nil)
	if h != cas.Sum([]byte{}) {
		t.Fatal("nil and empty slices hash differently")
	}
	got, err := s.Get(h)
	if err != nil || len(got) != 0 {
		t.Fatalf("Get of the empty object = %d bytes, %v", len(got), err)
	}
	if ok, err := s.Has(h); err != nil || !ok {
		t.Fatalf("Has of the empty object = %v, %v", ok, err)
	}
}

func testLarge(t *testing.T, s cas.Store) {
	var hs []cas.Hash
	var objs [][]byte
	for i := range 3 {
		d := Data(uint64(100+i), 1<<20)
		hs = append(hs, mustPut(t, s, d))
		objs = append(objs, d)
	}
	for i, h := range hs {
		mustGet(t, s, h, objs[i])
	}
}

// testPutCopies checks that a store does not keep the caller's buffer: the
// file system reuses its write buffers.
func testPutCopies(t *testing.T, s cas.Store) {
	d := Data(4, 500)
	want := append([]byte(nil), d...)
	h := mustPut(t, s, d)
	for i := range d {
		d[i] = 0
	}
	mustGet(t, s, h, want)
}

func testConcurrent(t *testing.T, s cas.Store) {
	const workers, objects = 8, 64
	objs := make([][]byte, objects)
	for i := range objs {
		objs[i] = Data(uint64(1000+i), 1+i*97)
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for k := range 4 * objects {
				i := (w*13 + k) % objects // workers overlap: same objects, racing
				d := objs[i]
				h, err := s.Put(d)
				if err != nil {
					errs <- fmt.Errorf("worker %d: Put: %w", w, err)
					return
				}
				got, err := s.Get(h)
				if err != nil {
					errs <- fmt.Errorf("worker %d: Get: %w", w, err)
					return
				}
				if !bytes.Equal(got, d) {
					errs <- fmt.Errorf("worker %d: Get %s returned other bytes", w, h.Short())
					return
				}
				if ok, err := s.Has(cas.Sum(objs[(i+1)%objects])); err != nil {
					errs <- fmt.Errorf("worker %d: Has: %w (%v)", w, err, ok)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, d := range objs {
		mustGet(t, s, cas.Sum(d), d)
	}
}

// testPutBatch checks a BatchPutter (skipped for a store without one): the
// blobs are stored once, a duplicate in the batch is harmless, and a batch
// with a misnamed blob stores nothing.
func testPutBatch(t *testing.T, s cas.Store) {
	bp, ok := s.(cas.BatchPutter)
	if !ok {
		t.Skipf("%T has no PutBatch", s)
	}
	a, b := Data(41, 100), Data(42, cas.ChunkSize)
	ha, hb := cas.Sum(a), cas.Sum(b)
	if err := bp.PutBatch([]cas.Blob{{Hash: ha, Data: a}, {Hash: hb, Data: b}, {Hash: ha, Data: a}}); err != nil {
		t.Fatalf("PutBatch: %v", err)
	}
	a[0]++ // the store must have kept its own copy
	mustGet(t, s, ha, Data(41, 100))
	mustGet(t, s, hb, b)
	c := Data(43, 10)
	err := bp.PutBatch([]cas.Blob{{Hash: cas.Sum(c), Data: c}, {Hash: ha, Data: c}})
	if !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("PutBatch with a misnamed blob: got %v, want ErrCorrupt", err)
	}
	if ok, err := s.Has(cas.Sum(c)); err != nil || ok {
		t.Fatalf("after a refused batch, Has = %v, %v; want false", ok, err)
	}
}

// testPutBatchBase checks that a blob's Base never changes what Get
// returns, whether the store keeps the blob as a delta against it or not:
// a line of versions each naming the one before (a kept copy, so reusing
// the batch's bytes afterwards is harmless), a Base that is not stored,
// and one that shares nothing with the blob.
func testPutBatchBase(t *testing.T, s cas.Store) {
	bp, ok := s.(cas.BatchPutter)
	if !ok {
		t.Skipf("%T has no PutBatch", s)
	}
	v := Data(51, 5000)
	var base cas.Hash
	var hs []cas.Hash
	var vs [][]byte
	for i := range 5 {
		v = append([]byte(nil), v...)
		copy(v[i*300:], Data(uint64(60+i), 32))
		h := cas.Sum(v)
		buf := append([]byte(nil), v...)
		if err := bp.PutBatch([]cas.Blob{{Hash: h, Data: buf, Base: base}}); err != nil {
			t.Fatalf("PutBatch version %d: %v", i, err)
		}
		buf[0]++ // the store must have kept its own copy
		hs, vs, base = append(hs, h), append(vs, v), h
	}
	for i, h := range hs {
		mustGet(t, s, h, vs[i])
	}
	other, unrelated := Data(70, 3000), Data(71, 3000)
	err := bp.PutBatch([]cas.Blob{
		{Hash: cas.Sum(other), Data: other, Base: cas.Sum([]byte("never stored"))},
		{Hash: cas.Sum(unrelated), Data: unrelated, Base: hs[0]},
	})
	if err != nil {
		t.Fatalf("PutBatch: %v", err)
	}
	mustGet(t, s, cas.Sum(other), other)
	mustGet(t, s, cas.Sum(unrelated), unrelated)
}
