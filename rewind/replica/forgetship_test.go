package replica

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
)

// TestShipperForget: a running continuous sync holds the workspace's
// lease, so a plain Forget is refused ("remote locked by"); the
// shipper's own Forget raises the floor under that lease (the holder and
// the unexpired lease stay), the later ships keep the raised floor and
// the dropped count while HEAD's seq moves on, gN still names the same
// generation, and fsck of the remote is clean. A bad target is one
// line; a stopped shipper refuses.
func TestShipperForget(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("forget-ship")
	s := newSource(t)
	at := map[string]uint64{}
	s.write(t, "a.bin", pattern(1, 100000))
	at["g2"] = s.cut(t, "one")
	s.write(t, "b.txt", []byte("bee\n"))
	at["g3"] = s.cut(t, "two")
	s.unlink(t, "a.bin")
	s.write(t, "c.txt", []byte("sea\n"))
	at["g4"] = s.cut(t, "three")
	s.sync(t)
	sh := startShipper(t, s, fake, ShipOptions{Interval: 50 * time.Millisecond})
	waitShipped(t, sh, s.j.Durable())

	if _, err := Forget(ctx, fake, "ws", "g4"); err == nil || !strings.Contains(err.Error(), "remote locked by") {
		t.Fatalf("a forget beside the sync: %v, want remote locked by", err)
	}
	if _, err := sh.Forget(ctx, "g9"); !errors.Is(err, ErrTarget) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("forget g9 through the shipper: %v, want one line, ErrTarget", err)
	}
	res, err := sh.Forget(ctx, "g4")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || res.Floor != at["g4"] || res.Dropped != 3 || res.Generations != 3 || res.ID != 4 {
		t.Fatalf("forget g4: %+v (g4 at seq %d)", res, at["g4"])
	}
	h, _, err := ReadHead(ctx, fake, "ws")
	if err != nil {
		t.Fatal(err)
	}
	now, _ := fake.Now(ctx)
	if h.Floor != at["g4"] || h.Dropped == nil || h.Dropped.Gens != 3 || !now.Before(h.Expires) {
		t.Fatalf("HEAD after the forget: floor %d dropped %+v expires %s (now %s): want floor %d, 3 dropped, the lease held",
			h.Floor, h.Dropped, h.Expires, now, at["g4"])
	}

	// The sync goes on (the source imported g1; the cuts are g2..g5): later ships keep the floor and the count.
	s.write(t, "d.txt", []byte("dee\n"))
	at["g5"] = s.cut(t, "four")
	s.write(t, "e.txt", []byte("tail\n"))
	s.sync(t)
	waitShipped(t, sh, s.j.Durable())
	h, _, err = ReadHead(ctx, fake, "ws")
	if err != nil {
		t.Fatal(err)
	}
	if h.Seq != s.j.Durable() || h.Floor != at["g4"] || h.Dropped == nil || h.Dropped.Gens != 3 {
		t.Fatalf("HEAD after more ships: seq %d floor %d dropped %+v; want seq %d, floor %d, 3 dropped",
			h.Seq, h.Floor, h.Dropped, s.j.Durable(), at["g4"])
	}
	gens, err := Generations(ctx, fake, "ws", h)
	if err != nil {
		t.Fatal(err)
	}
	if len(gens) != 2 || gens[0].ID != 4 || gens[0].Seq != at["g4"] || gens[1].ID != 5 || gens[1].Seq != at["g5"] {
		t.Fatalf("generations after the forget: %+v; want g4 at %d, g5 at %d", gens, at["g4"], at["g5"])
	}
	rep, err := Fsck(ctx, fake, "ws")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Damaged() {
		t.Fatalf("fsck after a forget through the sync: %v", rep.Problems)
	}
	if res, err := sh.Forget(ctx, "g4"); err != nil || res.Changed {
		t.Fatalf("forget g4 again: %+v, %v; want nothing to do", res, err)
	}

	stop, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := sh.Stop(stop); err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Forget(ctx, "g5"); !errors.Is(err, ErrShipStopped) {
		t.Fatalf("forget through a stopped shipper: %v, want ErrShipStopped", err)
	}
}

// TestShipperForgetBackingOff: while the shipper backs off (the remote
// failing) it holds no session, so its Forget fails at once, one line,
// ErrRemoteDown, and HEAD is unchanged.
func TestShipperForgetBackingOff(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("forget-down")
	s := newSource(t)
	s.write(t, "a.txt", []byte("one\n"))
	s.cut(t, "one")
	s.write(t, "b.txt", []byte("two\n"))
	s.cut(t, "two")
	s.sync(t)
	var down atomic.Bool
	fake.SetHook(func(objstorefake.Op, string) error {
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	})
	sh := startShipper(t, s, fake, ShipOptions{MinBackoff: time.Minute, MaxBackoff: time.Minute})
	waitShipped(t, sh, s.j.Durable())
	down.Store(true)
	s.write(t, "c.txt", []byte("during the outage\n"))
	s.sync(t)
	waitState(t, sh, ShipBackoff)
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := sh.Forget(fctx, "g3")
	if !errors.Is(err, ErrRemoteDown) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("forget while backing off: %v; want one line, ErrRemoteDown", err)
	}
	down.Store(false)
	h, _, err := ReadHead(ctx, fake, "ws")
	if err != nil {
		t.Fatal(err)
	}
	if h.Floor != 1 || h.Dropped != nil {
		t.Fatalf("HEAD after a refused forget: floor %d dropped %+v", h.Floor, h.Dropped)
	}
}
