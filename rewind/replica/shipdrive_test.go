package replica

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
)

// shipDriver runs a Shipper's session by hand: each round is one ship
// (Shipper.ship, as the loop calls it every second), with no sleeping.
type shipDriver struct {
	sh *Shipper
	p  *pusher
}

func newShipDriver(t *testing.T, s *source, b objstore.Backend, ws string) *shipDriver {
	t.Helper()
	ctx, stop := context.WithCancelCause(context.Background())
	sh := &Shipper{j: s.j, b: &counting{Backend: b}, ws: ws, o: ShipOptions{}.withDefaults(), ctx: ctx, stop: stop,
		kick: make(chan struct{}, 1), done: make(chan struct{}), changed: make(chan struct{}), state: ShipStarting, since: time.Now()}
	d := &shipDriver{sh: sh}
	d.open(t)
	t.Cleanup(func() { d.close(); stop(nil) })
	return d
}

func (d *shipDriver) open(t *testing.T) {
	t.Helper()
	p, err := d.sh.open()
	if err != nil {
		t.Fatal(err)
	}
	d.p = p
}

// close ends the session, releasing the lease.
func (d *shipDriver) close() {
	if d.p != nil {
		_ = d.sh.close(d.p, true)
		d.p = nil
	}
}

// round writes one small file and ships what is durable.
func (d *shipDriver) round(t *testing.T, s *source, i int) {
	t.Helper()
	s.write(t, fmt.Sprintf("f%d.txt", i%7), []byte(fmt.Sprintf("round %d\n", i)))
	s.sync(t)
	if err := d.sh.ship(d.p); err != nil {
		t.Fatalf("ship round %d: %v", i, err)
	}
}

// TestMeasureShipRounds: a remote built by N ship rounds of one small
// write each on objstorefake (64, or REYNFS_MEASURE=N to measure); it
// reports the segments a reader's tiling holds and a clone's requests
// and wall time, and checks that compaction kept the tiling to a
// fraction of the rounds and that the clone works.
func TestMeasureShipRounds(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("REYNFS_MEASURE"))
	if n <= 0 {
		n = 64
	}
	fake := objstorefake.New("measure")
	s := newSource(t)
	d := newShipDriver(t, s, fake, "w")
	start := time.Now()
	for i := range n {
		d.round(t, s, i)
	}
	shipWall := time.Since(start)
	shipReqs := d.sh.b.requests.Load()
	d.close()
	ctx := context.Background()
	h, _, err := ReadHead(ctx, fake, "w")
	if err != nil {
		t.Fatal(err)
	}
	rd := &segReader{ctx: ctx, b: fake}
	if _, err := rd.records("w", h, 1, h.Seq, 0); err != nil {
		t.Fatal(err)
	}
	// REYNFS_MEASURE_LATENCY (a duration): each of the clone's
	// requests waits that long, as a round trip to a server would.
	if l, err := time.ParseDuration(os.Getenv("REYNFS_MEASURE_LATENCY")); err == nil {
		fake.SetLatency(l)
	}
	start = time.Now()
	res, err := Clone(ctx, fake, "w", filepath.Join(t.TempDir(), "clone"), "")
	if err != nil {
		t.Fatal(err)
	}
	if rd.segments > n/4+DefaultCompactK {
		t.Errorf("%d segments in the tiling after %d rounds; want compaction to keep it under %d", rd.segments, n, n/4+DefaultCompactK)
	}
	t.Logf("MEASURE rounds=%d seqs=%d ship: requests=%d wall=%s; tiling segments=%d; clone: requests=%d segments=%d bytes=%d wall=%s",
		n, h.Seq, shipReqs, shipWall.Round(time.Millisecond), rd.segments, res.Requests, res.Segments, res.Bytes, time.Since(start).Round(time.Millisecond))
}
