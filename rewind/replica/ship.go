package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
)

// Continuous replication: a Shipper is a long-lived push. It holds the
// workspace's lease for as long as it runs (the pusher's lease and
// renewal, lease.go), and every Interval, or at once when MaxPending
// bytes of durable records wait, sends the durable records after the
// remote's seq as push does (push.go: packs, index, segment, HEAD). It
// reads only j.Durable() and the committed records: an fsync never
// waits for it, nor for the network.
//
// A remote that is down or erroring is retried with exponential backoff
// (MinBackoff doubling up to MaxBackoff), logging once per change of
// state, never per try; the records stay in the store (retention keeps
// them: FloorHolds). A lease lost because it could not be renewed is
// taken again once the remote answers. A remote that is locked by
// another writer, a workspace another store writes, a diverged history
// or a newer epoch (deposed) stops the shipper: it is never retried
// blindly, and Status says why.

// ShipOptions tune a Shipper; the zero value means the defaults.
type ShipOptions struct {
	Options
	Interval   time.Duration // ship the new durable records this often (1 s)
	Poll       time.Duration // count the pending bytes this often (100 ms)
	MaxPending int64         // ship at once when this many bytes wait (8 MiB)
	MinBackoff time.Duration // first wait after a failure (500 ms)
	MaxBackoff time.Duration // the backoff's cap (30 s)
	Guard      time.Duration // read remote GC's state again this often (GuardEvery)
	Log        zerolog.Logger
}

func (o ShipOptions) withDefaults() ShipOptions {
	if o.TTL <= 0 {
		// Renewed once a third of it has passed: every 5 s when idle.
		o.TTL = 15 * time.Second
	}
	o.Options = o.Options.withDefaults()
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 100 * time.Millisecond
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 8 << 20
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 500 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.Guard <= 0 {
		o.Guard = GuardEvery
	}
	return o
}

// The states of a Shipper.
const (
	ShipStarting = "starting" // taking the lease
	ShipShipping = "shipping" // sending records
	ShipIdle     = "idle"     // the remote holds every durable record
	ShipBackoff  = "backing-off"
	ShipStopped  = "stopped"
)

// ErrShipStopped: the shipper stopped (Status().Reason says why).
var ErrShipStopped = errors.New("continuous replication stopped")

// ErrRemoteDown: the shipper is backing off after failed requests.
var ErrRemoteDown = errors.New("remote unreachable or failing")

// Shipper is a running continuous replication of one workspace.
type Shipper struct {
	j    *journal.Journal
	b    *counting
	ws   string
	o    ShipOptions
	ctx  context.Context
	stop context.CancelCauseFunc
	kick chan struct{}
	done chan struct{}
	// between: work run with the session's pusher between ships, on
	// the loop's goroutine (Shipper.Forget, forget.go).
	between chan func(*pusher)

	mu       sync.Mutex
	changed  chan struct{} // closed (and replaced) on every change
	state    string
	since    time.Time
	shipped  uint64
	known    bool // shipped was read from the remote
	lastErr  error
	reason   error // why it stopped
	draining context.Context
	est      estimate
	guarded  time.Time // when the loop last read remote GC's state (guard)
	// tries: the tries begun (a session's open, a ship); failedTry:
	// the try whose failure set the state backing-off. Wait reports the
	// remote down only for a try begun after it was called.
	tries, failedTry uint64
}

// try counts a try begun.
func (s *Shipper) try() {
	s.mu.Lock()
	s.tries++
	s.mu.Unlock()
}

// StartShipper starts replicating workspace ws of j to b. It returns at
// once; the lease is taken by the shipper's goroutine (Status shows it).
func StartShipper(j *journal.Journal, b objstore.Backend, ws string, o ShipOptions) (*Shipper, error) {
	if err := CheckName(ws); err != nil {
		return nil, fmt.Errorf("sync: workspace %w", err)
	}
	ctx, stop := context.WithCancelCause(context.Background())
	s := &Shipper{j: j, b: &counting{Backend: b}, ws: ws, o: o.withDefaults(), ctx: ctx, stop: stop,
		kick: make(chan struct{}, 1), done: make(chan struct{}), changed: make(chan struct{}),
		state: ShipStarting, since: time.Now(), between: make(chan func(*pusher))}
	go s.loop()
	return s, nil
}

// Kick makes the shipper ship now rather than at its next tick.
func (s *Shipper) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Shipper) set(state string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.state
	if state != s.state {
		s.since = time.Now()
	}
	s.state = state
	switch state {
	case ShipBackoff:
		s.lastErr, s.failedTry = err, s.tries
	case ShipStopped:
		s.reason = err
	case ShipShipping, ShipIdle:
		s.lastErr = nil
	}
	close(s.changed)
	s.changed = make(chan struct{})
	// One line per change of state, never per try (Status has the
	// last error).
	l := s.o.Log
	switch {
	case state == ShipBackoff && prev != ShipBackoff:
		l.Warn().Str("remote", s.b.String()).Str("ws", s.ws).Err(err).Msg("sync: remote failing, backing off (records kept)")
	case state == ShipStopped && prev != ShipStopped:
		ev := l.Info()
		if err != nil {
			ev = l.Error().Err(err)
		}
		ev.Str("remote", s.b.String()).Str("ws", s.ws).Uint64("shipped", s.shipped).Msg("sync: stopped")
	case prev == ShipBackoff && state != ShipBackoff && state != ShipStopped:
		l.Info().Str("remote", s.b.String()).Str("ws", s.ws).Msg("sync: remote answers again")
	case prev == ShipStarting && state == ShipIdle || prev == ShipStarting && state == ShipShipping:
		l.Info().Str("remote", s.b.String()).Str("ws", s.ws).Uint64("shipped", s.shipped).Msg("sync: holding the lease")
	}
}

func (s *Shipper) setShipped(seq uint64) {
	s.mu.Lock()
	s.shipped, s.known = seq, true
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// fatal reports whether err stops the shipper for good: another writer,
// another store, a diverged history, a newer epoch. A lease that could
// not be renewed (no answer) is not: it is taken again.
func fatal(err error) bool {
	if errors.Is(err, errUnrenewed) {
		return false
	}
	var locked *LockedError
	var deposed *DeposedError
	return errors.As(err, &locked) || errors.As(err, &deposed) || errors.Is(err, ErrLocked) ||
		errors.Is(err, ErrNotOurs) || errors.Is(err, ErrDiverged) || errors.Is(err, ErrDeposed) ||
		errors.Is(err, ErrName) || errors.Is(err, cas.ErrCorrupt) || errors.Is(err, journal.ErrClosed)
}

// loop runs the session: take the lease, ship, back off, until Stop.
func (s *Shipper) loop() {
	defer close(s.done)
	var p *pusher
	backoff := time.Duration(0)
	poll := time.NewTicker(s.o.Poll)
	defer poll.Stop()
	lastShip := time.Time{}
	for {
		drain := s.drainCtx()
		if p == nil {
			var err error
			s.try()
			p, err = s.open()
			if err != nil {
				if fatal(err) || drain != nil {
					s.set(ShipStopped, err)
					return
				}
				backoff = min(max(backoff*2, s.o.MinBackoff), s.o.MaxBackoff)
				s.set(ShipBackoff, err)
				s.sleep(backoff) // cut short by Stop: one last try, bounded by its context
				continue
			}
			backoff = 0
		}
		durable := s.j.Durable()
		s.count(durable)
		due := drain != nil || time.Since(lastShip) >= s.o.Interval || s.pending() >= s.o.MaxPending
		if due && durable > p.current().Seq {
			s.set(ShipShipping, nil)
			s.try()
			err := s.ship(p)
			lastShip = time.Now()
			if err != nil {
				s.close(p, false)
				p = nil
				if fatal(err) {
					s.set(ShipStopped, err)
					return
				}
				if drain != nil {
					s.set(ShipStopped, fmt.Errorf("stopped with seqs after %d not shipped: %w", s.Status().Shipped, err))
					return
				}
				backoff = min(max(backoff*2, s.o.MinBackoff), s.o.MaxBackoff)
				s.set(ShipBackoff, err)
				s.sleep(backoff)
				continue
			}
			continue // more may have become durable meanwhile
		}
		if err := p.check(); err != nil { // the renewal failed while idle
			s.close(p, false)
			p = nil
			if fatal(err) {
				s.set(ShipStopped, err)
				return
			}
			backoff = min(max(backoff*2, s.o.MinBackoff), s.o.MaxBackoff)
			s.set(ShipBackoff, err)
			s.sleep(backoff)
			continue
		}
		if drain != nil {
			err := s.close(p, true)
			s.set(ShipStopped, err)
			return
		}
		s.set(ShipIdle, nil)
		select {
		case <-poll.C:
		case <-s.kick:
			lastShip = time.Time{}
		case f := <-s.between:
			f(p)
		case <-s.ctx.Done():
		}
	}
}

// sleep waits d, a kick or Stop; it reports whether d passed.
func (s *Shipper) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.kick:
		return false
	case <-s.ctx.Done():
		return false
	}
}

// open reads the remote's config and takes the lease.
func (s *Shipper) open() (*pusher, error) {
	ctx := s.ctx
	if d := s.drainCtx(); d != nil {
		ctx = d
	}
	p := &pusher{ctx: ctx, base: ctx, j: s.j, b: s.b, ws: s.ws, o: s.o.Options,
		res:  &PushResult{Remote: s.b.String(), WS: s.ws},
		sent: map[cas.Hash]byte{}, unmarked: map[cas.Hash]byte{}}
	cfg, err := remoteConfig(ctx, s.b, true)
	if err != nil {
		return nil, err
	}
	if p.loc, err = newLocal(s.j, cfg); err != nil {
		return nil, err
	}
	if err := s.guard(p); err != nil {
		return nil, err
	}
	if err := p.loc.setURL(s.b.String()); err != nil {
		return nil, err
	}
	if err := p.lease(); err != nil {
		if p.stop != nil {
			s.close(p, false)
		}
		return nil, err
	}
	seq := p.current().Seq
	s.mu.Lock()
	s.est.start(seq)
	s.mu.Unlock()
	s.setShipped(seq)
	return p, nil
}

// ship sends the durable records after the remote's seq (push's run):
// what a failed earlier run left in the pusher's caches is dropped, so
// nothing unwritten counts as sent.
func (s *Shipper) ship(p *pusher) error {
	clear(p.sent)
	clear(p.unmarked)
	p.res = &PushResult{Remote: s.b.String(), WS: s.ws}
	if time.Since(s.guarded) >= s.o.Guard {
		if err := s.guard(p); err != nil {
			return err
		}
	}
	err := p.run()
	if err == nil { // branch names, after the HEAD covering their seqs (names.go)
		_, err = pushNames(p.ctx, s.j, s.b, p.loc, s.ws, p.current().Seq)
	}
	if err == nil && p.res.Segments > 0 && !p.noCompact && s.drainCtx() == nil { // not while Stop drains
		// A few merges per ship, after HEAD advanced (compact.go),
		// none started once shipCompactFor has passed: a large one is
		// a step of its own between ships. A failure stops compaction
		// for the session, never the shipping.
		if _, cerr := p.compact(shipCompactMax, shipCompactFor); cerr != nil && p.check() == nil {
			p.noCompact = true
			s.o.Log.Warn().Str("remote", s.b.String()).Str("ws", s.ws).Err(cerr).Msg("sync: segment compaction failed; retried next session")
		}
	}
	if lost := p.check(); lost != nil {
		err = lost
	}
	s.setShipped(p.current().Seq)
	return err
}

// A ship merges at most shipCompactMax times and starts none after
// shipCompactFor (compact.go): the lag's goal is under 2 s.
const (
	shipCompactMax = 4
	shipCompactFor = 200 * time.Millisecond
)

// GuardEvery is how often a session reads remote GC's condemned lists
// and generation again (gcguard.go; a push reads them once, at its
// start): far inside GC's grace (24 h), so an object of a pack a list
// condemned is counted as held only by ships whose HEAD precedes the
// deletion's re-mark.
const GuardEvery = 10 * time.Minute

// guard reads remote GC's lists and generation into p (gcguard.go).
func (s *Shipper) guard(p *pusher) error {
	g, err := readGCGuard(p.ctx, s.b, p.loc)
	if err != nil {
		return err
	}
	p.gc, s.guarded = g, time.Now()
	return nil
}

// close ends a session: release the lease (when release is set and it
// is still held), else only stop the renewal.
func (s *Shipper) close(p *pusher, release bool) error {
	if release {
		return p.release()
	}
	if p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
	}
	return nil
}

func (s *Shipper) drainCtx() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// Stop ships what is durable now (bounded by ctx: cut short, the
// records stay in the store for the next push or mount), releases the
// lease and waits for the shipper to end. It returns the final status,
// and an error when records were left unshipped or it had stopped for
// a reason of its own.
func (s *Shipper) Stop(ctx context.Context) (ShipStatus, error) {
	s.mu.Lock()
	if s.draining == nil {
		s.draining = ctx
	}
	s.mu.Unlock()
	// The session's requests end when ctx does.
	stopAfter := context.AfterFunc(ctx, func() { s.stop(fmt.Errorf("stop: %w", context.Cause(ctx))) })
	defer stopAfter()
	s.Kick()
	<-s.done
	s.stop(errors.New("stopped"))
	st := s.Status()
	if st.LagRecords > 0 {
		return st, fmt.Errorf("%w: seqs %d-%d not shipped to %s#%s (%s)", ErrShipStopped, st.Shipped+1, st.Durable, st.Remote, st.WS, st.Reason)
	}
	if st.Reason != "" {
		return st, fmt.Errorf("%w: %s", ErrShipStopped, st.Reason)
	}
	return st, nil
}

// Done is closed once the shipper has ended (stopped or Stop).
func (s *Shipper) Done() <-chan struct{} { return s.done }

// Wait blocks until the remote holds seq (HEAD covers it). It fails when
// ctx ends, the shipper stops, or, backing off after failures, a try it
// makes at once fails too (the remote is down: the caller says so
// rather than hang).
func (s *Shipper) Wait(ctx context.Context, seq uint64) error {
	s.mu.Lock()
	begun := s.tries
	s.mu.Unlock()
	s.Kick() // a backing-off shipper tries again now, not at its timer
	for {
		s.mu.Lock()
		shipped, state, ch := s.shipped, s.state, s.changed
		lastErr, reason, failed := s.lastErr, s.reason, s.failedTry
		s.mu.Unlock()
		switch {
		case shipped >= seq && (state != ShipStarting):
			return nil
		case state == ShipStopped:
			return fmt.Errorf("%w at seq %d: %v", ErrShipStopped, shipped, reason)
		case state == ShipBackoff && failed > begun:
			// A try begun after the kick failed (one begun before,
			// under way when Wait was called, does not count).
			return fmt.Errorf("%w: %s holds seqs through %d of %d: %v", ErrRemoteDown, s.b.String(), shipped, seq, lastErr)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%s holds seqs through %d of %d: %w", s.b.String(), shipped, seq, context.Cause(ctx))
		}
	}
}
