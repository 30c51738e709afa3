package rewind

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/reynfs/reynfs/journal"
)

// Retention policy (ADR D5): two windows. The fine one keeps every seq
// (every state, on every branch whose history is inside it) for an age or
// a number of records; the coarse one keeps generations (their trees and
// agent states, not the records between them) for a longer age or a
// number of generations, counting only the kinds a person cuts or sees
// (not auto or rewind). Past both, history goes and its objects with it.
// The policy is kept in the store, so every mount and every offline gc of
// the store applies the same one.

// metaPolicy holds the store's policy as JSON; absent: DefaultPolicy.
const metaPolicy = "rewind.retention"

// ErrPolicy: a retention window or policy that cannot be used.
var ErrPolicy = errors.New("bad retention policy")

// Window is one retention window: an age or a count (exactly one is set).
type Window struct {
	Age   time.Duration `json:"age_ns,omitempty"`
	Count int           `json:"count,omitempty"`
}

// Policy is a store's retention.
type Policy struct {
	Seqs        Window        `json:"seqs"`        // fine: every seq
	Generations Window        `json:"generations"` // coarse: generations
	Every       time.Duration `json:"every_ns"`    // the mounted collector's period
}

const day = 24 * time.Hour

// DefaultPolicy is a store's policy until one is set: every seq for a
// week, generations for 90 days, collected every 10 minutes while mounted.
var DefaultPolicy = Policy{Seqs: Window{Age: 7 * day}, Generations: Window{Age: 90 * day}, Every: 10 * time.Minute}

// ParseWindow reads a window: a count ("500") or an age with a unit of s,
// m, h, d or w ("36h", "7d", "2w"; Go durations such as "1h30m" too).
func ParseWindow(s string) (Window, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 {
			return Window{}, fmt.Errorf("%w: window %q: a count is at least 1", ErrPolicy, s)
		}
		return Window{Count: n}, nil
	}
	d, err := parseAge(s)
	if err != nil {
		return Window{}, fmt.Errorf("%w: %q: want a count (500) or an age of at least 1s (90s, 36h, 7d, 2w)", ErrPolicy, s)
	}
	return Window{Age: d}, nil
}

// parseAge reads a positive age: a number and d or w, or a Go duration.
func parseAge(s string) (time.Duration, error) {
	var d time.Duration
	err := errors.New("empty")
	if n := len(s); n > 1 && (s[n-1] == 'd' || s[n-1] == 'w') {
		unit := day
		if s[n-1] == 'w' {
			unit = 7 * day
		}
		var f float64
		if f, err = strconv.ParseFloat(s[:n-1], 64); err == nil && f < 1e6 {
			d = time.Duration(f * float64(unit))
		}
	} else if n > 0 {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("%w: %q: want an age of at least 1s (90s, 36h, 7d, 2w)", ErrPolicy, s)
	}
	return d, nil
}

// String is the window as ParseWindow reads it.
func (w Window) String() string {
	if w.Count > 0 {
		return strconv.Itoa(w.Count)
	}
	return age(w.Age)
}

// age writes whole days as Nd and the rest as a Go duration.
func age(d time.Duration) string {
	if d >= day && d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	return d.String()
}

// Describe names the window for a message: "7d" or "500 records".
func (w Window) describe(what string) string {
	if w.Count > 0 {
		return fmt.Sprintf("%d %s", w.Count, what)
	}
	return age(w.Age)
}

// Check refuses a policy with a window that is neither an age nor a count
// (or both), or a collector period under a second.
func (p Policy) Check() error {
	for _, w := range []struct {
		name string
		w    Window
	}{{"seqs", p.Seqs}, {"generations", p.Generations}} {
		if (w.w.Count > 0) == (w.w.Age > 0) || w.w.Count < 0 || (w.w.Age > 0 && w.w.Age < time.Second) {
			return fmt.Errorf("%w: the %s window must be a count ≥ 1 or an age ≥ 1s", ErrPolicy, w.name)
		}
	}
	if p.Every < time.Second {
		return fmt.Errorf("%w: the collector period must be at least 1s", ErrPolicy)
	}
	return nil
}

// LoadPolicy returns the store's policy and whether one was set (else it
// is DefaultPolicy).
func LoadPolicy(j *journal.Journal) (Policy, bool, error) {
	b, err := j.GetMeta(metaPolicy)
	if err != nil || len(b) == 0 {
		return DefaultPolicy, false, err
	}
	var p Policy
	if err := json.Unmarshal(b, &p); err != nil {
		return DefaultPolicy, false, fmt.Errorf("%w: store meta %s: %v", journal.ErrCorrupt, metaPolicy, err)
	}
	if p.Every == 0 {
		p.Every = DefaultPolicy.Every
	}
	if err := p.Check(); err != nil {
		return DefaultPolicy, false, fmt.Errorf("store meta %s: %w", metaPolicy, err)
	}
	return p, true, nil
}

// SavePolicy checks p and keeps it in the store. It takes effect at the
// next collection.
func SavePolicy(j *journal.Journal, p Policy) error {
	if err := p.Check(); err != nil {
		return err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := j.SetMeta(metaPolicy, b); err != nil {
		return fmt.Errorf("save retention policy: %w", err)
	}
	return nil
}

// RetentionInfo is a store's policy and where its floors stand.
type RetentionInfo struct {
	Seqs        string `json:"seqs"`        // the fine window: an age (7d) or a count of records
	Generations string `json:"generations"` // the coarse window: an age or a count of generations
	Every       string `json:"every"`       // the mounted collector's period
	Set         bool   `json:"set"`         // false: the default policy
	Floor       uint64 `json:"floor_seq"`   // the first seq kept whole
	// Floors are as the last collection set them (zero before one ran).
	Floors Floors `json:"floors"`
}

// Retention reports the store's policy and floors.
func Retention(j *journal.Journal) (*RetentionInfo, error) {
	p, set, err := LoadPolicy(j)
	if err != nil {
		return nil, err
	}
	floor, err := j.Floor()
	if err != nil {
		return nil, err
	}
	return &RetentionInfo{Seqs: p.Seqs.String(), Generations: p.Generations.String(), Every: age(p.Every),
		Set: set, Floor: floor, Floors: loadFloors(j)}, nil
}

// SetRetention changes the windows given (an empty one stays as it is),
// or, with reset, goes back to the default policy, and reports the result.
func SetRetention(j *journal.Journal, seqs, gens, every string, reset bool) (*RetentionInfo, error) {
	p, _, err := LoadPolicy(j)
	if err != nil && !reset {
		return nil, err
	}
	if reset {
		p = DefaultPolicy
	}
	if seqs != "" {
		if p.Seqs, err = ParseWindow(seqs); err != nil {
			return nil, fmt.Errorf("seqs window: %w", err)
		}
	}
	if gens != "" {
		if p.Generations, err = ParseWindow(gens); err != nil {
			return nil, fmt.Errorf("generations window: %w", err)
		}
	}
	if every != "" {
		if p.Every, err = parseAge(every); err != nil {
			return nil, fmt.Errorf("collector period: %w", err)
		}
	}
	if reset && seqs == "" && gens == "" && every == "" {
		if err := j.SetMeta(metaPolicy, nil); err != nil {
			return nil, fmt.Errorf("reset retention policy: %w", err)
		}
	} else if err := SavePolicy(j, p); err != nil {
		return nil, err
	}
	return Retention(j)
}
