package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// forkHolder prefixes the store id of the placeholder holder of a fork
// no store has written yet.
const forkHolder = "fork-"

// ForkResult says what a fork made.
type ForkResult struct {
	Remote string `json:"remote"`
	WS     string `json:"ws"`     // the new workspace
	Parent string `json:"parent"` // the workspace it forks
	Seq    uint64 `json:"seq"`    // the parent's seq it starts from
}

// Fork makes workspace ws on the remote a fork of parent at seq (0: the
// parent's head): its HEAD names the parent and the seq, and nothing is
// copied. A clone of ws reads the parent's segments up to seq (by the
// parent's epochs, which never change below its HEAD's seq) and then
// ws's own; the packs are the remote's, shared. The new HEAD is held by
// no store (its holder is a placeholder, its lease expired): the first
// push from a clone of ws (or a clone --take) makes a store its writer,
// in epoch 2.
func Fork(ctx context.Context, b objstore.Backend, parent string, seq uint64, ws string) (*ForkResult, error) {
	for _, n := range []string{parent, ws} {
		if err := CheckName(n); err != nil {
			return nil, fmt.Errorf("fork: workspace %w", err)
		}
	}
	if parent == ws {
		return nil, fmt.Errorf("fork: the new workspace needs a name of its own (not %s)", ws)
	}
	fail := func(err error) (*ForkResult, error) {
		return nil, fmt.Errorf("fork %s#%s: %w", b, parent, err)
	}
	if _, err := remoteConfig(ctx, b, false); err != nil {
		return fail(err)
	}
	key := HeadKey(parent)
	data, _, err := b.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotExist) {
		return fail(fmt.Errorf("the remote has no workspace %s", parent))
	}
	if err != nil {
		return fail(err)
	}
	ph, err := DecodeHead(key, data)
	if err != nil {
		return fail(err)
	}
	if seq == 0 {
		seq = ph.Seq
	}
	if seq == 0 || seq > ph.Seq || seq < ph.Floor {
		return fail(fmt.Errorf("seq %d is not on the remote: %s holds seqs %d-%d", seq, parent, ph.Floor, ph.Seq))
	}
	now, err := b.Now(ctx)
	if err != nil {
		return fail(err)
	}
	host, err := os.Hostname()
	if err != nil {
		return fail(err)
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fail(err)
	}
	h := &Head{Format: Format, Seq: seq, Floor: ph.Floor, Epochs: []Epoch{{Epoch: 1, First: 1}},
		Holder:  Holder{Host: host, Pid: os.Getpid(), Store: forkHolder + hex.EncodeToString(id[:])},
		Expires: now.UTC().Round(0), Parent: &Parent{WS: parent, Seq: seq}}
	if d := ph.Dropped; d != nil && d.Below <= seq+1 {
		h.Dropped = d
	}
	if _, err := b.PutIfAbsent(ctx, HeadKey(ws), h.Encode()); errors.Is(err, objstore.ErrPrecondition) {
		return fail(fmt.Errorf("workspace %s exists already", ws))
	} else if err != nil {
		return fail(err)
	}
	return &ForkResult{Remote: b.String(), WS: ws, Parent: parent, Seq: seq}, nil
}

// ForkAt is Fork at the state target names in parent (any rewind
// target: a seq, gN, -N, a label; "" is parent's head), resolved as a
// clone of parent would resolve it: against parent's records on the
// remote, read into a journal of records alone (no object is fetched)
// in a temporary directory.
func ForkAt(ctx context.Context, b objstore.Backend, parent, target, ws string) (*ForkResult, error) {
	if target == "" {
		return Fork(ctx, b, parent, 0, ws)
	}
	if n, err := strconv.ParseUint(target, 10, 64); err == nil {
		if n == 0 {
			return nil, fmt.Errorf("fork: %w: seq 0 names no state (the first is 1)", rewind.ErrTarget)
		}
		return Fork(ctx, b, parent, n, ws)
	}
	if err := CheckName(parent); err != nil {
		return nil, fmt.Errorf("fork: workspace %w", err)
	}
	seq, err := resolveRemote(ctx, b, parent, target)
	if err != nil {
		return nil, fmt.Errorf("fork %s#%s@%s: %w", b, parent, target, err)
	}
	return Fork(ctx, b, parent, seq, ws)
}

// resolveRemote resolves target against workspace ws's records as its
// HEAD covers them.
func resolveRemote(ctx context.Context, b objstore.Backend, ws, target string) (seq uint64, err error) {
	cfg, err := remoteConfig(ctx, b, false)
	if err != nil {
		return 0, err
	}
	h, _, err := ReadHead(ctx, b, ws)
	if err != nil {
		return 0, err
	}
	recs, _, err := segmentRecords(ctx, b, ws, h, 1)
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "reynfs-resolve-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	j, err := journal.Open(filepath.Join(dir, "store"), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := j.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	c := &cloner{ctx: ctx, b: b, ws: ws, j: j, head: h}
	if err := c.write(recs); err != nil {
		return 0, err
	}
	loc, err := newLocal(j, cfg)
	if err != nil {
		return 0, err
	}
	if _, err := pullNames(ctx, b, loc, ws, h); err != nil { // a branch name is a target too
		return 0, err
	}
	return rewind.Resolve(j, target)
}
