package replica

import (
	"context"
	"maps"
	"slices"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
)

// Repacking (the package doc, "Remote GC"). A pack stays while any of
// its objects is live, so after forget --remote most packs hold some
// dead bytes and whole-pack deletion frees little. A run repacks each
// pack whose dead bytes are at least half of what it stores (and at
// least repackMinDead): it copies
// the pack's live objects (those the mark takes from it) into new packs
// of the same kind, each written before its index (invariant 1), and
// condemns the old pack in the run's list. The next run's mark takes
// those objects from the new packs (it avoids packs a pending list
// names), so once the grace has passed the old pack is dead and deleted
// like any other. An object that was dead at the repack and is reached
// again by a push that deduplicated against the old pack keeps the old
// pack live (guard b) and it is revived. A pinned pack (pins.go) or one
// a pending list already names is never repacked.

const (
	// repackPackSize is the bytes of objects per pack a repack writes
	// (push's default).
	repackPackSize = 8 << 20
	// repackMinDead: a pack with fewer dead bytes is left as it is;
	// rewriting it would cost requests and gain next to nothing.
	repackMinDead = 256 << 10
)

// repackable reports whether p is worth repacking: kept for live
// objects, whole (pack and index), not pinned, at least half dead, and
// by at least repackMinDead.
func repackable(p *packInfo) bool {
	if p.live == 0 || p.pinned || p.packBytes == 0 || p.idxBytes == 0 {
		return false
	}
	var stored int64
	for _, e := range p.entries {
		stored += int64(e.Stored)
	}
	return p.deadBytes >= repackMinDead && 2*p.deadBytes >= stored
}

// repacker writes the live objects of the packs it is given into new
// packs, one kind at a time.
type repacker struct {
	ctx     context.Context
	b       objstore.Backend
	m       *marked
	pending map[byte][]cas.Blob
	size    map[byte]int
	res     *GCResult
}

// repack copies the live objects of the packs ids (each repackable)
// into new packs; when it returns nil every new pack and index is
// written, and the caller condemns ids.
func repack(ctx context.Context, b objstore.Backend, m *marked, ids []string, res *GCResult) error {
	r := &repacker{ctx: ctx, b: b, m: m, pending: map[byte][]cas.Blob{}, size: map[byte]int{}, res: res}
	for _, id := range ids {
		if err := r.copy(m.packs[id]); err != nil {
			return err
		}
	}
	for _, kind := range slices.Sorted(maps.Keys(r.pending)) {
		if err := r.flush(kind); err != nil {
			return err
		}
	}
	return nil
}

// copy reads pack p whole (checked), and queues the objects the mark
// takes from it.
func (r *repacker) copy(p *packInfo) error {
	data, _, err := r.b.Get(r.ctx, PackKey(p.id))
	if err != nil {
		return err
	}
	x, err := OpenPack(p.id, data)
	if err != nil {
		return err
	}
	for _, e := range x.Entries {
		if !r.m.liveObjs[e.Hash] || r.m.where[e.Hash] != p {
			continue
		}
		obj, err := Object(PackKey(p.id), e, data[e.Off:e.Off+uint64(e.Stored)])
		if err != nil {
			return err
		}
		r.pending[x.Kind] = append(r.pending[x.Kind], cas.Blob{Hash: e.Hash, Data: obj})
		r.size[x.Kind] += len(obj)
		r.res.Repacked.LiveBytes += int64(e.Stored)
		if r.size[x.Kind] >= repackPackSize {
			if err := r.flush(x.Kind); err != nil {
				return err
			}
		}
	}
	r.res.Repacked.Packs++
	r.res.Repacked.PackBytes += p.packBytes + p.idxBytes
	return nil
}

// flush writes the queued objects of kind as one pack, then its index.
func (r *repacker) flush(kind byte) error {
	blobs := r.pending[kind]
	if len(blobs) == 0 {
		return nil
	}
	pack, idx, id, err := BuildPack(kind, blobs)
	if err != nil {
		return err
	}
	if err := r.b.Put(r.ctx, PackKey(id), pack); err != nil {
		return err
	}
	if err := r.b.Put(r.ctx, IndexKey(id), idx); err != nil {
		return err
	}
	r.res.Repacked.Written++
	r.res.Repacked.WrittenBytes += int64(len(pack) + len(idx))
	r.pending[kind], r.size[kind] = nil, 0
	return nil
}

// RepackSet says what a run repacked: packs (and their bytes) whose
// live objects it copied and condemned, the live objects' stored bytes,
// and the new packs it wrote.
type RepackSet struct {
	Packs        int   `json:"packs"`
	PackBytes    int64 `json:"pack_bytes"`
	LiveBytes    int64 `json:"live_bytes"`
	Written      int   `json:"written"`
	WrittenBytes int64 `json:"written_bytes"`
}
