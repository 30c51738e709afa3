package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
)

// TakeOptions tune Take; the zero value means the defaults.
type TakeOptions struct {
	// Wait is called each time Take finds the lease live, with its
	// holder and the time left by the server's clock (nil: silent).
	Wait func(h Holder, left time.Duration)
	// Poll is the longest wait between two reads of HEAD (1 s).
	Poll time.Duration
}

// Take clones workspace ws into dir (as Clone does, at head) and takes
// it over: it waits until the lease has expired by the server's clock
// (ctx ends the wait), then writes HEAD by PutIfMatch with the ETag the
// clone read, naming a new epoch whose first seq follows HEAD's and the
// new store as holder. The deposed writer's later HEAD writes fail, and
// whatever it wrote past HEAD's seq is never read (the epochs' ranges):
// the clone's pushes continue the workspace from there. If HEAD changed
// between the clone's read and the takeover, nothing is left in dir and
// nothing on the remote changed.
func Take(ctx context.Context, b objstore.Backend, ws, dir string, o TakeOptions) (*CloneResult, error) {
	if err := CheckName(ws); err != nil {
		return nil, fmt.Errorf("take: workspace %w", err)
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	key := HeadKey(ws)
	for {
		data, _, err := b.Get(ctx, key)
		if errors.Is(err, objstore.ErrNotExist) {
			return nil, fmt.Errorf("take %s#%s: the remote has no workspace %s", b, ws, ws)
		}
		if err != nil {
			return nil, fmt.Errorf("take %s#%s: %w", b, ws, err)
		}
		h, err := DecodeHead(key, data)
		if err != nil {
			return nil, fmt.Errorf("take %s#%s: %w", b, ws, err)
		}
		now, err := b.Now(ctx)
		if err != nil {
			return nil, fmt.Errorf("take %s#%s: %w", b, ws, err)
		}
		left := h.Expires.Sub(now)
		if left <= 0 {
			break
		}
		if o.Wait != nil {
			o.Wait(h.Holder, left)
		}
		t := time.NewTimer(min(left, o.Poll))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("take %s#%s: waiting for the lease of %s pid %d: %w", b, ws, h.Holder.Host, h.Holder.Pid, ctx.Err())
		case <-t.C:
		}
	}
	return clone(ctx, b, ws, dir, "", true, false)
}

// takeOver writes the HEAD that makes the new store the workspace's
// writer in a new epoch starting after HEAD's seq (invariant 3: by
// PutIfMatch with the ETag of the HEAD the clone read), then records it
// locally as shipped through that seq in that epoch.
func (c *cloner) takeOver() error {
	now, err := c.b.Now(c.ctx)
	if err != nil {
		return err
	}
	if now.Before(c.head.Expires) {
		return &LockedError{Holder: c.head.Holder, Expires: c.head.Expires}
	}
	store, err := c.j.StoreID()
	if err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	next := *c.head
	e := c.head.Epoch() + 1
	next.Epochs = nextEpochs(c.head)
	next.Holder = Holder{Host: host, Pid: os.Getpid(), Store: store}
	next.Expires = now.UTC().Round(0) // taken, not held: the clone's pushes hold it
	want := next.Encode()
	key := HeadKey(c.ws)
	info, err := c.b.PutIfMatch(c.ctx, key, want, c.etag)
	if errors.Is(err, objstore.ErrPrecondition) {
		data, ginfo, gerr := c.b.Get(c.ctx, key)
		if gerr != nil || !bytes.Equal(data, want) {
			return fmt.Errorf("%w: HEAD changed during the takeover (its holder came back, or another takeover won); nothing was taken", ErrLocked)
		}
		info, err = ginfo, nil // ours: a retried write whose reply was lost
	}
	if err != nil {
		return err
	}
	c.res.Epoch = e
	return c.loc.setShipped(c.ws, shipped{Seq: c.head.Seq, ETag: info.ETag, Epoch: e})
}

// nextEpochs returns h's epochs followed by a new one from h.Seq+1. A
// last epoch that shipped nothing HEAD covers is replaced over the same
// seqs (epochs' firsts rise strictly).
func nextEpochs(h *Head) []Epoch {
	ep := slices.Clone(h.Epochs)
	if last := &ep[len(ep)-1]; last.First == h.Seq+1 {
		last.Epoch = h.Epoch() + 1
		return ep
	}
	return append(ep, Epoch{Epoch: h.Epoch() + 1, First: h.Seq + 1})
}

// unheldFork: h is a fork's HEAD no store has written yet.
func unheldFork(h *Head) bool {
	return h.Parent != nil && strings.HasPrefix(h.Holder.Store, forkHolder)
}
