package replica

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/reynfs/reynfs/cas/objstore"
)

// ErrTarget: a forget target that names no generation of the workspace.
var ErrTarget = errors.New("bad forget target")

// ForgetResult says what a forget changed in a workspace's HEAD.
type ForgetResult struct {
	Remote string `json:"remote"`
	WS     string `json:"ws"`
	// ID and Seq: the generation (gN) history is kept from.
	ID  int    `json:"id"`
	Seq uint64 `json:"seq"`
	// From and Floor: the first seq a reader read before and reads now;
	// OldFloor and Floor are HEAD's floor before and after.
	From     uint64 `json:"from"`
	OldFloor uint64 `json:"old_floor"`
	Floor    uint64 `json:"floor"`
	// Generations: how many generations this forget dropped; Dropped:
	// how many the workspace has dropped in all (gN counts them).
	Generations int  `json:"generations"`
	Dropped     int  `json:"dropped"`
	Changed     bool `json:"changed"`
}

// Forget makes the remote keep workspace ws's history from the
// generation target names (gN, or the seq of a generation): HEAD's floor
// becomes that seq (unless it is higher already) and "dropped" counts
// every generation before it, so gN names the same generation in a
// later clone and readers read nothing below it (Head.Start). Nothing
// is deleted: `gc` condemns and later deletes what no reader reaches.
//
// It writes HEAD once, by PutIfMatch with the ETag read, and only when
// no writer holds the lease (LockedError otherwise): a push that takes
// the lease meanwhile makes the write fail, and Forget reads HEAD again.
// The holder and epochs stay as they are: the writer's next push keeps
// the higher floor (push.go). A fork of ws keeps reading ws's segments
// from its own floor, so a forget of a parent never takes what a fork
// needs: gc marks those segments and their objects live from the fork.
func Forget(ctx context.Context, b objstore.Backend, ws, target string) (*ForgetResult, error) {
	if err := CheckName(ws); err != nil {
		return nil, fmt.Errorf("forget: workspace %w", err)
	}
	fail := func(err error) (*ForgetResult, error) {
		return nil, fmt.Errorf("forget %s#%s: %w", b, ws, err)
	}
	if _, err := remoteConfig(ctx, b, false); err != nil {
		return fail(err)
	}
	for range 4 {
		res, err := forgetOnce(ctx, b, ws, target)
		if errors.Is(err, objstore.ErrPrecondition) {
			continue // HEAD changed since it was read: read it again
		}
		if err != nil {
			return fail(err)
		}
		return res, nil
	}
	return fail(fmt.Errorf("%w: HEAD keeps changing", ErrLocked))
}

func forgetOnce(ctx context.Context, b objstore.Backend, ws, target string) (*ForgetResult, error) {
	h, etag, err := ReadHead(ctx, b, ws)
	if err != nil {
		return nil, err
	}
	now, err := b.Now(ctx)
	if err != nil {
		return nil, err
	}
	if now.Before(h.Expires) {
		// A continuous sync holding it forgets through its own lease
		// (Shipper.Forget): the daemon serves forget for it.
		return nil, &LockedError{Holder: h.Holder, Expires: h.Expires}
	}
	gens, err := Generations(ctx, b, ws, h)
	if err != nil {
		return nil, err
	}
	res, next, err := planForget(b.String(), ws, gens, h, target)
	if err != nil || next == nil {
		return res, err
	}
	if _, err := b.PutIfMatch(ctx, HeadKey(ws), next.Encode(), etag); err != nil {
		return nil, err
	}
	res.Floor, res.Changed = next.Floor, true
	return res, nil
}

// planForget resolves target among gens and returns what the forget
// changes: the HEAD to write (nil: kept from there already).
func planForget(remote, ws string, gens []GenerationRef, h *Head, target string) (*ForgetResult, *Head, error) {
	g, err := resolveGen(gens, h, target)
	if err != nil {
		return nil, nil, err
	}
	res := &ForgetResult{Remote: remote, WS: ws, ID: g.ID, Seq: g.Seq, From: h.Start(),
		OldFloor: h.Floor, Floor: h.Floor, Dropped: g.ID - 1}
	if g.Seq <= h.Start() {
		return res, nil, nil // kept from there already
	}
	res.Generations = g.ID - 1
	if h.Dropped != nil {
		res.Generations -= h.Dropped.Gens
	}
	if g.ID == 1 {
		return nil, nil, fmt.Errorf("%w: %q is g1, the first generation: forget keeps history from a generation and drops those before it", ErrTarget, target)
	}
	next := *h
	next.Floor = max(h.Floor, g.Seq)
	next.Dropped = &Dropped{Gens: g.ID - 1, Below: g.Seq}
	return res, &next, nil
}

// Forget raises the floor of the workspace s ships, as Forget does, but
// under the shipper's own lease: the HEAD write is the session's
// (PutIfMatch with its ETag, ordered with its renewals), made by the
// shipper's goroutine between two ships, so a continuous sync never has
// to stop for it and its later ships keep the higher floor and dropped
// count (they advance the HEAD this wrote). It waits while the shipper
// takes the lease or ships; it fails at once while the shipper backs off
// (ErrRemoteDown) and when it has stopped (ErrShipStopped).
func (s *Shipper) Forget(ctx context.Context, target string) (*ForgetResult, error) {
	type reply struct {
		res *ForgetResult
		err error
	}
	rc := make(chan reply, 1)
	do := func(p *pusher) {
		res, err := p.forget(target)
		rc <- reply{res, err}
	}
	fail := func(err error) (*ForgetResult, error) {
		return nil, fmt.Errorf("forget %s#%s: %w", s.b, s.ws, err)
	}
	for {
		s.mu.Lock()
		state, ch, lastErr, reason := s.state, s.changed, s.lastErr, s.reason
		s.mu.Unlock()
		switch state {
		case ShipBackoff:
			return fail(fmt.Errorf("%w: the continuous sync is backing off: %v", ErrRemoteDown, lastErr))
		case ShipStopped:
			return fail(fmt.Errorf("%w: %v", ErrShipStopped, reason))
		}
		select {
		case s.between <- do:
			r := <-rc // the loop runs do at once
			if r.err != nil {
				return fail(r.err)
			}
			return r.res, nil
		case <-ch:
		case <-s.done:
		case <-ctx.Done():
			return fail(context.Cause(ctx))
		}
	}
}

// forget is Forget's HEAD write by the session holding the lease; it
// runs on the shipper's goroutine, between ships, so HEAD's seq is not
// moving; the renewal is kept out by p.mu.
func (p *pusher) forget(target string) (*ForgetResult, error) {
	h := p.current()
	gens, err := Generations(p.ctx, p.b, p.ws, &h)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost != nil {
		return nil, p.lost
	}
	cur := *p.head // a renewal meanwhile moved only the expiry
	res, next, err := planForget(p.b.String(), p.ws, gens, &cur, target)
	if err != nil || next == nil {
		return res, err
	}
	if err := p.writeHeadLocked(p.ctx, next); err != nil {
		return nil, err
	}
	res.Floor, res.Changed = next.Floor, true
	return res, nil
}

// resolveGen finds the generation target names among gens: gN, or a
// seq that is a generation's.
func resolveGen(gens []GenerationRef, h *Head, target string) (GenerationRef, error) {
	span := "it has no generations"
	if len(gens) > 0 {
		span = fmt.Sprintf("it keeps g%d (seq %d) to g%d (seq %d)", gens[0].ID, gens[0].Seq, gens[len(gens)-1].ID, gens[len(gens)-1].Seq)
	}
	if n, ok := strings.CutPrefix(target, "g"); ok {
		id, err := strconv.Atoi(n)
		if err != nil || id <= 0 || n != strconv.Itoa(id) {
			return GenerationRef{}, fmt.Errorf("%w: %q: want gN (N ≥ 1) or the seq of a generation", ErrTarget, target)
		}
		for _, g := range gens {
			if g.ID == id {
				return g, nil
			}
		}
		return GenerationRef{}, fmt.Errorf("%w: the remote holds no generation g%d; %s", ErrTarget, id, span)
	}
	seq, err := strconv.ParseUint(target, 10, 64)
	if err != nil || seq == 0 || target != strconv.FormatUint(seq, 10) {
		return GenerationRef{}, fmt.Errorf("%w: %q: want gN or the seq of a generation", ErrTarget, target)
	}
	if seq > h.Seq {
		return GenerationRef{}, fmt.Errorf("%w: seq %d is past the remote's head (seq %d)", ErrTarget, seq, h.Seq)
	}
	if seq < h.Start() {
		return GenerationRef{}, fmt.Errorf("%w: seq %d is below what the remote keeps (from seq %d)", ErrTarget, seq, h.Start())
	}
	var before *GenerationRef
	for i, g := range gens {
		if g.Seq == seq {
			return g, nil
		}
		if g.Seq < seq {
			before = &gens[i]
		}
	}
	msg := fmt.Sprintf("seq %d is not a generation (forget keeps history from one); %s", seq, span)
	if before != nil {
		msg = fmt.Sprintf("seq %d is not a generation (forget keeps history from one): g%d (seq %d) is the last before it", seq, before.ID, before.Seq)
	}
	return GenerationRef{}, fmt.Errorf("%w: %s", ErrTarget, msg)
}
