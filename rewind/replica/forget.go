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
		return nil, &LockedError{Holder: h.Holder, Expires: h.Expires}
	}
	gens, err := Generations(ctx, b, ws, h)
	if err != nil {
		return nil, err
	}
	g, err := resolveGen(gens, h, target)
	if err != nil {
		return nil, err
	}
	res := &ForgetResult{Remote: b.String(), WS: ws, ID: g.ID, Seq: g.Seq, From: h.Start(),
		OldFloor: h.Floor, Floor: h.Floor, Dropped: g.ID - 1}
	if g.Seq <= h.Start() {
		return res, nil // kept from there already
	}
	res.Generations = g.ID - 1
	if h.Dropped != nil {
		res.Generations -= h.Dropped.Gens
	}
	if g.ID == 1 {
		return nil, fmt.Errorf("%w: %q is g1, the first generation: forget keeps history from a generation and drops those before it", ErrTarget, target)
	}
	next := *h
	next.Floor = max(h.Floor, g.Seq)
	next.Dropped = &Dropped{Gens: g.ID - 1, Below: g.Seq}
	if _, err := b.PutIfMatch(ctx, HeadKey(ws), next.Encode(), etag); err != nil {
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
