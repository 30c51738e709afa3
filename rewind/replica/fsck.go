package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
)

// FsckReport is what Fsck found: counts of what it re-read and one line
// per problem, each naming the key it is about.
type FsckReport struct {
	Remote     string   `json:"remote"`
	Workspaces int      `json:"workspaces"`
	Segments   int      `json:"segments"`
	Records    int      `json:"records"`
	Packs      int      `json:"packs"`
	Indexes    int      `json:"indexes"`
	Objects    int      `json:"objects"` // re-hashed, in the packs read
	Bytes      int64    `json:"bytes"`   // read from the remote
	Problems   []string `json:"problems"`
}

// Damaged reports whether Fsck found a problem.
func (r *FsckReport) Damaged() bool { return len(r.Problems) > 0 }

// maxMissing caps the lines naming objects in no index; the rest are
// counted on one line.
const maxMissing = 20

// Fsck re-reads and re-hashes what every workspace's HEAD reaches (ws:
// only that workspace's): HEAD, the segments (checksums, and that those
// of HEAD's epochs tile 1..HEAD's seq), every pack holding an object the
// records reach (whole, once: its checksum, its index against
// packs/<id>.idx, every object's hash) and that every object reachable
// from the records (chunks, agent states, and the trees of Root records
// walked) is in some index. Without ws every pack and index under
// packs/ is checked, whether reached or not. It reads through b only
// and changes nothing. An error is returned only when the remote cannot
// be checked at all (no reynfs remote there, the server failing).
func Fsck(ctx context.Context, b objstore.Backend, ws string) (*FsckReport, error) {
	if ws != "" {
		if err := CheckName(ws); err != nil {
			return nil, fmt.Errorf("fsck: workspace %w", err)
		}
	}
	f := &fscker{ctx: ctx, b: b, r: &FsckReport{Remote: b.String(), Problems: []string{}},
		packs: map[string]*checkedPack{}, idx: map[string][]byte{}, where: map[cas.Hash]string{},
		reached: map[cas.Hash]string{}}
	if err := f.run(ws); err != nil {
		return nil, fmt.Errorf("fsck %s: %w", b, err)
	}
	return f.r, nil
}

type fscker struct {
	ctx context.Context
	b   objstore.Backend
	r   *FsckReport
	// idx: every index file's bytes by pack id; where: the pack whose
	// index names an object first.
	idx   map[string][]byte
	where map[cas.Hash]string
	packs map[string]*checkedPack
	// reached: an object the records reach, and where it was reached from.
	reached map[cas.Hash]string
	trees   []reach
	listed  map[string]bool // packs/<id>.pack keys listed
	missing int
}

type reach struct {
	h    cas.Hash
	from string
}

// checkedPack is a pack read once: sound, and for a tree pack the
// children of each inode object.
type checkedPack struct {
	sound    bool
	children map[cas.Hash][]cas.Hash
	chunks   map[cas.Hash][]cas.Hash
}

func (f *fscker) problem(format string, args ...any) {
	f.r.Problems = append(f.r.Problems, oneLine(fmt.Sprintf(format, args...)))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (f *fscker) run(ws string) error {
	data, _, err := f.b.Get(f.ctx, ConfigKey)
	if errors.Is(err, objstore.ErrNotExist) {
		return fmt.Errorf("holds no reynfs remote (no %s)", ConfigKey)
	}
	if err != nil {
		return err
	}
	f.r.Bytes += int64(len(data))
	if _, err := DecodeConfig(data); err != nil {
		f.problem("%v", err)
	}
	names := []string{ws}
	if ws == "" {
		if names, err = f.workspaces(); err != nil {
			return err
		}
	}
	// A fork's records up to its seq are its parent's: checking one
	// workspace checks the forks it starts from too.
	seen := map[string]bool{}
	for i := 0; i < len(names); i++ {
		if seen[names[i]] {
			continue
		}
		seen[names[i]] = true
		parent, err := f.workspace(names[i])
		if err != nil {
			return err
		}
		if parent != "" {
			names = append(names, parent)
		}
	}
	if err := f.indexes(); err != nil {
		return err
	}
	if err := f.walk(); err != nil {
		return err
	}
	if ws == "" {
		all := maps.Clone(f.listed)
		for id := range f.idx {
			all[id] = true
		}
		for _, id := range slices.Sorted(maps.Keys(all)) {
			if _, err := f.pack(id); err != nil {
				return err
			}
		}
	}
	if f.missing > maxMissing {
		f.problem("%d more objects the records reach are in no pack index", f.missing-maxMissing)
	}
	if ws == "" {
		return f.pins()
	}
	return nil
}

// workspaces lists the workspaces under ws/: those with a HEAD, and
// those with segments and no HEAD (a problem).
func (f *fscker) workspaces() ([]string, error) {
	heads := map[string]bool{}
	err := f.b.List(f.ctx, "ws/", func(i objstore.Info) error {
		rest := strings.TrimPrefix(i.Key, "ws/")
		name, tail, ok := strings.Cut(rest, "/")
		if !ok {
			f.problem("%s: not a key of the remote's layout", i.Key)
			return nil
		}
		if tail == "HEAD" {
			heads[name] = true
		} else if _, ok := heads[name]; !ok {
			heads[name] = false
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range slices.Sorted(maps.Keys(heads)) {
		if !heads[n] {
			f.problem("%s: missing (the workspace has segments)", HeadKey(n))
			continue
		}
		out = append(out, n)
	}
	return out, nil
}

// workspace checks HEAD and its segments and notes what the records
// reach. For a fork, its own segments tile the seqs after the fork's,
// and it returns the parent, whose segments hold the seqs before.
func (f *fscker) workspace(ws string) (parent string, err error) {
	key := HeadKey(ws)
	data, _, err := f.b.Get(f.ctx, key)
	if errors.Is(err, objstore.ErrNotExist) {
		f.problem("%s: missing", key)
		return parent, nil
	}
	if err != nil {
		return parent, err
	}
	f.r.Bytes += int64(len(data))
	f.r.Workspaces++
	h, err := DecodeHead(key, data)
	if err != nil {
		f.problem("%v", err)
		return parent, nil
	}
	from := h.Start()
	if p := h.Parent; p != nil {
		from = max(from, p.Seq+1)
		if _, err := f.b.Stat(f.ctx, HeadKey(p.WS)); errors.Is(err, objstore.ErrNotExist) {
			f.problem("%s: its parent workspace %s has no HEAD", key, p.WS)
		} else if err != nil {
			return parent, err
		} else {
			parent = p.WS
			if err := f.forkPart(ws, h); err != nil {
				return parent, err
			}
		}
	}
	if err := f.names(ws, h); err != nil {
		return parent, err
	}
	if h.Seq < from {
		return parent, nil
	}
	var segs []seg
	err = f.b.List(f.ctx, segPrefix(ws), func(i objstore.Info) error {
		e, first, last, ok := ParseSegmentKey(ws, i.Key)
		if !ok {
			f.problem("%s: not a segment key", i.Key)
			return nil
		}
		if last <= h.Seq && last >= from && h.EpochOf(first) == e && h.EpochOf(last) == e {
			segs = append(segs, seg{key: i.Key, first: first, last: last})
		}
		return nil
	})
	if err != nil {
		return parent, err
	}
	// Every segment HEAD covers is read (not only one tiling): a
	// damaged one is damage even when another covers its seqs.
	var good []seg
	decoded := map[string]*Segment{}
	for _, s := range segs {
		data, _, err := f.b.Get(f.ctx, s.key)
		if errors.Is(err, objstore.ErrNotExist) {
			f.problem("%s: listed, then missing", s.key)
			continue
		}
		if err != nil {
			return parent, err
		}
		f.r.Bytes += int64(len(data))
		f.r.Segments++
		d, err := DecodeSegment(ws, s.key, data)
		if err != nil {
			f.problem("%v", err)
			continue
		}
		good = append(good, s)
		decoded[s.key] = d
	}
	f.agree(good, decoded)
	chain := tile(good, from, h.Seq, false)
	if chain == nil {
		f.problem("%s: the sound segments of epochs %s do not tile seqs %d-%d that HEAD covers", segPrefix(ws), epochList(h), from, h.Seq)
		return parent, nil
	}
	for _, s := range chain {
		for _, r := range decoded[s.key].Records {
			if r.Seq < from {
				continue // a segment across a forgotten floor
			}
			f.r.Records++
			f.note(r, fmt.Sprintf("%s seq %d", s.key, r.Seq))
		}
	}
	return parent, nil
}

// names checks workspace ws's name objects: each decodes under its key
// and names a seq HEAD h covers (names.go writes it after that HEAD).
func (f *fscker) names(ws string, h *Head) error {
	return f.b.List(f.ctx, namesPrefix(ws), func(i objstore.Info) error {
		data, _, err := f.b.Get(f.ctx, i.Key)
		if errors.Is(err, objstore.ErrNotExist) {
			f.problem("%s: listed, then missing", i.Key)
			return nil
		}
		if err != nil {
			return err
		}
		f.r.Bytes += int64(len(data))
		n, err := DecodeName(i.Key, data)
		if err != nil {
			f.problem("%v", err)
		} else if n.Seq > h.Seq {
			f.problem("%s: names seq %d, past the seq %d its workspace's HEAD covers", i.Key, n.Seq, h.Seq)
		}
		return nil
	})
}

// forkPart reads, as a clone of fork ws does, its parent's records from
// the fork's Start through its seq (they may lie below the parent's own
// Start after a forget of the parent, where the parent's check does not
// look) and notes what they reach.
func (f *fscker) forkPart(ws string, h *Head) error {
	p := h.Parent
	if h.Start() > p.Seq {
		return nil
	}
	cut := *h
	cut.Seq = p.Seq
	rd := &segReader{ctx: f.ctx, b: f.b}
	recs, err := rd.records(ws, &cut, h.Start(), p.Seq, 0)
	f.r.Bytes += rd.bytes
	if errors.Is(err, ErrCorrupt) || errors.Is(err, objstore.ErrNotExist) {
		f.problem("fork %s: its parent's seqs %d-%d: %v", ws, h.Start(), p.Seq, err)
		return nil
	}
	if err != nil {
		return err
	}
	for _, r := range recs {
		f.note(r, fmt.Sprintf("%s seq %d (fork %s)", p.WS, r.Seq, ws))
	}
	return nil
}

// agree checks that the segments HEAD covers hold the same records for
// a seq (a merged segment and those it replaces, compact.go): one
// record per seq, byte for byte, and each segment every seq another
// holds in its range. One problem per segment.
func (f *fscker) agree(good []seg, decoded map[string]*Segment) {
	ref := map[uint64][]byte{}
	bad := map[string]bool{}
	for _, s := range good {
		for _, r := range decoded[s.key].Records {
			e := journal.Encode(r)
			if x, ok := ref[r.Seq]; !ok {
				ref[r.Seq] = e
			} else if !bytes.Equal(x, e) && !bad[s.key] {
				bad[s.key] = true
				f.problem("%s: its record of seq %d is not another segment's", s.key, r.Seq)
			}
		}
	}
	seqs := slices.Sorted(maps.Keys(ref))
	for _, s := range good {
		lo, _ := slices.BinarySearch(seqs, s.first)
		hi, _ := slices.BinarySearch(seqs, s.last+1)
		if n := len(decoded[s.key].Records); n != hi-lo && !bad[s.key] {
			f.problem("%s: holds %d records of seqs %d-%d, the other segments %d", s.key, n, s.first, s.last, hi-lo)
		}
	}
}

func epochList(h *Head) string {
	var s []string
	for _, e := range h.Epochs {
		s = append(s, fmt.Sprintf("%d (from seq %d)", e.Epoch, e.First))
	}
	return strings.Join(s, ", ")
}

// note records what r reaches, as a clone fetches it.
func (f *fscker) note(r *journal.Record, from string) {
	data := func(h cas.Hash) {
		if _, ok := f.reached[h]; !ok && !h.IsZero() {
			f.reached[h] = from
		}
	}
	switch r.Op {
	case journal.OpData:
		for _, c := range r.Chunks {
			data(c.Hash)
		}
	case journal.OpGeneration:
		f.trees = append(f.trees, reach{r.Root, from})
		for _, a := range r.Agents {
			data(a.State)
		}
	case journal.OpImport, journal.OpRestore:
		f.trees = append(f.trees, reach{r.Root, from})
	case journal.OpAgentState:
		data(r.Root)
	}
}

// indexes reads every index file; a pack with no index and an index
// whose pack is missing are problems.
func (f *fscker) indexes() error {
	packs := map[string]bool{}
	f.listed = packs
	err := f.b.List(f.ctx, "packs/", func(i objstore.Info) error {
		name := strings.TrimPrefix(i.Key, "packs/")
		if id, ok := strings.CutSuffix(name, ".idx"); ok {
			f.idx[id] = nil
		} else if id, ok := strings.CutSuffix(name, ".pack"); ok {
			packs[id] = true
		} else {
			f.problem("%s: not a key of the remote's layout", i.Key)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// A pack a condemned list names may have lost its index to a gc
	// run cut off between the two deletions (gc.go): it is garbage.
	lists, err := readCondemned(f.ctx, f.b)
	if err != nil {
		return err
	}
	condemned := map[string]bool{}
	for _, l := range lists {
		for _, id := range l.c.Packs {
			condemned[id] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(packs)) {
		if _, ok := f.idx[id]; !ok && !condemned[id] {
			f.problem("%s: missing (%s has no index: a clone cannot find its objects)", IndexKey(id), PackKey(id))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(f.idx)) {
		key := IndexKey(id)
		data, _, err := f.b.Get(f.ctx, key)
		if errors.Is(err, objstore.ErrNotExist) {
			f.problem("%s: listed, then missing", key)
			delete(f.idx, id)
			continue
		}
		if err != nil {
			return err
		}
		f.r.Bytes += int64(len(data))
		f.r.Indexes++
		x, err := DecodeIndex(key, data)
		if err != nil {
			f.problem("%v", err)
			delete(f.idx, id)
			continue
		}
		f.idx[id] = data
		if !packs[id] {
			f.problem("%s: missing (its index %s names %d objects)", PackKey(id), key, len(x.Entries))
			f.packs[id] = &checkedPack{}
		}
		for _, e := range x.Entries {
			if _, ok := f.where[e.Hash]; !ok {
				f.where[e.Hash] = id
			}
		}
	}
	return nil
}

// pack reads and checks pack id once (its index file was read).
func (f *fscker) pack(id string) (*checkedPack, error) {
	if p, ok := f.packs[id]; ok {
		return p, nil
	}
	p := &checkedPack{}
	f.packs[id] = p
	key := PackKey(id)
	data, _, err := f.b.Get(f.ctx, key)
	if errors.Is(err, objstore.ErrNotExist) {
		f.problem("%s: missing (named by %s)", key, IndexKey(id))
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	f.r.Bytes += int64(len(data))
	f.r.Packs++
	x, err := OpenPack(id, data)
	if err != nil {
		f.problem("%v", err)
		return p, nil
	}
	n := binary.BigEndian.Uint32(data[len(data)-4:])
	if own := data[len(data)-4-int(n) : len(data)-4]; f.idx[id] != nil && !bytes.Equal(own, f.idx[id]) {
		f.problem("%s: %v: not the index inside %s", IndexKey(id), ErrCorrupt, key)
		return p, nil
	}
	objs, err := PackObjects(id, data, x)
	if err != nil {
		f.problem("%v", err)
		return p, nil
	}
	f.r.Objects += len(objs)
	if x.Kind == KindTree {
		p.children, p.chunks = map[cas.Hash][]cas.Hash{}, map[cas.Hash][]cas.Hash{}
		for _, o := range objs {
			in, err := cas.DecodeInode(o.Data)
			if err != nil {
				f.problem("%s: %v: inode object %s: %v", key, ErrCorrupt, o.Hash, err)
				return p, nil
			}
			for _, e := range in.Entries {
				p.children[o.Hash] = append(p.children[o.Hash], e.Object)
			}
			p.chunks[o.Hash] = in.Chunks
		}
	}
	p.sound = true
	return p, nil
}

// walk checks that everything the records reach is in an index, walking
// the trees level by level, and reads the packs holding it.
func (f *fscker) walk() error {
	seen := map[cas.Hash]bool{}
	level := f.trees
	for len(level) > 0 {
		var next []reach
		for _, t := range level {
			if t.h.IsZero() || seen[t.h] {
				continue
			}
			seen[t.h] = true
			id, ok := f.where[t.h]
			if !ok {
				f.noIndex(t.h, t.from)
				continue
			}
			p, err := f.pack(id)
			if err != nil {
				return err
			}
			if !p.sound {
				continue // reported with the pack
			}
			if p.children == nil {
				f.problem("%s: inode object %s (reached from %s) is in a data pack", PackKey(id), t.h, t.from)
				continue
			}
			for _, c := range p.children[t.h] {
				next = append(next, reach{c, t.from})
			}
			for _, c := range p.chunks[t.h] {
				if _, ok := f.reached[c]; !ok && !c.IsZero() {
					f.reached[c] = t.from
				}
			}
		}
		level = next
	}
	for _, h := range slices.SortedFunc(maps.Keys(f.reached), func(a, b cas.Hash) int { return bytes.Compare(a[:], b[:]) }) {
		id, ok := f.where[h]
		if !ok {
			f.noIndex(h, f.reached[h])
			continue
		}
		if _, err := f.pack(id); err != nil {
			return err
		}
	}
	return nil
}

func (f *fscker) noIndex(h cas.Hash, from string) {
	f.missing++
	if f.missing <= maxMissing {
		f.problem("%s: object %s is in no pack index", from, h)
	}
}
