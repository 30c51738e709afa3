package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
)

// Remote GC's objects (the package doc, "Remote GC"):
//
//	gc/state                          {"format":1,"gen":N}: bumped before a
//	                                  run deletes anything
//	gc/condemned-<time>-<rand>.json   {"format":1,"time":T,"packs":[id…],
//	                                  "segments":[key…]}: what a run found
//	                                  dead at the server's time T
const (
	gcStateKey      = "gc/state"
	condemnedPrefix = "gc/condemned-"
	// DefaultGrace is how long a condemned list waits before a run
	// deletes what it names (and what is still dead).
	DefaultGrace = 24 * time.Hour
)

// GCState is gc/state.
type GCState struct {
	Format int    `json:"format"`
	Gen    uint64 `json:"gen"`
}

// Condemned is one gc/condemned-*.json list.
type Condemned struct {
	Format   int       `json:"format"`
	Time     time.Time `json:"time"`
	Packs    []string  `json:"packs"`
	Segments []string  `json:"segments"`
}

// GCOptions tune a remote GC.
type GCOptions struct {
	Grace  time.Duration // 0: DefaultGrace; negative is refused
	DryRun bool          // mark and report, write and delete nothing
	// NoRepack: leave packs that are mostly dead as they are
	// (gcrepack.go).
	NoRepack bool
}

// GCSet counts packs and segments with their bytes (a pack's: .pack
// and .idx).
type GCSet struct {
	Packs        int   `json:"packs"`
	PackBytes    int64 `json:"pack_bytes"`
	Segments     int   `json:"segments"`
	SegmentBytes int64 `json:"segment_bytes"`
}

// GCResult says what a remote GC found and did.
type GCResult struct {
	Remote     string    `json:"remote"`
	DryRun     bool      `json:"dry_run"`
	Now        time.Time `json:"now"` // the server's
	Grace      string    `json:"grace"`
	Workspaces int       `json:"workspaces"`
	// Condemned: dead now and named by no pending list, written into a
	// new list (Lists) by this run. Deleted: named by a list past the
	// grace and dead again by this run's mark. Revived: named by such a
	// list and live again (un-condemned). Pending: named by lists still
	// inside the grace.
	Condemned GCSet `json:"condemned"`
	Deleted   GCSet `json:"deleted"`
	Revived   int   `json:"revived"`
	Pending   GCSet `json:"pending"`
	// Kept: packs with a live object; DeadBytes: the stored bytes of
	// their objects nothing reaches (what a repack would gain).
	// Repacked: packs at least half dead whose live objects this run
	// copied into new packs (Written) and condemned (in Lists, not in
	// Condemned); in a dry run, what it would copy.
	Repacked  RepackSet `json:"repacked"`
	Kept      int       `json:"kept_packs"`
	KeptBytes int64     `json:"kept_bytes"`
	DeadBytes int64     `json:"dead_bytes_in_kept"`
	// Pins: lazy clones' unexpired pins (pins.go); PinnedPacks: packs
	// kept only because a pin names them; PinsRemoved: pins deleted,
	// expired for longer than the grace.
	Pins        int      `json:"pins"`
	PinnedPacks int      `json:"pinned_packs"`
	PinsRemoved int      `json:"pins_removed"`
	Lists       []string `json:"lists"`   // condemned lists written
	Removed     []string `json:"removed"` // condemned lists finished and deleted
	Gen         uint64   `json:"gen"`     // gc/state's generation after the run
}

// ErrGC: a remote GC that refuses to run (bad options, a list it
// cannot read).
var ErrGC = errors.New("remote gc")

type condemnedList struct {
	key string
	c   *Condemned
}

// GC collects the remote in two phases (the package doc, "Remote GC"):
// it marks from every workspace's HEAD; deletes what each condemned
// list older than the grace names and the mark finds dead (a pack's
// .idx before its .pack, after bumping gc/state), un-condemns what it
// finds live, and deletes the list last; then condemns, in a new list,
// what is dead and no pending list names. Time is the server's
// (Backend.Now). A run cut off anywhere leaves lists the next finishes.
func GC(ctx context.Context, b objstore.Backend, o GCOptions) (*GCResult, error) {
	if o.Grace < 0 {
		return nil, fmt.Errorf("%w: grace %s: want a duration ≥ 0", ErrGC, o.Grace)
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	res, err := gc(ctx, b, o)
	if err != nil {
		return nil, fmt.Errorf("gc %s: %w", b, err)
	}
	return res, nil
}

func gc(ctx context.Context, b objstore.Backend, o GCOptions) (*GCResult, error) {
	if _, err := remoteConfig(ctx, b, false); err != nil {
		return nil, err
	}
	lists, err := readCondemned(ctx, b)
	if err != nil {
		return nil, err
	}
	avoid := map[string]bool{}
	for _, l := range lists {
		for _, id := range l.c.Packs {
			avoid[id] = true
		}
	}
	// The mark runs after the lists are read: a push that saw no list
	// and wrote HEAD before this point is seen here (guard b).
	m, err := mark(ctx, b, avoid)
	if err != nil {
		return nil, err
	}
	now, err := b.Now(ctx)
	if err != nil {
		return nil, err
	}
	now = now.UTC().Round(0)
	res := &GCResult{Remote: b.String(), DryRun: o.DryRun, Now: now, Grace: o.Grace.String(),
		Workspaces: m.workspaces, Lists: []string{}, Removed: []string{}}
	if res.Gen, _, err = readGCState(ctx, b); err != nil {
		return nil, err
	}
	// Lazy clones' pins (pins.go), read after the mark: each unexpired
	// one keeps its packs.
	pins, err := readPins(ctx, b)
	if err != nil {
		return nil, err
	}
	for _, pin := range pins {
		if now.After(pin.Expires) {
			if now.After(pin.Expires.Add(o.Grace)) {
				if !o.DryRun {
					if err := dropPin(ctx, b, pin.Store); err != nil {
						return nil, err
					}
				}
				res.PinsRemoved++
			}
			continue
		}
		res.Pins++
		for _, id := range pin.Packs {
			if p := m.packs[id]; p != nil {
				p.pinned = true
			}
		}
	}
	deadPack := func(id string) bool {
		p := m.packs[id]
		return p == nil || p.live == 0 && !p.pinned
	}
	listed := map[string]bool{}
	bumped := false
	for _, l := range lists {
		due := !now.Before(l.c.Time.Add(o.Grace))
		for _, id := range l.c.Packs {
			listed[PackKey(id)] = true
			p := m.packs[id]
			switch {
			case p == nil:
				// Deleted already, by a run cut off before it deleted
				// the list.
			case !deadPack(id):
				if due {
					res.Revived++
				} else {
					res.Pending.Packs++
				}
			case !due:
				res.Pending.Packs++
				res.Pending.PackBytes += p.packBytes + p.idxBytes
			default:
				if again, err := rewritten(ctx, b, l.c.Time, PackKey(id), IndexKey(id)); err != nil {
					return nil, err
				} else if again {
					res.Revived++
					continue
				}
				if !o.DryRun && !bumped {
					if res.Gen, err = bumpGC(ctx, b); err != nil {
						return nil, err
					}
					bumped = true
				}
				if err := deletePack(ctx, b, id, o.DryRun); err != nil {
					return nil, err
				}
				res.Deleted.Packs++
				res.Deleted.PackBytes += p.packBytes + p.idxBytes
			}
		}
		for _, key := range l.c.Segments {
			listed[key] = true
			_, there := m.segments[key]
			switch {
			case !there && !m.live[key]:
				// Deleted already.
			case m.live[key]:
				if due {
					res.Revived++
				} else {
					res.Pending.Segments++
				}
			case !due:
				res.Pending.Segments++
				res.Pending.SegmentBytes += m.segments[key]
			default:
				if again, err := rewritten(ctx, b, l.c.Time, key); err != nil {
					return nil, err
				} else if again {
					res.Revived++
					continue
				}
				if !o.DryRun {
					if err := b.Delete(ctx, key); err != nil {
						return nil, err
					}
				}
				res.Deleted.Segments++
				res.Deleted.SegmentBytes += m.segments[key]
			}
		}
		if due {
			// Last: a run cut off before this point finds the list
			// again and finishes it.
			if !o.DryRun {
				if err := b.Delete(ctx, l.key); err != nil {
					return nil, err
				}
			}
			res.Removed = append(res.Removed, l.key)
		}
	}
	var c Condemned
	var repacks []string
	for _, id := range slices.Sorted(maps.Keys(m.packs)) {
		p := m.packs[id]
		if p.live == 0 && p.pinned {
			res.PinnedPacks++
		}
		if !o.NoRepack && repackable(p) && !listed[PackKey(id)] {
			repacks = append(repacks, id)
			continue
		}
		if p.live > 0 || p.pinned {
			res.Kept++
			res.KeptBytes += p.packBytes + p.idxBytes
			res.DeadBytes += p.deadBytes
			continue
		}
		if listed[PackKey(id)] {
			continue
		}
		c.Packs = append(c.Packs, id)
		res.Condemned.Packs++
		res.Condemned.PackBytes += p.packBytes + p.idxBytes
	}
	if len(repacks) > 0 {
		if o.DryRun {
			for _, id := range repacks {
				p := m.packs[id]
				res.Repacked.Packs++
				res.Repacked.PackBytes += p.packBytes + p.idxBytes
				for _, e := range p.entries {
					if m.liveObjs[e.Hash] && m.where[e.Hash] == p {
						res.Repacked.LiveBytes += int64(e.Stored)
					}
				}
			}
		} else {
			// The new packs are written before the list that condemns
			// the old ones: a run cut off between leaves objects in two
			// packs, and the next run condemns whichever its mark does
			// not take them from.
			if err := repack(ctx, b, m, repacks, res); err != nil {
				return nil, err
			}
			c.Packs = append(c.Packs, repacks...)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(m.segments)) {
		if m.live[key] || listed[key] {
			continue
		}
		c.Segments = append(c.Segments, key)
		res.Condemned.Segments++
		res.Condemned.SegmentBytes += m.segments[key]
	}
	if len(c.Packs)+len(c.Segments) > 0 && !o.DryRun {
		c.Format, c.Time = Format, now
		key, err := writeCondemned(ctx, b, &c)
		if err != nil {
			return nil, err
		}
		res.Lists = append(res.Lists, key)
	}
	return res, nil
}

// rewritten reports whether one of keys was written at or after t (the
// server's time of a condemned list): pack and segment keys are named by
// their content, so a push that sends a condemned pack's objects again
// in the same grouping writes the same key, and a gc must not delete
// what it wrote (git's cruft packs keep a pack whose mtime was touched).
func rewritten(ctx context.Context, b objstore.Backend, t time.Time, keys ...string) (bool, error) {
	for _, k := range keys {
		i, err := b.Stat(ctx, k)
		if errors.Is(err, objstore.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		if !i.Mod.Before(t.Truncate(time.Second)) {
			return true, nil
		}
	}
	return false, nil
}

// deletePack deletes a pack's index, then the pack: a run cut off
// between the two leaves a pack no index names, which the list (still
// there) makes the next run delete.
func deletePack(ctx context.Context, b objstore.Backend, id string, dry bool) error {
	if dry {
		return nil
	}
	if err := b.Delete(ctx, IndexKey(id)); err != nil {
		return err
	}
	return b.Delete(ctx, PackKey(id))
}

// readCondemned reads every condemned list, oldest first.
func readCondemned(ctx context.Context, b objstore.Backend) ([]condemnedList, error) {
	lists, _, err := readGCListing(ctx, b)
	return lists, err
}

// readGCListing lists gc/ once: it reads every condemned list, oldest
// first, and reports whether gc/state exists (a push of a remote never
// collected makes that one request only).
func readGCListing(ctx context.Context, b objstore.Backend) (lists []condemnedList, state bool, err error) {
	var keys []string
	err = b.List(ctx, "gc/", func(i objstore.Info) error {
		if strings.HasPrefix(i.Key, condemnedPrefix) {
			keys = append(keys, i.Key)
		} else if i.Key == gcStateKey {
			state = true
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	lists, err = readLists(ctx, b, keys)
	return lists, state, err
}

func readLists(ctx context.Context, b objstore.Backend, keys []string) ([]condemnedList, error) {
	var out []condemnedList
	for _, key := range keys {
		data, _, err := b.Get(ctx, key)
		if errors.Is(err, objstore.ErrNotExist) {
			continue // another run finished it meanwhile
		}
		if err != nil {
			return nil, err
		}
		var c Condemned
		if err := strict(key, data, &c); err != nil {
			return nil, err
		}
		if c.Format != Format || c.Time.IsZero() {
			return nil, fmt.Errorf("%s: %w: format %d, time %s", key, ErrCorrupt, c.Format, c.Time)
		}
		for _, id := range c.Packs {
			if b, err := hex.DecodeString(id); err != nil || len(b) != 32 || hex.EncodeToString(b) != id {
				return nil, fmt.Errorf("%s: %w: %q is not a pack id", key, ErrCorrupt, id)
			}
		}
		for _, s := range c.Segments {
			if !strings.HasPrefix(s, "ws/") || !strings.Contains(s, "/seg/") {
				return nil, fmt.Errorf("%s: %w: %q is not a segment key", key, ErrCorrupt, s)
			}
		}
		out = append(out, condemnedList{key, &c})
	}
	slices.SortFunc(out, func(a, b condemnedList) int { return a.c.Time.Compare(b.c.Time) })
	return out, nil
}

func writeCondemned(ctx context.Context, b objstore.Backend, c *Condemned) (string, error) {
	var r [4]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	key := condemnedPrefix + c.Time.Format("20060102T150405Z") + "-" + hex.EncodeToString(r[:]) + ".json"
	if c.Packs == nil {
		c.Packs = []string{}
	}
	if c.Segments == nil {
		c.Segments = []string{}
	}
	if _, err := b.PutIfAbsent(ctx, key, canonical(c)); err != nil {
		return "", err
	}
	return key, nil
}

// readGCState returns gc/state's generation (0 when there is none) and
// its ETag ("" then).
func readGCState(ctx context.Context, b objstore.Backend) (uint64, string, error) {
	data, info, err := b.Get(ctx, gcStateKey)
	if errors.Is(err, objstore.ErrNotExist) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	var s GCState
	if err := strict(gcStateKey, data, &s); err != nil {
		return 0, "", err
	}
	if s.Format != Format {
		return 0, "", fmt.Errorf("%s: %w: format %d", gcStateKey, ErrCorrupt, s.Format)
	}
	return s.Gen, info.ETag, nil
}

// bumpGC raises gc/state's generation by one (compare-and-swap, so two
// runs each raise it): stores whose last push saw another generation
// rebuild what they know the remote holds (gcguard.go).
func bumpGC(ctx context.Context, b objstore.Backend) (uint64, error) {
	for range 8 {
		gen, etag, err := readGCState(ctx, b)
		if err != nil {
			return 0, err
		}
		next := canonical(&GCState{Format: Format, Gen: gen + 1})
		if etag == "" {
			_, err = b.PutIfAbsent(ctx, gcStateKey, next)
		} else {
			_, err = b.PutIfMatch(ctx, gcStateKey, next, etag)
		}
		if err == nil {
			return gen + 1, nil
		}
		if !errors.Is(err, objstore.ErrPrecondition) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("%w: %s keeps changing", ErrGC, gcStateKey)
}
