package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
)

// LockedError: a live lease on the workspace is held by another writer.
type LockedError struct {
	Holder  Holder
	Expires time.Time
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("remote locked by %s pid %d (store %s) until %s; `reynfs clone --take` waits for the lease to expire and takes the workspace over",
		e.Holder.Host, e.Holder.Pid, e.Holder.Store, e.Expires.Format(time.RFC3339))
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// DeposedError: the workspace was taken over (a newer epoch) after this
// store last wrote it in epoch Ours.
type DeposedError struct {
	Remote, WS string
	Epoch      uint64 // the epoch that took over
	Host       string // its holder's host (HEAD's holder now)
	After      uint64 // the last seq the remote keeps of this store
}

func (e *DeposedError) Error() string {
	return fmt.Sprintf("deposed: workspace %s was taken over at epoch %d by %s; your records after seq %d are not on the remote; `reynfs push --ws NEW` keeps them as a new workspace NEW there",
		e.WS, e.Epoch, e.Host, e.After)
}

func (e *DeposedError) Unwrap() error { return ErrDeposed }

// errUnrenewed: the lease could not be renewed for want of an answer
// (not because another writer holds it): a shipper takes it again.
var errUnrenewed = errors.New("no answer")

// deposed returns a DeposedError if h has an epoch newer than ours, nil
// if not.
func (p *pusher) deposed(h *Head, ours uint64) error {
	for _, e := range h.Epochs {
		if e.Epoch > ours {
			return &DeposedError{Remote: p.b.String(), WS: p.ws, Epoch: e.Epoch, Host: h.Holder.Host, After: e.First - 1}
		}
	}
	return nil
}

// lease reads HEAD and takes the lease (creating HEAD on a first push),
// then starts renewing it.
func (p *pusher) lease() error {
	if err := refuseFollower(p.j); err != nil { // a follower never holds it (follow.go)
		return err
	}
	if err := p.take(); err != nil {
		return err
	}
	p.startRenewal()
	return nil
}

func (p *pusher) take() error {
	store, err := p.j.StoreID()
	if err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	p.holder = Holder{Host: host, Pid: os.Getpid(), Store: store}
	mine, err := p.loc.shipped(p.ws)
	if err != nil {
		return err
	}
	now, err := p.b.Now(p.ctx)
	if err != nil {
		return err
	}
	key := HeadKey(p.ws)
	data, info, err := p.b.Get(p.ctx, key)
	if errors.Is(err, objstore.ErrNotExist) {
		if mine != nil {
			return fmt.Errorf("%w: the remote has no HEAD, and this store pushed seqs through %d there: refusing to push over a remote that lost them", ErrDiverged, mine.Seq)
		}
		h := &Head{Format: Format, Floor: 1, Epochs: []Epoch{{Epoch: 1, First: 1}},
			Holder: p.holder, Expires: expiry(now, p.o.TTL)}
		info, err := p.b.PutIfAbsent(p.ctx, key, h.Encode())
		if errors.Is(err, objstore.ErrPrecondition) {
			data, ginfo, gerr := p.b.Get(p.ctx, key)
			if gerr != nil || !bytes.Equal(data, h.Encode()) {
				return fmt.Errorf("%w: another writer created it meanwhile", ErrLocked)
			}
			info, err = ginfo, nil // ours: a retried write whose reply was lost
		}
		if err != nil {
			return err
		}
		p.head, p.etag, p.leased, p.renewed = h, info.ETag, true, time.Now()
		return nil
	}
	if err != nil {
		return err
	}
	h, err := DecodeHead(key, data)
	if err != nil {
		return err
	}
	live := now.Before(h.Expires)
	ours := uint64(1)
	if mine != nil && mine.Epoch > 0 {
		ours = mine.Epoch
	}
	if h.Holder.Store != store || live && h.Holder.Host != host {
		// The same store on another host is a copy of it. On this host,
		// the holder of an unexpired lease of this store is a push that
		// died: this process holds the store's lock.
		if live {
			return &LockedError{Holder: h.Holder, Expires: h.Expires}
		}
		if mine != nil {
			if err := p.deposed(h, ours); err != nil {
				return err
			}
		}
		if unheldFork(h) && mine != nil && mine.Seq == h.Seq {
			// A clone of a fork that no store writes yet: this push
			// claims it, in a new epoch (another clone that claims it
			// too is deposed).
			p.head, p.etag = h, info.ETag
			next := *h
			next.Epochs = nextEpochs(h)
			next.Holder, next.Expires = p.holder, expiry(now, p.o.TTL)
			if err := p.writeHead(p.ctx, &next); err != nil {
				return err
			}
			p.leased = true
			return nil
		}
		if h.Holder.Store != store {
			return fmt.Errorf("%w: it was pushed by store %s on %s; push under another workspace name", ErrNotOurs, h.Holder.Store, h.Holder.Host)
		}
	}
	switch {
	case mine != nil && mine.Seq > h.Seq:
		return fmt.Errorf("%w: the remote's HEAD is at seq %d, and this store pushed seqs through %d there", ErrDiverged, h.Seq, mine.Seq)
	case h.Seq > p.j.Durable():
		return fmt.Errorf("%w: the remote holds seqs through %d, this store only through %d", ErrDiverged, h.Seq, p.j.Durable())
	}
	p.head, p.etag = h, info.ETag
	next := *h
	next.Holder, next.Expires = p.holder, expiry(now, p.o.TTL)
	if err := p.writeHead(p.ctx, &next); err != nil {
		return err
	}
	p.leased = true
	return nil
}

func expiry(now time.Time, ttl time.Duration) time.Time { return now.Add(ttl).UTC().Round(0) }

// writeHead replaces HEAD (p.head, read with ETag p.etag) with h by
// PutIfMatch (invariant 3); h becomes p.head only when it is written.
func (p *pusher) writeHead(ctx context.Context, h *Head) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost != nil {
		return p.lost
	}
	return p.writeHeadLocked(ctx, h)
}

func (p *pusher) writeHeadLocked(ctx context.Context, h *Head) error {
	key := HeadKey(p.ws)
	want := h.Encode()
	info, err := p.b.PutIfMatch(ctx, key, want, p.etag)
	if errors.Is(err, objstore.ErrPrecondition) {
		data, ginfo, gerr := p.b.Get(ctx, key)
		if gerr == nil && bytes.Equal(data, want) {
			// Our write, applied: its reply was lost and the client
			// retried it (only this process writes its own holder).
			p.head, p.etag, p.renewed = h, ginfo.ETag, time.Now()
			return nil
		}
		if gerr == nil {
			if now, derr := DecodeHead(key, data); derr == nil {
				if d := p.deposed(now, p.head.Epoch()); d != nil {
					return d
				}
				return &LockedError{Holder: now.Holder, Expires: now.Expires}
			}
		}
		return fmt.Errorf("%w: HEAD changed under the push", ErrLocked)
	}
	if err != nil {
		return err
	}
	p.head, p.etag, p.renewed = h, info.ETag, time.Now()
	return nil
}

// startRenewal starts the goroutine that renews the lease while the push
// runs. p.ctx becomes a context it cancels, with the reason, when the
// lease cannot be renewed: every request of the push then stops.
func (p *pusher) startRenewal() {
	ctx, cancel := context.WithCancelCause(p.base)
	p.ctx = ctx
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		tick := max(p.o.TTL/8, time.Millisecond)
		t := time.NewTimer(tick)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			if err := p.renewIfDue(); err != nil {
				cancel(err)
				return
			}
			t.Reset(tick)
		}
	}()
}

// renewIfDue renews the lease once a third of its TTL has passed by the
// server's clock, so that it is renewed before half of it has. A lease
// that cannot be renewed (HEAD changed, or no answer for half the TTL) is
// lost: p.lost says why, and nothing more is written.
func (p *pusher) renewIfDue() error {
	now, err := p.b.Now(p.base)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost != nil {
		return p.lost
	}
	switch {
	case err != nil && time.Since(p.renewed) < p.o.TTL/2:
		return nil // try again at the next tick
	case err != nil:
		p.lost = fmt.Errorf("%w: cannot renew the lease: %w: %v", ErrLocked, errUnrenewed, err)
	case now.Before(p.head.Expires.Add(-p.o.TTL * 2 / 3)):
		return nil
	default:
		next := *p.head
		next.Expires = expiry(now, p.o.TTL)
		if err := p.writeHeadLocked(p.base, &next); err != nil {
			p.lost = fmt.Errorf("renew the lease: %w", err)
			if !fatal(err) {
				// No answer (not another writer): a shipper takes it again.
				p.lost = fmt.Errorf("renew the lease: %w: %w", errUnrenewed, err)
			}
		}
	}
	if p.lost != nil {
		p.leased = false
	}
	return p.lost
}

// check returns why the lease was lost, nil while it holds: called
// before every write.
func (p *pusher) check() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// release stops the renewal and ends the lease: HEAD's expiry becomes
// the server's now. A lost lease is not released (it is not ours).
func (p *pusher) release() error {
	if p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
	}
	if err := p.check(); err != nil || !p.leased {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.base), 10*time.Second)
	defer cancel()
	now, err := p.b.Now(ctx)
	if err != nil {
		return fmt.Errorf("release the lease: %w", err)
	}
	next := *p.head
	next.Expires = now.UTC().Round(0)
	if err := p.writeHead(ctx, &next); err != nil {
		return fmt.Errorf("release the lease: %w", err)
	}
	p.leased = false
	return nil
}
