package replica

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
)

// WorkspaceInfo is one workspace of a remote as its HEAD and segments
// describe it (reynfs log --remote).
type WorkspaceInfo struct {
	Name    string    `json:"name"`
	Seq     uint64    `json:"seq"`
	Floor   uint64    `json:"floor"`
	Epoch   uint64    `json:"epoch"`
	Holder  Holder    `json:"holder"`
	Expires time.Time `json:"expires"`
	// Locked: the lease is held (unexpired at the server's Now).
	Locked bool    `json:"locked"`
	Parent *Parent `json:"parent,omitempty"`
	// Generations counts the generation records HEAD covers (plus
	// those the writer's retention dropped); Newest is the last one.
	Generations int            `json:"generations"`
	Newest      *GenerationRef `json:"newest,omitempty"`
	// Error: HEAD or a segment could not be read or is damaged.
	Error string `json:"error,omitempty"`
}

// GenerationRef is a generation record as the remote holds it.
type GenerationRef struct {
	ID    int       `json:"id"` // gN, counting the dropped ones, as the writer's store numbers them
	Seq   uint64    `json:"seq"`
	Kind  string    `json:"kind"`
	Label string    `json:"label"`
	Time  time.Time `json:"time"`
}

// ReadHead reads and decodes workspace ws's HEAD, with its ETag.
func ReadHead(ctx context.Context, b objstore.Backend, ws string) (*Head, string, error) {
	key := HeadKey(ws)
	data, info, err := b.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, "", fmt.Errorf("the remote %s has no workspace %s (no %s)", b, ws, key)
	}
	if err != nil {
		return nil, "", err
	}
	h, err := DecodeHead(key, data)
	return h, info.ETag, err
}

// WorkspaceNames lists the workspaces under ws/ that have a HEAD.
func WorkspaceNames(ctx context.Context, b objstore.Backend) ([]string, error) {
	var out []string
	err := b.List(ctx, "ws/", func(i objstore.Info) error {
		name, ok := strings.CutSuffix(strings.TrimPrefix(i.Key, "ws/"), "/HEAD")
		if ok && !strings.Contains(name, "/") {
			out = append(out, name)
		}
		return nil
	})
	return out, err
}

// Workspaces describes every workspace of the remote (HEADs only when
// headsOnly: no segment is read, and Generations stays 0).
func Workspaces(ctx context.Context, b objstore.Backend, headsOnly bool) ([]WorkspaceInfo, error) {
	if _, err := remoteConfig(ctx, b, false); err != nil {
		return nil, err
	}
	names, err := WorkspaceNames(ctx, b)
	if err != nil {
		return nil, err
	}
	now, err := b.Now(ctx)
	if err != nil {
		return nil, err
	}
	out := []WorkspaceInfo{}
	for _, n := range names {
		w := WorkspaceInfo{Name: n}
		h, _, err := ReadHead(ctx, b, n)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return nil, err
			}
			w.Error = oneLine(err.Error())
			out = append(out, w)
			continue
		}
		w.Seq, w.Floor, w.Epoch, w.Holder, w.Expires, w.Parent = h.Seq, h.Floor, h.Epoch(), h.Holder, h.Expires, h.Parent
		w.Locked = now.Before(h.Expires)
		if !headsOnly {
			gens, err := Generations(ctx, b, n, h)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					return nil, err
				}
				w.Error = oneLine(err.Error())
			}
			w.Generations = len(gens)
			if h.Dropped != nil {
				w.Generations += h.Dropped.Gens
			}
			if len(gens) > 0 {
				w.Newest = &gens[len(gens)-1]
			}
		}
		out = append(out, w)
	}
	return out, nil
}

// Generations lists the generation records of workspace ws that HEAD h
// covers, oldest first, numbered as the writer's store numbers them.
func Generations(ctx context.Context, b objstore.Backend, ws string, h *Head) ([]GenerationRef, error) {
	recs, _, err := segmentRecords(ctx, b, ws, h, 1)
	if err != nil {
		return nil, err
	}
	id := 0
	if h.Dropped != nil {
		id = h.Dropped.Gens
	}
	var out []GenerationRef
	for _, r := range recs {
		if r.Op != journal.OpGeneration {
			continue
		}
		id++
		out = append(out, GenerationRef{ID: id, Seq: r.Seq, Kind: r.GenKind, Label: r.Label, Time: time.Unix(0, r.Time).UTC()})
	}
	return out, nil
}

// segmentRecords reads the records from..h.Seq of ws from segments h
// covers (invariant 4: HEAD was read first), each segment checked; for a
// fork, those up to the fork's seq come from its parent's segments. A
// segment may start before from (its earlier records are left out).
// It returns the records and the bytes read.
func segmentRecords(ctx context.Context, b objstore.Backend, ws string, h *Head, from uint64) ([]*journal.Record, int64, error) {
	rd := &segReader{ctx: ctx, b: b}
	recs, err := rd.records(ws, h, from, h.Seq, 0)
	return recs, rd.bytes, err
}

// segReader reads a workspace's records from its segments (segmentRecords,
// Clone), counting what it read.
type segReader struct {
	ctx      context.Context
	b        objstore.Backend
	segments int
	bytes    int64
	keys     []string // the segments read, in order (gc's mark)
}

// records reads the records from..h.Seq of workspace ws, by h's epochs,
// from segments its HEAD covers (through covered: a fork's parent, whose
// last segment may run past the fork's seq): for a fork, those through
// the fork's seq from its parent (by the parent's HEAD, whose epochs
// below that seq never change), then its own. depth bounds a chain of
// forks.
func (rd *segReader) records(ws string, h *Head, from, covered uint64, depth int) ([]*journal.Record, error) {
	var recs []*journal.Record
	if depth == 0 {
		// Below its own HEAD's Start nothing of ws is read; a fork
		// reads its parent's segments from its own Start, whatever the
		// parent's floor is now (gc keeps them: they are read).
		from = max(from, h.Start())
	}
	if p := h.Parent; p != nil {
		if from <= p.Seq {
			if depth >= 64 {
				return nil, fmt.Errorf("%w: %s: a chain of more than 64 forks", ErrCorrupt, HeadKey(ws))
			}
			key := HeadKey(p.WS)
			data, _, err := rd.b.Get(rd.ctx, key)
			if err != nil {
				return nil, fmt.Errorf("the parent of fork %s: %w", ws, err)
			}
			ph, err := DecodeHead(key, data)
			if err != nil {
				return nil, err
			}
			if ph.Seq < p.Seq {
				return nil, fmt.Errorf("%w: fork %s starts at seq %d of %s, whose HEAD covers %d", ErrCorrupt, ws, p.Seq, p.WS, ph.Seq)
			}
			cut := *ph
			cut.Seq = p.Seq
			if recs, err = rd.records(p.WS, &cut, from, ph.Seq, depth+1); err != nil {
				return nil, err
			}
		}
		from = max(from, p.Seq+1)
	}
	if from > h.Seq {
		return recs, nil
	}
	var segs []seg
	err := rd.b.List(rd.ctx, segPrefix(ws), func(i objstore.Info) error {
		if e, first, last, ok := ParseSegmentKey(ws, i.Key); ok && last <= covered && last >= from &&
			h.EpochOf(first) == e && h.EpochOf(last) == e {
			segs = append(segs, seg{key: i.Key, first: first, last: last})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	chain := tile(segs, from, h.Seq, covered > h.Seq)
	if chain == nil {
		return nil, fmt.Errorf("%w: the segments of %s do not cover seqs %d-%d that HEAD covers", ErrCorrupt, segPrefix(ws), from, h.Seq)
	}
	for _, s := range chain {
		data, _, err := rd.b.Get(rd.ctx, s.key)
		if err != nil {
			return nil, err
		}
		rd.bytes += int64(len(data))
		rd.segments++
		rd.keys = append(rd.keys, s.key)
		d, err := DecodeSegment(ws, s.key, data)
		if err != nil {
			return nil, err
		}
		for _, r := range d.Records {
			// A segment across from, or a fork's parent's last
			// one, running past the fork.
			if r.Seq >= from && r.Seq <= h.Seq {
				recs = append(recs, r)
			}
		}
	}
	return recs, nil
}

// tile picks segments of segs tiling from..to (past: the last may run
// past to). A segment across from (starting before it: a forget's floor
// inside one, or a fetch from inside a merged segment, compact.go) is
// tried first, the outermost (latest last, then earliest first): it is
// the one a reader from Start reads, so the one gc keeps, while the
// segments a merge replaced may be condemned. Else a tiling from from.
func tile(segs []seg, from, to uint64, past bool) []seg {
	var across []seg
	for _, s := range segs {
		if s.first < from && s.last >= from {
			across = append(across, s)
		}
	}
	slices.SortFunc(across, func(a, b seg) int {
		return cmp.Or(cmp.Compare(b.last, a.last), cmp.Compare(a.first, b.first))
	})
	for _, s := range across {
		if s.last >= to {
			return []seg{s}
		}
		if rest := coverPast(segs, s.last+1, to, past); rest != nil {
			return append([]seg{s}, rest...)
		}
	}
	return coverPast(segs, from, to, past)
}
