package replica

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
)

// Segment compaction (doc.go, "Compaction"): the lease holder merges K
// consecutive segments of one epoch and one level of the tiling into
// one segment covering their whole range, so that a reader (cover
// prefers the longest segment at each seq) GETs one where it got K.

const (
	// DefaultCompactK is how many segments of one level are merged.
	DefaultCompactK = 16
	// compactBase: a segment below it is level 0; level L ≥ 1 holds
	// base·K^(L-1) up to base·K^L bytes.
	compactBase = 16 << 10
	// compactMax: no merge writes a segment larger than this.
	compactMax = 64 << 20
	// segOverhead: the bytes of a segment that are not its records
	// (header and checksum): a merge of n segments is the sum of their
	// sizes less (n-1)·segOverhead, exactly.
	segOverhead = int64(segHeader + 32)
)

// cseg is a segment the compactor knows, with its epoch and size.
type cseg struct {
	seg
	epoch uint64
	size  int64
}

// compactor is a pusher's knowledge of ws's segments: one List when it
// first compacts in a session, then its own writes.
type compactor struct {
	segs map[string]cseg
}

// level is a segment's compaction level, by its size.
func level(size int64, k int) int {
	l := 0
	for t := int64(compactBase); size >= t && l < 16; t *= int64(k) {
		l++
	}
	return l
}

// noteSegment records a segment the pusher wrote (when the compactor
// has listed already: otherwise its List finds it).
func (p *pusher) noteSegment(key string, e, first, last uint64, size int) {
	if p.cmp != nil {
		p.cmp.segs[key] = cseg{seg: seg{key: key, first: first, last: last}, epoch: e, size: int64(size)}
	}
}

// listSegments is the compactor's one List of a session.
func (p *pusher) listSegments() error {
	c := &compactor{segs: map[string]cseg{}}
	err := p.b.List(p.ctx, segPrefix(p.ws), func(i objstore.Info) error {
		if e, first, last, ok := ParseSegmentKey(p.ws, i.Key); ok {
			c.segs[i.Key] = cseg{seg: seg{key: i.Key, first: first, last: last}, epoch: e, size: i.Size}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list segments: %w", err)
	}
	p.cmp = c
	return nil
}

// plan picks the next merge: in the tiling readers read of HEAD h (as
// segReader picks it), the first run of K consecutive segments of one
// epoch and one level, the lowest level first, whose merge is at most
// compactMax bytes. nil: nothing to merge.
func (c *compactor) plan(h *Head, k int) []cseg {
	lower := h.Start()
	if h.Parent != nil { // a fork's parent's range is the parent's
		lower = max(lower, h.Parent.Seq+1)
	}
	if lower > h.Seq {
		return nil
	}
	var segs []seg
	for _, s := range c.segs {
		if s.last <= h.Seq && s.last >= lower && h.EpochOf(s.first) == s.epoch && h.EpochOf(s.last) == s.epoch {
			segs = append(segs, s.seg)
		}
	}
	// A stable order, so that tile picks the same tiling every time.
	slices.SortFunc(segs, func(a, b seg) int {
		return cmp.Or(cmp.Compare(a.first, b.first), cmp.Compare(a.key, b.key))
	})
	chain := tile(segs, lower, h.Seq, false)
	if len(chain) < k {
		return nil
	}
	tiled := make([]cseg, len(chain))
	for i, s := range chain {
		tiled[i] = c.segs[s.key]
	}
	for l := 0; l <= 16; l++ {
		run := 0
		var size int64
		for i, s := range tiled {
			if level(s.size, k) != l || run > 0 && s.epoch != tiled[i-1].epoch {
				run, size = 0, 0
				if level(s.size, k) != l {
					continue
				}
			}
			run++
			size += s.size
			if run == k {
				if size-int64(k-1)*segOverhead <= compactMax {
					return slices.Clone(tiled[i-k+1 : i+1])
				}
				break // this level's merges are past the cap
			}
		}
	}
	return nil
}

// compact runs up to n merges (and stops after budget), each after the
// HEAD that covers it was written (it merges only segments HEAD covers).
// It returns how many it wrote.
func (p *pusher) compact(n int, budget time.Duration) (int, error) {
	if p.o.CompactK < 0 {
		return 0, nil
	}
	if p.cmp == nil {
		if err := p.listSegments(); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	done := 0
	for done < n && time.Since(start) < budget {
		h := p.current()
		group := p.cmp.plan(&h, p.o.CompactK)
		if group == nil {
			break
		}
		if err := p.merge(group); err != nil {
			first, last := group[0].first, group[len(group)-1].last
			return done, fmt.Errorf("compact seqs %d-%d: %w", first, last, err)
		}
		done++
	}
	return done, nil
}

// merge writes one segment holding exactly the records of group (a run
// of the tiling, one epoch), then forgets group's segments.
func (p *pusher) merge(group []cseg) error {
	first, last, e := group[0].first, group[len(group)-1].last, group[0].epoch
	want := segOverhead // the merged size, exactly
	for _, s := range group {
		want += s.size - segOverhead
	}
	data, err := p.mergeLocal(first, last)
	if err != nil {
		return err
	}
	if data == nil || int64(len(data)) != want {
		// Below the local floor, or the store's records are not
		// those the segments hold (sizes differ): read the segments.
		if data, err = p.mergeRemote(group, first, last); err != nil {
			return err
		}
		if int64(len(data)) != want {
			return fmt.Errorf("%w: segments %s..%s: merged %d bytes, their sizes say %d", ErrCorrupt, group[0].key, group[len(group)-1].key, len(data), want)
		}
	}
	if err := p.check(); err != nil {
		return err
	}
	key, err := saltedSegmentKey(p.ws, e, first, last)
	if err != nil {
		return err
	}
	if err := p.b.Put(p.ctx, key, data); err != nil {
		return err
	}
	for _, s := range group {
		delete(p.cmp.segs, s.key)
	}
	p.cmp.segs[key] = cseg{seg: seg{key: key, first: first, last: last}, epoch: e, size: int64(len(data))}
	p.res.Compacted++
	p.res.Bytes += int64(len(data))
	return nil
}

// mergeLocal encodes the store's records first..last, as the pusher
// encoded them: nil when first is below the store's floor (records
// dropped since they were pushed).
func (p *pusher) mergeLocal(first, last uint64) ([]byte, error) {
	floor, err := p.j.Floor()
	if err != nil || first < floor {
		return nil, err
	}
	var recs []*journal.Record
	errEnd := errors.New("end")
	err = p.j.Iter(first, func(r *journal.Record) error {
		if r.Seq > last {
			return errEnd
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil && !errors.Is(err, errEnd) {
		return nil, err
	}
	return EncodeSegment(first, last, recs)
}

// mergeRemote reads group's segments and encodes their records as one.
func (p *pusher) mergeRemote(group []cseg, first, last uint64) ([]byte, error) {
	var recs []*journal.Record
	for _, s := range group {
		data, _, err := p.b.Get(p.ctx, s.key)
		if err != nil {
			return nil, err
		}
		d, err := DecodeSegment(p.ws, s.key, data)
		if err != nil {
			return nil, err
		}
		recs = append(recs, d.Records...)
	}
	return EncodeSegment(first, last, recs)
}
