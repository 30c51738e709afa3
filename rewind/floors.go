package rewind

import (
	"fmt"
	"sync"
	"time"

	"github.com/reynfs/reynfs/journal"
)

// Pins: what a running operation uses stays retained. A rewind and a
// restore check and use their target under the live lock, which the
// collector takes to move the floors; a restore reconstructs its source
// before it takes the lock, and views, diffs and exports read old trees
// without it, so they hold the state they read (Hold) and the collector
// keeps every held state and what its reconstruction reads.

type retention struct {
	mu   sync.Mutex
	pins map[*pin]struct{}
}

type pin struct {
	seq   uint64
	until time.Time // zero: until released
}

type retentionKey struct{}

func retentionOf(j *journal.Journal) *retention {
	return j.Attached(retentionKey{}, func() any { return &retention{pins: map[*pin]struct{}{}} }).(*retention)
}

// Hold keeps the state at x retained until release is called, or, when d
// is positive, until d has passed as well (a view the kernel may read for
// a while). It refuses, naming the floor, a state no longer retained.
func Hold(j *journal.Journal, x uint64, d time.Duration) (release func(), err error) {
	_, release, err = holdPlan(j, x, d)
	return release, err
}

// holdPlan is Hold that also returns the state's replay plan.
func holdPlan(j *journal.Journal, x uint64, d time.Duration) (*replayPlan, func(), error) {
	r := retentionOf(j)
	r.mu.Lock()
	defer r.mu.Unlock()
	plan, err := planReplay(j, x)
	if err != nil {
		return nil, nil, err
	}
	p := &pin{seq: x}
	if d > 0 {
		p.until = time.Now().Add(d)
	}
	r.pins[p] = struct{}{}
	return plan, func() {
		if d > 0 {
			return // expires
		}
		r.mu.Lock()
		delete(r.pins, p)
		r.mu.Unlock()
	}, nil
}

// pinnedLocked lists the held seqs and forgets the expired ones.
func (r *retention) pinnedLocked(now time.Time) []uint64 {
	var out []uint64
	for p := range r.pins {
		if !p.until.IsZero() && now.After(p.until) {
			delete(r.pins, p)
			continue
		}
		out = append(out, p.seq)
	}
	return out
}

// computeFloors works out where the floors go (see retain.go, policy.go):
// the policy's windows (or o.Keep), then lowered for what must stay: the
// live head (the fine floor is a generation on the current path), the
// newest generation, every state a name points at, and every held one.
// Floors never go down.
func computeFloors(j *journal.Journal, o CollectOptions, pins []uint64) (Floors, error) {
	head := j.Head()
	old, err := j.Floor()
	if err != nil {
		return Floors{}, err
	}
	gens, err := Timeline(j)
	if err != nil {
		return Floors{}, err
	}
	path, err := j.Path()
	if err != nil {
		return Floors{}, err
	}
	live := onLivePath(gens, path, head)
	f := loadFloors(j)
	if f.Seq != old {
		f = Floors{Seq: old, SeqBy: "an earlier collection"}
	}
	f.Gen, f.GenTime, f.GenBy = f.Seq, f.SeqTime, f.SeqBy
	if len(gens) > 0 && gens[0].Rec.Seq < f.Gen {
		f.Gen, f.GenTime, f.GenBy = gens[0].Rec.Seq, time.Unix(0, gens[0].Rec.Time), "an earlier collection"
	}
	at := func(g Gen) (uint64, time.Time) { return g.Rec.Seq, time.Unix(0, g.Rec.Time) }

	cutoff := func(w Window) time.Time { return o.Now.Add(-w.Age) }
	if o.Keep > 0 {
		if len(live) > o.Keep {
			by := fmt.Sprintf("gc --keep %d", o.Keep)
			s, t := at(live[len(live)-o.Keep])
			f.Seq, f.SeqTime, f.SeqBy = s, t, by
			f.Gen, f.GenTime, f.GenBy = s, t, by
		}
	} else {
		p, _, err := LoadPolicy(j)
		if err != nil {
			return Floors{}, err
		}
		// Fine: the newest generation on the current path at or before the
		// first seq the window keeps, so the states after it replay from it.
		var cand *Gen
		for i := len(live) - 1; i >= 0 && cand == nil; i-- {
			g := live[i]
			if (p.Seqs.Count > 0 && head >= uint64(p.Seqs.Count) && g.Rec.Seq <= head-uint64(p.Seqs.Count)+1) ||
				(p.Seqs.Age > 0 && !time.Unix(0, g.Rec.Time).After(cutoff(p.Seqs))) {
				cand = &live[i]
			}
		}
		if cand != nil && cand.Rec.Seq > f.Seq {
			f.Seq, f.SeqTime = at(*cand)
			f.SeqBy = "the seqs window (" + p.Seqs.describe("records") + ")"
		}
		// Coarse: the oldest generation the window keeps.
		var gcand *Gen
		if p.Generations.Count > 0 {
			var seen []Gen
			for _, g := range live {
				if g.Rec.GenKind != KindAuto && g.Rec.GenKind != KindRewind {
					seen = append(seen, g)
				}
			}
			if len(seen) > p.Generations.Count {
				gcand = &seen[len(seen)-p.Generations.Count]
			}
		} else if len(gens) > 0 {
			gcand = &gens[len(gens)-1] // all older than the window: the newest stays
			for i := range gens {
				if time.Unix(0, gens[i].Rec.Time).After(cutoff(p.Generations)) {
					gcand = &gens[i]
					break
				}
			}
		}
		if gcand != nil && gcand.Rec.Seq > f.Gen {
			f.Gen, f.GenTime = at(*gcand)
			f.GenBy = "the generations window (" + p.Generations.describe("generations") + ")"
		}
	}
	if f.Gen > f.Seq {
		f.Gen, f.GenTime, f.GenBy = f.Seq, f.SeqTime, f.SeqBy
	}

	// What must stay lowers the floors (never below the old one).
	protect := func(x uint64, why string) {
		p, err := planReplay(j, x)
		if err != nil || p.gen == 0 {
			return // not retained already (or nothing to keep)
		}
		t := o.Now
		if r, err := j.Get(p.gen); err == nil {
			t = time.Unix(0, r.Time)
		}
		if p.gen != x && p.gen < f.Seq {
			f.Seq, f.SeqTime, f.SeqBy = max(p.gen, old), t, why
		}
		if p.gen < f.Gen {
			f.Gen, f.GenTime, f.GenBy = p.gen, t, why
		}
	}
	names, err := Names(j)
	if err != nil {
		return Floors{}, err
	}
	for _, n := range names {
		protect(n.Seq, fmt.Sprintf("the name %q", n.Name))
	}
	for _, x := range pins {
		protect(x, "a rewind, restore or view in use")
	}
	// A record hold keeps every record from its seq on (a remote has
	// not received them): the fine floor goes to the generation its seq
	// replays from, also when that is the seq itself.
	for _, h := range o.Holds {
		if h.Seq > head {
			continue // the holder has every record
		}
		p, err := planReplay(j, h.Seq)
		if err != nil || p.gen == 0 {
			continue
		}
		t := o.Now
		if r, err := j.Get(p.gen); err == nil {
			t = time.Unix(0, r.Time)
		}
		if p.gen < f.Seq {
			f.Seq, f.SeqTime, f.SeqBy = max(p.gen, old), t, h.By
		}
		if p.gen < f.Gen {
			f.Gen, f.GenTime, f.GenBy = p.gen, t, h.By
		}
	}
	return f, nil
}

// RecordHold keeps every record from Seq on through a collection: By
// names who needs them (a remote that has not received them).
type RecordHold struct {
	Seq uint64
	By  string
}
