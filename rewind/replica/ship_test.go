package replica

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/journal"
)

// lockedBuf is a log the shipper writes while the test reads it.
type lockedBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuf) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

func startShipper(t *testing.T, s *source, b objstore.Backend, o ShipOptions) *Shipper {
	t.Helper()
	return startShipperLog(t, s, b, o, zerolog.Nop())
}

func startShipperLog(t *testing.T, s *source, b objstore.Backend, o ShipOptions, log zerolog.Logger) *Shipper {
	t.Helper()
	o.Log = log
	sh, err := StartShipper(s.j, b, "ws", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = sh.Stop(ctx)
	})
	return sh
}

// waitShipped waits (generously) until the shipper reports seq shipped.
func waitShipped(t *testing.T, sh *Shipper, seq uint64) ShipStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := sh.Status()
		if st.Known && st.Shipped >= seq {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("shipper never reached seq %d: %+v", seq, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitState(t *testing.T, sh *Shipper, state string) ShipStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := sh.Status()
		if st.State == state {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("shipper never reached state %s: %+v", state, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cloneHead clones the remote's head into a new store and checks that
// it holds the state at seq of s.
func cloneHead(t *testing.T, s *source, b objstore.Backend, seq uint64) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "clone")
	res, err := Clone(context.Background(), b, "ws", dir, "")
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(dir, journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if res.Head != seq {
		t.Fatalf("clone at seq %d, want %d", res.Head, seq)
	}
	if got, want := stateRoot(t, j, seq), stateRoot(t, s.j, seq); got != want {
		t.Fatalf("clone's state at %d is %s, the source's %s", seq, got.Short(), want.Short())
	}
}

// TestShipperShips: records made durable reach the remote without a
// push (within the shipper's second, asserted with a generous deadline),
// a clone holds them, and a Stop releases the lease.
func TestShipperShips(t *testing.T) {
	s := newSource(t)
	b := objstorefake.New("ship")
	sh := startShipper(t, s, b, ShipOptions{})
	waitState(t, sh, ShipIdle)
	for i := range 3 {
		s.write(t, "f.txt", pattern(byte(i), 10000+i))
		s.sync(t)
		st := waitShipped(t, sh, s.j.Durable())
		if st.LagRecords != 0 || st.PendingBytes != 0 {
			t.Fatalf("shipped everything, yet lag %d records, %d bytes", st.LagRecords, st.PendingBytes)
		}
	}
	seq := s.j.Durable()
	cloneHead(t, s, b, seq)
	st, err := sh.Stop(context.Background())
	if err != nil || st.State != ShipStopped || st.Shipped != seq {
		t.Fatalf("stop: %v, %+v", err, st)
	}
	h, _ := readHead(t, b, "ws")
	now, _ := b.Now(context.Background())
	if h.Expires.After(now) {
		t.Fatalf("lease not released: expires %s, now %s", h.Expires, now)
	}
	if st.Requests == 0 || st.BytesSent == 0 {
		t.Fatalf("no requests counted: %+v", st)
	}
}

// TestShipperPendingTriggers: with a long interval, 8 MiB pending (here
// a smaller MaxPending) ships at once, and status shows the lag first.
func TestShipperPendingTriggers(t *testing.T) {
	s := newSource(t)
	b := objstorefake.New("pending")
	sh := startShipper(t, s, b, ShipOptions{Interval: time.Hour, MaxPending: 1 << 20})
	waitState(t, sh, ShipIdle)
	s.write(t, "small.txt", []byte("small"))
	s.sync(t)
	time.Sleep(300 * time.Millisecond) // a few polls: under MaxPending, nothing ships
	st := sh.Status()
	if st.LagRecords == 0 || st.PendingBytes == 0 || st.LagSeconds <= 0 {
		t.Fatalf("a record waits, yet status says %+v", st)
	}
	s.write(t, "big.bin", pattern(7, 2<<20))
	s.sync(t)
	waitShipped(t, sh, s.j.Durable())
}

// TestShipperBacksOff: a remote that fails every request makes the
// shipper back off (few requests, one state), keep the records, and
// catch up once the remote answers again.
func TestShipperBacksOff(t *testing.T) {
	s := newSource(t)
	b := objstorefake.New("down")
	var down atomic.Bool
	var tries atomic.Int64
	b.SetHook(func(op objstorefake.Op, key string) error {
		if down.Load() {
			tries.Add(1)
			return errors.New("connection refused")
		}
		return nil
	})
	log := &lockedBuf{}
	sh := startShipperLog(t, s, b, ShipOptions{MinBackoff: 50 * time.Millisecond, MaxBackoff: 400 * time.Millisecond}, zerolog.New(log))
	waitState(t, sh, ShipIdle)
	down.Store(true)
	s.write(t, "a.txt", []byte("written while the remote is down"))
	s.sync(t)
	st := waitState(t, sh, ShipBackoff)
	if !strings.Contains(st.LastError, "connection refused") {
		t.Fatalf("backing off without the error: %+v", st)
	}
	if err := sh.Wait(context.Background(), s.j.Durable()); !errors.Is(err, ErrRemoteDown) {
		t.Fatalf("wait on a down remote: %v, want ErrRemoteDown", err)
	}
	time.Sleep(2 * time.Second)
	// 50+100+200+400+400... ms: about 7 sessions in 2 s, each a request
	// or two; without backoff it would be hundreds.
	if n := tries.Load(); n > 40 {
		t.Fatalf("%d requests in 2 s to a down remote: no backoff", n)
	}
	if n := log.count("backing off"); n != 1 || tries.Load() < 4 {
		t.Fatalf("%d log lines for %d failed tries; want one per change of state", n, tries.Load())
	}
	down.Store(false)
	s.write(t, "b.txt", []byte("after"))
	s.sync(t)
	waitShipped(t, sh, s.j.Durable())
	if st := sh.Status(); st.State == ShipStopped {
		t.Fatalf("stopped: %+v", st)
	}
	cloneHead(t, s, b, s.j.Durable())
	if n := log.count("answers again"); n != 1 {
		t.Fatalf("%d 'answers again' lines, want 1", n)
	}
}

// TestShipperFsyncIgnoresPausedRemote: with every request of the remote
// held (Pause), writes and their fsync still complete; the shipper
// catches up after Resume.
func TestShipperFsyncIgnoresPausedRemote(t *testing.T) {
	s := newSource(t)
	b := objstorefake.New("paused")
	sh := startShipper(t, s, b, ShipOptions{})
	waitState(t, sh, ShipIdle)
	b.Pause()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			b.Resume()
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			s.write(t, "f.txt", pattern(byte(i), 5000))
			s.sync(t)
			time.Sleep(60 * time.Millisecond) // across several shipper ticks
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("writes and fsync blocked behind a paused remote")
	}
	if st := sh.Status(); st.Shipped >= s.j.Durable() {
		t.Fatalf("paused remote, yet shipped through %d of %d", st.Shipped, s.j.Durable())
	}
	b.Resume()
	resumed = true
	waitShipped(t, sh, s.j.Durable())
}

// partitioned is a backend the test can cut off from the shipper alone
// (another client of the same fake still reaches it).
type partitioned struct {
	objstore.Backend
	cut atomic.Bool
}

func (p *partitioned) check() error {
	if p.cut.Load() {
		return errors.New("network unreachable")
	}
	return nil
}

func (p *partitioned) Get(ctx context.Context, key string) ([]byte, objstore.Info, error) {
	if err := p.check(); err != nil {
		return nil, objstore.Info{}, err
	}
	return p.Backend.Get(ctx, key)
}

func (p *partitioned) Put(ctx context.Context, key string, data []byte) error {
	if err := p.check(); err != nil {
		return err
	}
	return p.Backend.Put(ctx, key, data)
}

func (p *partitioned) PutIfAbsent(ctx context.Context, key string, data []byte) (objstore.Info, error) {
	if err := p.check(); err != nil {
		return objstore.Info{}, err
	}
	return p.Backend.PutIfAbsent(ctx, key, data)
}

func (p *partitioned) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (objstore.Info, error) {
	if err := p.check(); err != nil {
		return objstore.Info{}, err
	}
	return p.Backend.PutIfMatch(ctx, key, data, etag)
}

func (p *partitioned) Now(ctx context.Context) (time.Time, error) {
	if err := p.check(); err != nil {
		return time.Time{}, err
	}
	return p.Backend.Now(ctx)
}

// TestShipperDeposed: the shipper is cut off from the remote until its
// lease expires, another machine takes the workspace over (Take, as
// clone --take), and the network comes back: the shipper sees the newer
// epoch and stops as deposed, with the reason, and writes nothing more.
func TestShipperDeposed(t *testing.T) {
	s := newSource(t)
	b := objstorefake.New("deposed")
	p := &partitioned{Backend: b}
	sh := startShipper(t, s, p, ShipOptions{Options: Options{TTL: 2 * time.Second},
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	s.write(t, "a.txt", []byte("one"))
	s.sync(t)
	waitShipped(t, sh, s.j.Durable())
	p.cut.Store(true)
	s.write(t, "b.txt", []byte("two, never shipped"))
	s.sync(t)
	waitState(t, sh, ShipBackoff)
	ctx := context.Background()
	res, err := Take(ctx, b, "ws", filepath.Join(t.TempDir(), "taker"), TakeOptions{Poll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Epoch != 2 {
		t.Fatalf("take: %+v, want epoch 2", res)
	}
	n := b.Count(objstorefake.OpPutIfMatch)
	p.cut.Store(false)
	st := waitState(t, sh, ShipStopped)
	if !strings.Contains(st.Reason, "deposed") {
		t.Fatalf("stopped for %q, want deposed", st.Reason)
	}
	if err := sh.Wait(ctx, s.j.Durable()); !errors.Is(err, ErrShipStopped) {
		t.Fatalf("wait on a stopped shipper: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	if m := b.Count(objstorefake.OpPutIfMatch); m != n {
		t.Fatalf("a deposed shipper wrote HEAD %d times", m-n)
	}
	if h, _ := readHead(t, b, "ws"); h.Epoch() != 2 || h.Seq != res.Head {
		t.Fatalf("HEAD after the deposed shipper came back: epoch %d seq %d; want the taker's, %d", h.Epoch(), h.Seq, res.Head)
	}
}

// TestShipperStopBounded: Stop with a paused remote returns once its
// context ends, naming the unshipped seqs; Stop with a live one ships
// the rest first.
func TestShipperStopBounded(t *testing.T) {
	s := newSource(t)
	b := objstorefake.New("stop")
	sh := startShipper(t, s, b, ShipOptions{Interval: time.Hour, MaxPending: 1 << 40})
	waitState(t, sh, ShipIdle)
	s.write(t, "a.txt", []byte("pending at stop"))
	s.sync(t)
	b.Pause()
	defer b.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	st, err := sh.Stop(ctx)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("stop took %s with a 500 ms bound", took)
	}
	if !errors.Is(err, ErrShipStopped) || st.LagRecords == 0 || !strings.Contains(err.Error(), "not shipped") {
		t.Fatalf("stop on a paused remote: %v %+v", err, st)
	}
	b.Resume()

	sh2 := startShipper(t, s, b, ShipOptions{Interval: time.Hour, MaxPending: 1 << 40})
	s.write(t, "b.txt", []byte("also pending"))
	s.sync(t)
	st, err = sh2.Stop(context.Background())
	if err != nil || st.Shipped != s.j.Durable() {
		t.Fatalf("stop did not ship the rest: %v %+v", err, st)
	}
}

// TestShipperRenewsIdle: with nothing to ship, the shipper still renews
// its lease (HEAD's expiry moves on and stays ahead of the server's now).
func TestShipperRenewsIdle(t *testing.T) {
	s := newSource(t)
	b := objstorefake.New("idle")
	sh := startShipper(t, s, b, ShipOptions{Options: Options{TTL: time.Second}})
	waitState(t, sh, ShipIdle)
	first, _ := readHead(t, b, "ws")
	time.Sleep(2500 * time.Millisecond) // 2.5 TTLs
	h, _ := readHead(t, b, "ws")
	now, _ := b.Now(context.Background())
	if !h.Expires.After(first.Expires) || !h.Expires.After(now) {
		t.Fatalf("idle lease not renewed: expires %s (first %s), now %s", h.Expires, first.Expires, now)
	}
	if st := sh.Status(); st.State != ShipIdle || h.Seq != st.Shipped {
		t.Fatalf("idle shipper: %+v, HEAD seq %d", st, h.Seq)
	}
}

// inOutage starts a shipper (backoff a minute) whose remote fails every
// request while down is set, or while gate, when it returns true, says
// so; it returns once the shipper backs off from a write made while
// the remote is down.
func inOutage(t *testing.T, gate func() bool) (*source, *Shipper, *atomic.Bool) {
	t.Helper()
	s := newSource(t)
	b := objstorefake.New(t.Name())
	var down atomic.Bool
	b.SetHook(func(objstorefake.Op, string) error {
		if gate != nil && gate() || down.Load() {
			return errors.New("connection refused")
		}
		return nil
	})
	sh := startShipper(t, s, b, ShipOptions{MinBackoff: time.Minute, MaxBackoff: time.Minute})
	waitState(t, sh, ShipIdle)
	down.Store(true)
	s.write(t, "a.txt", []byte("during the outage"))
	s.sync(t)
	waitState(t, sh, ShipBackoff)
	return s, sh, &down
}

// TestShipperWaitAfterOutage: once the remote answers again, a Wait
// (sync) ships at once rather than at the end of a long backoff.
func TestShipperWaitAfterOutage(t *testing.T) {
	s, sh, down := inOutage(t, nil)
	down.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sh.Wait(ctx, s.j.Durable()); err != nil {
		t.Fatalf("wait after the outage: %v", err)
	}
}

// TestShipperWaitIgnoresEarlierTry: a try begun before Wait (a stale
// kick's, still under way with the remote down) fails after Wait was
// called; Wait must not take that for the remote being down, but wait
// for the try its own kick starts, which succeeds.
func TestShipperWaitIgnoresEarlierTry(t *testing.T) {
	var gated atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	s, sh, down := inOutage(t, func() bool {
		if !gated.CompareAndSwap(true, false) {
			return false
		}
		close(entered)
		<-release
		return true
	})
	gated.Store(true)
	sh.Kick() // a try begins and blocks in its first request
	<-entered
	down.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- sh.Wait(ctx, s.j.Durable()) }()
	time.Sleep(200 * time.Millisecond) // Wait is waiting
	close(release)                     // the earlier try fails now
	if err := <-res; err != nil {
		t.Fatalf("wait: %v; want the try after its kick to ship", err)
	}
}
