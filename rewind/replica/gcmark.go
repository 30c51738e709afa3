package replica

import (
	"context"
	"fmt"
	"strings"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
)

// The mark of remote GC (gc.go): what a reader of some workspace reads.

// packInfo is one pack under packs/ as the mark sees it.
type packInfo struct {
	id        string
	packBytes int64 // 0: no .pack (an index whose pack is gone)
	idxBytes  int64 // 0: no .idx (a push cut off between the two)
	kind      byte
	entries   []IndexEntry
	live      int   // entries marked live
	pinned    bool  // named by a lazy clone's unexpired pin (gc.go)
	deadBytes int64 // stored bytes of the entries not live
}

// marked is the result of one mark.
type marked struct {
	packs      map[string]*packInfo
	segments   map[string]int64 // every segment key under ws/, with its size
	live       map[string]bool  // live segment keys
	liveObjs   map[cas.Hash]bool
	where      map[cas.Hash]*packInfo // the pack the mark takes each object from
	workspaces int
}

// marker walks every workspace's HEAD.
type marker struct {
	ctx   context.Context
	b     objstore.Backend
	m     *marked
	where map[cas.Hash]*packInfo
	trees map[string]openPack // tree packs read, by id
}

// mark reads every index file, then every workspace's HEAD and the
// segments a reader of it reads (segReader: the tiling from HEAD's Start,
// through a fork's parent up to the fork's seq), and marks live: those
// segments, every object their records reach (chunks, agent states, the
// whole tree of each Root record, walked from the tree packs, each read
// once), and every pack holding a live object (an object in several
// packs makes one live: one avoid does not name, if any). Anything it cannot read
// or that is damaged is an error: GC deletes nothing on a partial mark.
func mark(ctx context.Context, b objstore.Backend, avoid map[string]bool) (*marked, error) {
	k := &marker{ctx: ctx, b: b, where: map[cas.Hash]*packInfo{}, trees: map[string]openPack{},
		m: &marked{packs: map[string]*packInfo{}, segments: map[string]int64{}, live: map[string]bool{}, liveObjs: map[cas.Hash]bool{}}}
	if err := k.listPacks(avoid); err != nil {
		return nil, err
	}
	err := b.List(ctx, "ws/", func(i objstore.Info) error {
		if strings.Contains(i.Key, "/seg/") {
			k.m.segments[i.Key] = i.Size
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	names, err := WorkspaceNames(ctx, b)
	if err != nil {
		return nil, err
	}
	var trees []reach
	data := map[cas.Hash]string{}
	for _, ws := range names {
		h, _, err := ReadHead(ctx, b, ws)
		if err != nil {
			return nil, err
		}
		k.m.workspaces++
		rd := &segReader{ctx: ctx, b: b}
		recs, err := rd.records(ws, h, 1, h.Seq, 0)
		if err != nil {
			return nil, fmt.Errorf("workspace %s: %w", ws, err)
		}
		for _, key := range rd.keys {
			k.m.live[key] = true
		}
		for _, r := range recs {
			from := fmt.Sprintf("%s seq %d", ws, r.Seq)
			note := func(h cas.Hash) {
				if !h.IsZero() {
					data[h] = from
				}
			}
			switch r.Op {
			case journal.OpData:
				for _, c := range r.Chunks {
					note(c.Hash)
				}
			case journal.OpGeneration:
				trees = append(trees, reach{r.Root, from})
				for _, a := range r.Agents {
					note(a.State)
				}
			case journal.OpImport, journal.OpRestore:
				trees = append(trees, reach{r.Root, from})
			case journal.OpAgentState:
				note(r.Root)
			}
		}
	}
	if err := k.walk(trees, data); err != nil {
		return nil, err
	}
	for h, from := range data {
		if err := k.live(h, from); err != nil {
			return nil, err
		}
	}
	k.m.where = k.where
	for _, p := range k.m.packs {
		for _, e := range p.entries {
			if !k.m.liveObjs[e.Hash] || k.where[e.Hash] != p {
				p.deadBytes += int64(e.Stored)
			}
		}
	}
	return k.m, nil
}

// listPacks lists packs/ and reads every index file.
func (k *marker) listPacks(avoid map[string]bool) error {
	get := func(id string) *packInfo {
		p := k.m.packs[id]
		if p == nil {
			p = &packInfo{id: id}
			k.m.packs[id] = p
		}
		return p
	}
	err := k.b.List(k.ctx, "packs/", func(i objstore.Info) error {
		name := strings.TrimPrefix(i.Key, "packs/")
		if id, ok := strings.CutSuffix(name, ".pack"); ok {
			get(id).packBytes = i.Size
		} else if id, ok := strings.CutSuffix(name, ".idx"); ok {
			get(id).idxBytes = i.Size
		}
		return nil
	})
	if err != nil {
		return err
	}
	for id, p := range k.m.packs {
		if p.idxBytes == 0 {
			continue
		}
		data, _, err := k.b.Get(k.ctx, IndexKey(id))
		if err != nil {
			return err
		}
		x, err := DecodeIndex(IndexKey(id), data)
		if err != nil {
			return err
		}
		p.kind, p.entries = x.Kind, x.Entries
		if p.packBytes == 0 {
			continue // no pack to read an object from: nothing here is live
		}
		for _, e := range x.Entries {
			// One pack per object, the same in every run: one no
			// pending list condemns if there is one, then the least id.
			q, ok := k.where[e.Hash]
			if !ok || avoid[q.id] && !avoid[id] || avoid[q.id] == avoid[id] && q.id > id {
				k.where[e.Hash] = p
			}
		}
	}
	return nil
}

// live marks h and the pack the mark takes it from.
func (k *marker) live(h cas.Hash, from string) error {
	p, ok := k.where[h]
	if !ok {
		return fmt.Errorf("%w: object %s (%s) is in no pack index; run fsck --remote", ErrCorrupt, h, from)
	}
	if !k.m.liveObjs[h] {
		k.m.liveObjs[h] = true
		p.live++
	}
	return nil
}

// walk marks the trees under roots, level by level, reading each tree
// pack once; the chunks the file objects name go into data.
func (k *marker) walk(roots []reach, data map[cas.Hash]string) error {
	seen := map[cas.Hash]bool{}
	for len(roots) > 0 {
		var next []reach
		for _, r := range roots {
			if r.h.IsZero() || seen[r.h] {
				continue
			}
			seen[r.h] = true
			if err := k.live(r.h, r.from); err != nil {
				return err
			}
			obj, err := k.object(r.h)
			if err != nil {
				return err
			}
			in, err := cas.DecodeInode(obj)
			if err != nil {
				return fmt.Errorf("%w: inode object %s (%s): %v", ErrCorrupt, r.h, r.from, err)
			}
			for _, e := range in.Entries {
				next = append(next, reach{e.Object, r.from})
			}
			for _, c := range in.Chunks {
				if !c.IsZero() {
					data[c] = r.from
				}
			}
		}
		roots = next
	}
	return nil
}

// object returns inode object h from its pack, read whole once.
func (k *marker) object(h cas.Hash) ([]byte, error) {
	p := k.where[h]
	op, ok := k.trees[p.id]
	if !ok {
		data, _, err := k.b.Get(k.ctx, PackKey(p.id))
		if err != nil {
			return nil, err
		}
		x, err := OpenPack(p.id, data)
		if err != nil {
			return nil, err
		}
		op = openPack{data, x}
		k.trees[p.id] = op
	}
	e, ok := op.x.Find(h)
	if !ok || e.Off+uint64(e.Stored) > uint64(len(op.data)) {
		return nil, fmt.Errorf("%s: %w: object %s is not where %s says", PackKey(p.id), ErrCorrupt, h, IndexKey(p.id))
	}
	return Object(PackKey(p.id), e, op.data[e.Off:e.Off+uint64(e.Stored)])
}
