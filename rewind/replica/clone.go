package replica

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// CloneResult says what a clone fetched and which state it made live.
type CloneResult struct {
	Remote   string `json:"remote"`
	WS       string `json:"ws"`
	Head     uint64 `json:"head"`            // the remote HEAD's seq: the clone's history ends there
	Target   uint64 `json:"target"`          // the seq whose state is live in the clone
	Reset    uint64 `json:"reset"`           // the reset record that made it live (0: the target is head)
	Epoch    uint64 `json:"epoch,omitempty"` // a takeover's new epoch
	Records  int    `json:"records"`
	Segments int    `json:"segments"`
	Packs    int    `json:"packs"`
	Objects  int    `json:"objects"`
	Bytes    int64  `json:"bytes"`
	// A lazy clone's data objects left on the remote (fetched on first
	// read), and their bytes as stored there.
	Lazy          bool  `json:"lazy,omitempty"`
	RemoteObjects int64 `json:"remote_objects,omitempty"`
	RemoteBytes   int64 `json:"remote_bytes,omitempty"`
	// PinnedPacks: the data packs the lazy clone's pin holds against
	// remote GC (pins.go); PinError: why it could not be written (the
	// clone is whole and usable; gc may delete what it has not fetched
	// once generations it reads are forgotten).
	PinnedPacks int    `json:"pinned_packs,omitempty"`
	PinError    string `json:"pin_error,omitempty"`
	// Requests: every request the clone made to the remote.
	Requests int64 `json:"requests"`
}

// Clone makes a new store in dir (a Badger directory, as journal.Open
// takes; neither it nor its log or manifest may exist) holding
// workspace ws's history as the remote's HEAD covers it: every record
// under its original seq, and every object those records reach. Then the
// state target names (any rewind target: a seq, gN, -N, a label, a
// branch; "" is head) becomes live the way an offline rewind does, by a
// reset record appended after the remote's records. On failure nothing
// is left in dir.
func Clone(ctx context.Context, b objstore.Backend, ws, dir, target string) (res *CloneResult, err error) {
	return clone(ctx, b, ws, dir, target, false, false)
}

// CloneLazy is Clone that fetches the tree packs whole and leaves the
// data objects on the remote: the store records where each is (lazy.go)
// and OpenLazy, on each open, fetches one on its first read.
func CloneLazy(ctx context.Context, b objstore.Backend, ws, dir, target string) (res *CloneResult, err error) {
	return clone(ctx, b, ws, dir, target, false, true)
}

// clone is Clone; take: take the workspace over (take.go) once the
// records are written.
func clone(ctx context.Context, b objstore.Backend, ws, dir, target string, take, lazy bool) (res *CloneResult, err error) {
	if err := CheckName(ws); err != nil {
		return nil, fmt.Errorf("clone: workspace %w", err)
	}
	for _, p := range []string{dir, journal.LogPath(dir), journal.ManifestPath(dir), LazyPath(dir)} {
		if _, err := os.Lstat(p); err == nil {
			return nil, fmt.Errorf("clone: %s exists; clone makes a new store", p)
		}
	}
	cb := &counting{Backend: b} // shipstat.go
	b = cb
	defer func() {
		if res != nil {
			res.Requests = cb.requests.Load()
		}
		if err != nil {
			for _, p := range []string{dir, journal.LogPath(dir), journal.ManifestPath(dir), LazyPath(dir)} {
				_ = os.RemoveAll(p)
			}
			err = fmt.Errorf("clone %s#%s: %w", b, ws, err)
		}
	}()
	c := &cloner{ctx: ctx, b: b, ws: ws, dir: dir, lazy: lazy, vcs: map[cas.Hash]bool{}, res: &CloneResult{Remote: b.String(), WS: ws, Lazy: lazy}}
	defer func() {
		if err != nil && c.res.PinnedPacks > 0 {
			_ = dropPin(context.WithoutCancel(ctx), b, c.pinStore) // the store it held for is gone
		}
	}()
	cfg, err := remoteConfig(ctx, b, false)
	if err != nil {
		return nil, err
	}
	recs, err := c.records()
	if err != nil {
		return nil, err
	}
	if err := c.indexes(); err != nil {
		return nil, err
	}
	j, err := journal.Open(dir, journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := j.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	c.j = j
	if c.loc, err = newLocal(j, cfg); err != nil {
		return nil, err
	}
	c.cfg = cfg
	if err := c.objects(recs); err != nil {
		return nil, err
	}
	if lazy {
		// Replaying records (a truncation inside a chunk) may read data.
		lz, err := OpenLazy(ctx, j, dir, LazyOptions{Backend: b, Fresh: true})
		if err != nil {
			return nil, err
		}
		defer lz.Close()
		if err := lz.FetchNow(ctx, c.eager); err != nil {
			return nil, err
		}
		if lz != nil && lz.remainObjs.Load() == 0 {
			if err := lz.finish(); err != nil {
				return nil, err
			}
		}
		st := lz.Stats()
		c.res.Objects += int(st.PrefetchObjs)
		c.res.Bytes += st.PrefetchBytes
		c.res.RemoteObjects, c.res.RemoteBytes = st.RemoteObjects, st.RemoteBytes
	}
	if err := c.write(recs); err != nil {
		return nil, err
	}
	if _, err := pullNames(ctx, b, c.loc, ws, c.head); err != nil {
		return nil, err
	}
	// Fetch continues from here (before the reset record, if any,
	// which makes the clone diverge from the remote).
	if err := c.loc.setFetched(ws, c.head.Seq); err != nil {
		return nil, err
	}
	if take {
		if err := c.takeOver(); err != nil {
			return nil, err
		}
	} else if unheldFork(c.head) {
		// A clone of a fork no store writes yet: its first push claims
		// the fork (lease.go), from the seq HEAD covers.
		if err := c.loc.setShipped(ws, shipped{Seq: c.head.Seq, ETag: c.etag, Epoch: c.head.Epoch()}); err != nil {
			return nil, err
		}
	}
	if err := c.makeLive(target); err != nil {
		return nil, err
	}
	return c.res, nil
}

type cloner struct {
	ctx  context.Context
	dir  string
	lazy bool // leave the data objects on the remote (lazy.go)
	cfg  *Config
	// dataPacks: a lazy clone's data pack indexes (not in where).
	dataPacks []dataPack
	// vcs: the inode objects under a .git directory, but pack files; a
	// lazy clone fetches their chunks (eager) at once: git status reads
	// the index and the commit and tree objects, which a loose object's
	// name does not tell from a blob (without this, 19 demand requests
	// in TestLazyClone). With loose objects that is most of .git, which
	// may be most of the data (docs/benchmarks.md, "Remote").
	vcs   map[cas.Hash]bool
	eager []cas.Hash
	// pinStore: the store id a lazy clone's pin was written for.
	pinStore string
	b        objstore.Backend
	ws       string
	j        *journal.Journal
	head     *Head
	etag     string // HEAD's, as read
	res      *CloneResult
	// where: every object the index files name, and the pack holding it.
	where map[cas.Hash]located
	loc   local
	trees map[string]openPack // tree packs read so far
	// ixCache: index files decoded by an earlier fetch (nil: none);
	// an index file never changes under its key.
	ixCache IndexCache
	lz      *Lazy // a fetch into a lazy store: new data stays remote (lazyextra.go)
}

type located struct {
	pack string
	e    IndexEntry
}

// records reads HEAD first (invariant 4), then the segments it covers.
func (c *cloner) records() ([]*journal.Record, error) {
	key := HeadKey(c.ws)
	data, info, err := c.b.Get(c.ctx, key)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, fmt.Errorf("the remote has no workspace %s", c.ws)
	}
	if err != nil {
		return nil, err
	}
	c.etag = info.ETag
	if c.head, err = DecodeHead(key, data); err != nil {
		return nil, err
	}
	if c.head.Seq == 0 {
		return nil, fmt.Errorf("workspace %s has no records yet", c.ws)
	}
	c.res.Head = c.head.Seq
	rd := &segReader{ctx: c.ctx, b: c.b}
	recs, err := rd.records(c.ws, c.head, 1, c.head.Seq, 0)
	c.res.Segments += rd.segments
	c.res.Bytes += rd.bytes
	if err != nil {
		return nil, err
	}
	c.res.Records = len(recs)
	return recs, nil
}

type seg struct {
	key         string
	first, last uint64
}

// cover picks segments tiling from..to, the longest first at each seq
// (segments of one epoch hold the same records for a seq, so any tiling
// is as good as another), backtracking from a dead end.
func cover(segs []seg, from, to uint64) []seg { return coverPast(segs, from, to, false) }

// coverPast is cover; past: the last segment may run past to (a fork
// point inside a parent's segment).
func coverPast(segs []seg, from, to uint64, past bool) []seg {
	by := map[uint64][]seg{}
	for _, s := range segs {
		by[s.first] = append(by[s.first], s)
	}
	for _, l := range by {
		slices.SortFunc(l, func(a, b seg) int { return cmp.Compare(b.last, a.last) })
	}
	dead := map[uint64]bool{}
	var walk func(at uint64) []seg
	walk = func(at uint64) []seg {
		if at == to+1 {
			return []seg{}
		}
		if dead[at] {
			return nil
		}
		for _, s := range by[at] {
			if past && s.last > to {
				return []seg{s} // past the end: a fork's point inside it
			}
			if rest := walk(s.last + 1); rest != nil {
				return append([]seg{s}, rest...)
			}
		}
		dead[at] = true
		return nil
	}
	return walk(from)
}

// objects fetches what the records reach and the new store lacks: the
// trees level by level (an inode object names its children), then the
// data, a pack at a time.
func (c *cloner) objects(recs []*journal.Record) error {
	var trees []cas.Hash
	data := map[cas.Hash]bool{}
	for _, r := range recs {
		switch r.Op {
		case journal.OpData:
			for _, ch := range r.Chunks {
				data[ch.Hash] = true
			}
		case journal.OpGeneration:
			trees = append(trees, r.Root)
			for _, a := range r.Agents {
				data[a.State] = true
			}
		case journal.OpImport, journal.OpRestore:
			trees = append(trees, r.Root)
		case journal.OpAgentState:
			data[r.Root] = true
		}
	}
	seen := map[cas.Hash]bool{}
	for len(trees) > 0 {
		var level []cas.Hash
		for _, h := range trees {
			if !h.IsZero() && !seen[h] {
				seen[h] = true
				level = append(level, h)
			}
		}
		trees = nil
		err := c.fetch(level, func(b cas.Blob) error {
			in, err := cas.DecodeInode(b.Data)
			if err != nil {
				return fmt.Errorf("%w: inode object %s: %v", ErrCorrupt, b.Hash, err)
			}
			under := c.vcs[b.Hash]
			for _, e := range in.Entries {
				trees = append(trees, e.Object)
				if c.lazy && (e.Name == ".git" || under && !strings.HasSuffix(e.Name, ".pack")) {
					c.vcs[e.Object] = true
				}
			}
			for _, ch := range in.Chunks {
				data[ch] = true
				if under {
					c.eager = append(c.eager, ch)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	delete(data, cas.Zero)
	left := false
	if c.lz != nil {
		var err error
		if left, err = c.leaveNew(data); err != nil {
			return err
		}
	}
	if c.lazy {
		if err := c.leave(data); err != nil {
			return err
		}
	} else if !left {
		if err := c.fetch(slices.Collect(maps.Keys(data)), nil); err != nil {
			return err
		}
	}
	// The remote holds all of it, each tree whole: a push from the clone
	// (a new workspace in the same remote) sends none of it again.
	// Every object an index file names is on the remote (its subtree
	// maybe not: a push cut off may have left a tree pack without the
	// packs of what it names), so a push from the clone (to a fork, or
	// as a new workspace) never sends one again.
	held := make(map[cas.Hash]byte, len(c.where)+len(seen))
	for h := range c.where {
		held[h] = holdsData
	}
	for h := range data {
		held[h] = holdsData
	}
	for h := range seen {
		held[h] = holdsTree | holdsData
	}
	return c.loc.markHeld(held)
}

// fetch stores the objects hs names that the store lacks, reading each
// pack that holds some of them once, whole, and verifying it and every
// object; each (stored or not) is passed to visit when set.
func (c *cloner) fetch(hs []cas.Hash, visit func(cas.Blob) error) error {
	objs := c.j.Objects()
	byPack := map[string][]IndexEntry{}
	for _, h := range hs {
		if visit == nil {
			if ok, err := objs.Has(h); err != nil || ok {
				if err != nil {
					return err
				}
				continue
			}
			// A lazy store's object stays on the remote (a fetch into
			// a lazy clone).
			if on, err := objs.OnRemote(h); err != nil || on {
				if err != nil {
					return err
				}
				continue
			}
		} else if data, err := objs.Get(h); err == nil {
			if err := visit(cas.Blob{Hash: h, Data: data}); err != nil {
				return err
			}
			continue
		} else if !errors.Is(err, cas.ErrNotFound) {
			return err
		}
		l, ok := c.where[h]
		if !ok {
			return fmt.Errorf("%w: object %s is in no pack index", ErrCorrupt, h)
		}
		byPack[l.pack] = append(byPack[l.pack], l.e)
	}
	for _, id := range slices.Sorted(maps.Keys(byPack)) {
		pack, x, err := c.pack(id)
		if err != nil {
			return err
		}
		var blobs []cas.Blob
		for _, e := range byPack[id] {
			in, ok := x.Find(e.Hash)
			if !ok || in != e {
				return fmt.Errorf("%s: %w: object %s is not where %s says", PackKey(id), ErrCorrupt, e.Hash, IndexKey(id))
			}
			data, err := Object(PackKey(id), e, pack[e.Off:e.Off+uint64(e.Stored)])
			if err != nil {
				return err
			}
			blobs = append(blobs, cas.Blob{Hash: e.Hash, Data: data})
		}
		if err := objs.PutBatch(blobs); err != nil {
			return err
		}
		c.res.Objects += len(blobs)
		for _, b := range blobs {
			if visit != nil {
				if err := visit(b); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// pack fetches and checks a whole pack. Tree packs are kept for the
// clone's length: the tree walk reads them level by level, and they are
// small next to the data.
func (c *cloner) pack(id string) ([]byte, *Index, error) {
	if p, ok := c.trees[id]; ok {
		return p.data, p.x, nil
	}
	data, _, err := c.b.Get(c.ctx, PackKey(id))
	if err != nil {
		return nil, nil, err
	}
	x, err := OpenPack(id, data)
	if err != nil {
		return nil, nil, err
	}
	c.res.Packs++
	c.res.Bytes += int64(len(data))
	if x.Kind == KindTree {
		if c.trees == nil {
			c.trees = map[string]openPack{}
		}
		c.trees[id] = openPack{data, x}
	}
	return data, x, nil
}

type openPack struct {
	data []byte
	x    *Index
}

// write appends the records under their own seqs (their objects are
// stored already: a record is never durable before what it names), sets
// the floor and indexes the generations.
func (c *cloner) write(recs []*journal.Record) error {
	var last *journal.Pending
	for _, r := range recs {
		p := c.j.EnqueueAt(r, nil)
		if err := p.Refused(); err != nil {
			return fmt.Errorf("seq %d: %w", r.Seq, err)
		}
		last = p
	}
	if last != nil {
		if err := last.Wait(); err != nil {
			return err
		}
	}
	if err := c.j.Sync(); err != nil {
		return err
	}
	if c.head.Floor > 1 {
		if err := c.j.RaiseFloor(c.head.Floor); err != nil {
			return err
		}
	}
	if d := c.head.Dropped; d != nil {
		if err := rewind.SetDroppedGenerations(c.j, d.Gens, d.Below); err != nil {
			return err
		}
	}
	return rewind.Reindex(c.j)
}

// makeLive makes the state target names live: a reset record to it,
// unless it is head's.
func (c *cloner) makeLive(target string) error {
	seq := c.j.Head()
	if target != "" {
		var err error
		if seq, err = rewind.Resolve(c.j, target); err != nil {
			return err
		}
	}
	c.res.Target = seq
	if seq == c.j.Head() {
		return nil
	}
	r, err := rewind.RewindStoreAs(c.j, seq, false, "clone")
	if err != nil {
		return err
	}
	c.res.Reset = r.Reset
	return nil
}
