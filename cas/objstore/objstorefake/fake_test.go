package objstorefake_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"testing"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/cas/objstore/objstoretest"
)

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Backend { return objstorefake.New(t.Name()) })
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	b := objstorefake.New("faults")

	// FailNth: the 2nd Put from now fails before it writes.
	b.FailNth(objstorefake.OpPut, 2, nil)
	if err := b.Put(ctx, "k/1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "k/2", []byte("two")); !errors.Is(err, objstorefake.ErrInjected) {
		t.Fatalf("2nd Put: %v, want ErrInjected", err)
	}
	if _, err := b.Stat(ctx, "k/2"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("a failed Put wrote: Stat = %v", err)
	}
	if err := b.Put(ctx, "k/3", []byte("three")); err != nil {
		t.Fatalf("the fault fired twice: %v", err)
	}

	// DropAfterWrite: applied, then an error.
	b.DropAfterWrite(objstorefake.OpPutIfAbsent, 1)
	if _, err := b.PutIfAbsent(ctx, "ws/HEAD", []byte("h")); !errors.Is(err, objstorefake.ErrDropped) {
		t.Fatalf("PutIfAbsent: %v, want ErrDropped", err)
	}
	if got, _, err := b.Get(ctx, "ws/HEAD"); err != nil || string(got) != "h" {
		t.Fatalf("the dropped write was not applied: %q, %v", got, err)
	}

	// Counters: requests by kind, failed ones included; bytes; ranges.
	if _, err := b.GetRange(ctx, "k/3", 1, 2); err != nil {
		t.Fatal(err)
	}
	s := b.Stats()
	if s.Requests[objstorefake.OpPut] != 3 || s.Requests[objstorefake.OpPutIfAbsent] != 1 ||
		s.Requests[objstorefake.OpGet] != 1 || s.Requests[objstorefake.OpGetRange] != 1 || s.Requests[objstorefake.OpStat] != 1 {
		t.Fatalf("requests = %v", s.Requests)
	}
	if s.BytesIn != int64(len("one")+len("three")+len("h")) || s.BytesOut != int64(len("h")+2) {
		t.Fatalf("bytes in %d, out %d", s.BytesIn, s.BytesOut)
	}
	b.Reset()
	if n := b.Count(objstorefake.OpPut); n != 0 {
		t.Fatalf("after Reset: %d puts", n)
	}

	// Latency.
	b.SetLatency(50 * time.Millisecond)
	t0 := time.Now()
	if _, err := b.Stat(ctx, "k/1"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < 50*time.Millisecond {
		t.Fatalf("Stat took %v with 50ms latency", d)
	}
	b.SetLatency(0)

	// Pause: requests wait until Resume, or fail with their context.
	b.Pause()
	done := make(chan error, 1)
	go func() { done <- b.Put(ctx, "k/paused", []byte("p")) }()
	select {
	case err := <-done:
		t.Fatalf("Put returned while paused: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.Delete(cctx, "k/1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Delete while paused with a deadline: %v", err)
	}
	b.Resume()
	if err := <-done; err != nil {
		t.Fatalf("Put after Resume: %v", err)
	}

	// A hook picks requests by key.
	b.SetHook(func(op objstorefake.Op, key string) error {
		if op == objstorefake.OpPut && strings.HasSuffix(key, ".seg") {
			return objstorefake.ErrInjected
		}
		return nil
	})
	if err := b.Put(ctx, "ws/w/seg/1-1-2.seg", []byte("s")); !errors.Is(err, objstorefake.ErrInjected) {
		t.Fatalf("hooked Put: %v", err)
	}
	if err := b.Put(ctx, "packs/p.pack", []byte("p")); err != nil {
		t.Fatalf("Put the hook lets through: %v", err)
	}
	if keys := b.Keys(); slices.Contains(keys, "ws/w/seg/1-1-2.seg") {
		t.Fatalf("the hooked Put wrote: %q", keys)
	}
	b.SetHook(nil)

	// The clock is the test's.
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	b.SetClock(func() time.Time { return at })
	if now, err := b.Now(ctx); err != nil || !now.Equal(at) {
		t.Fatalf("Now = %v, %v", now, err)
	}
}
