package rewind

import (
	"errors"
	"fmt"
	"sort"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// FsckReport is what Fsck found. A store is sound when Damaged is false.
type FsckReport struct {
	Store       []string    `json:"store_damage,omitempty"` // found when opening: logs, tables, durable marks
	Objects     int         `json:"objects"`                // objects re-hashed
	ObjectBytes int64       `json:"object_bytes"`
	BadObjects  []BadObject `json:"bad_objects,omitempty"`
	Records     int         `json:"records"` // journal records decoded
	BadRecords  []string    `json:"bad_records,omitempty"`
	Generations []GenCheck  `json:"generations"`
	Head        GenCheck    `json:"head"`
	// OnRemote counts the chunks the retained trees reach that a lazy
	// clone's store left on its remote (fetched on first read): not
	// damage. A missing chunk no lazy index names still is.
	OnRemote int `json:"on_remote,omitempty"`
	remote   map[cas.Hash]bool
	objs     *cas.Badger
	damaged  map[cas.Hash]error
	memo     map[cas.Hash][]PathDamage
	store    cas.Store
	idx      indexer           // nil: the store cannot tell (see unindexed)
	fresh    map[cas.Hash]bool // the head's objects not stored (its Root)
}

// indexer is cas.Badger's Indexed: fsck opens a store to salvage from it,
// reading the whole log, and must still report an object the tree needs
// that a mount would not find.
type indexer interface{ Indexed(cas.Hash) (bool, error) }

// errUnindexed: the object is in the log, not in the index.
var errUnindexed = errors.New("in the log but not in the index, so a mount cannot read it (swept by the collector, or lost with a damaged table)")

// unindexed reports an object a retained tree needs that only a salvage
// read of the log finds.
func (r *FsckReport) unindexed(h cas.Hash) error {
	if r.idx == nil || r.fresh[h] {
		return nil
	}
	ok, err := r.idx.Indexed(h)
	if err == nil && !ok {
		err = errUnindexed
	}
	return err
}

// BadObject is a stored object whose bytes do not hash to its name, or
// that cannot be read.
type BadObject struct {
	Hash  string `json:"hash"`
	Error string `json:"error"`
}

// GenCheck is one retained generation (or the head state): whether it
// reconstructs, and which paths in it cannot be read.
type GenCheck struct {
	ID      int          `json:"id,omitempty"` // gN, 0 if not indexed
	Seq     uint64       `json:"seq"`
	Root    string       `json:"root,omitempty"`
	Error   string       `json:"error,omitempty"` // it does not reconstruct at all
	Damaged []PathDamage `json:"damaged,omitempty"`
}

// PathDamage names one unreadable path of a state and why.
type PathDamage struct {
	Path    string `json:"path"`
	Problem string `json:"problem"`
}

// Sound reports whether the state reconstructs with every path readable.
func (g *GenCheck) Sound() bool { return g.Error == "" && len(g.Damaged) == 0 }

// Damaged reports whether fsck found anything wrong.
func (r *FsckReport) Damaged() bool {
	if len(r.Store) > 0 || len(r.BadObjects) > 0 || len(r.BadRecords) > 0 || !r.Head.Sound() {
		return true
	}
	for i := range r.Generations {
		if !r.Generations[i].Sound() {
			return true
		}
	}
	return false
}

// Fsck checks a store (invariant 7): it re-hashes every stored object,
// decodes every retained record, walks the tree of every retained
// generation naming each path whose inode object or chunk is missing or
// damaged, and reconstructs the head state. It reads only; open the
// journal read-only (with journal.Options.Damaged to check a store Open
// refuses). An error means the check itself could not run.
func Fsck(j *journal.Journal) (*FsckReport, error) {
	r := &FsckReport{Store: j.Damage(), damaged: map[cas.Hash]error{}, memo: map[cas.Hash][]PathDamage{}, store: j.Objects(),
		objs: j.Objects(), remote: map[cas.Hash]bool{}}
	objs := j.Objects()
	r.idx = objs
	var hashes []cas.Hash
	if err := objs.Each(func(h cas.Hash, _ int64) error {
		hashes = append(hashes, h)
		return nil
	}); err != nil {
		r.Store = append(r.Store, err.Error())
	}
	for _, h := range hashes {
		data, err := objs.Get(h)
		r.Objects++
		if err != nil {
			r.damaged[h] = err
			r.BadObjects = append(r.BadObjects, BadObject{Hash: h.String(), Error: err.Error()})
			continue
		}
		r.ObjectBytes += int64(len(data))
	}

	ids := map[uint64]int{}
	if tl, err := Timeline(j); err == nil {
		for _, g := range tl {
			ids[g.Rec.Seq] = g.ID
		}
	}
	var gens []*journal.Record
	err := j.Iter(0, func(rec *journal.Record) error {
		r.Records++
		if rec.Op == journal.OpGeneration {
			gens = append(gens, rec)
		}
		return nil
	})
	if err != nil {
		r.BadRecords = append(r.BadRecords, err.Error())
	}
	for _, g := range gens {
		c := GenCheck{ID: ids[g.Seq], Seq: g.Seq, Root: g.Root.String()}
		c.Damaged = r.paths(g.Root)
		r.Generations = append(r.Generations, c)
	}

	r.Head = GenCheck{Seq: j.Head()}
	t, err := Reconstruct(j, j.Head())
	if err == nil {
		root, blobs, rerr := t.Root()
		if rerr != nil {
			err = rerr
		} else {
			r.Head.Root = root.String()
			r.store = NewOverlay(objs, blobs)
			r.fresh = make(map[cas.Hash]bool, len(blobs))
			for _, b := range blobs {
				r.fresh[b.Hash] = true
			}
			r.Head.Damaged = r.paths(root)
		}
	}
	if err != nil && !errors.Is(err, ErrNoState) {
		r.Head.Error = err.Error()
	}
	return r, nil
}

// paths returns the damaged paths of the tree under root, sorted.
func (r *FsckReport) paths(root cas.Hash) []PathDamage {
	out := r.inode(root)
	res := make([]PathDamage, len(out))
	for i, d := range out {
		res[i] = d
		if res[i].Path == "" {
			res[i].Path = "/"
		}
	}
	sort.Slice(res, func(a, b int) bool { return res[a].Path < res[b].Path })
	return res
}

// inode returns the damage under the inode object h, paths relative to it
// ("" for h itself, "/name/..." below). Results are kept per object, so a
// subtree shared by many generations is checked once.
func (r *FsckReport) inode(h cas.Hash) []PathDamage {
	if d, ok := r.memo[h]; ok {
		return d
	}
	r.memo[h] = nil // a cycle (only in a forged store) ends here
	var out []PathDamage
	data, err := r.store.Get(h)
	var in *cas.Inode
	if err == nil {
		in, err = cas.DecodeInode(data)
	}
	if err != nil {
		out = append(out, PathDamage{Problem: fmt.Sprintf("inode object %s: %v", h.Short(), err)})
		r.memo[h] = out
		return out
	}
	if err := r.unindexed(h); err != nil {
		out = append(out, PathDamage{Problem: fmt.Sprintf("inode object %s: %v", h.Short(), err)})
	}
	bad := 0
	var first string
	for i, c := range in.Chunks {
		if c.IsZero() {
			continue
		}
		if err := r.chunk(c); err != nil {
			if bad == 0 {
				first = fmt.Sprintf("chunk %d (bytes %d..) %s: %v", i, uint64(i)*cas.ChunkSize, c.Short(), err)
			}
			bad++
		}
	}
	if bad > 0 {
		if bad > 1 {
			first += fmt.Sprintf(", and %d more chunks", bad-1)
		}
		out = append(out, PathDamage{Problem: first})
	}
	for _, e := range in.Entries {
		for _, d := range r.inode(e.Object) {
			out = append(out, PathDamage{Path: "/" + e.Name + d.Path, Problem: d.Problem})
		}
	}
	r.memo[h] = out
	return out
}

// chunk reports a chunk that is damaged (found by the re-hash pass) or
// missing.
func (r *FsckReport) chunk(c cas.Hash) error {
	if err, ok := r.damaged[c]; ok {
		return err
	}
	ok, err := r.store.Has(c)
	if err != nil {
		return err
	}
	if !ok {
		if on, err := r.objs.OnRemote(c); err != nil {
			return err
		} else if on {
			if !r.remote[c] {
				r.remote[c] = true
				r.OnRemote++
			}
			return nil
		}
		return cas.ErrNotFound
	}
	return r.unindexed(c)
}
