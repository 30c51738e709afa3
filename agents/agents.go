package agents

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"unicode"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// MaxState bounds one saved state: runtime state, not a file store.
const MaxState = 16 << 20

// ErrName: an agent name that is empty, too long or not printable.
var ErrName = errors.New("invalid agent name")

// ErrTooBig: a state over MaxState.
var ErrTooBig = errors.New("agent state too big")

// CheckName accepts 1-128 printable characters without '/' or spaces.
func CheckName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("%w %q: want 1 to 128 characters", ErrName, name)
	}
	for _, r := range name {
		if r == '/' || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w %q: no '/', spaces or control characters", ErrName, name)
		}
	}
	return nil
}

// Registry holds every agent's current state (name → blob hash) for a
// live workspace; the daemon keeps one, rewinds reset it.
type Registry struct {
	mu     sync.Mutex
	states map[string]cas.Hash
}

// NewRegistry starts from states (nil: none).
func NewRegistry(states map[string]cas.Hash) *Registry {
	return &Registry{states: maps.Clone(states)}
}

// Save stores state and appends the OpAgentState record naming it, synced.
// lk is held while the record is appended, so that a generation cut under
// the same lock sees either the whole save or none of it (nil offline).
//
// The registry takes the new state only once the journal has queued the
// record: a record it refuses (closed, or failed by a commit the full disk
// refused) has no seq, and a registry that took it anyway would have the
// next generation name a state that was never stored. A queued record
// whose commit then fails stays in the registry: the commit may have
// reached Badger in part, and the failed journal refuses every later
// generation, so nothing can name it before a restart reads the truth
// back from the journal.
func (r *Registry) Save(j *journal.Journal, lk sync.Locker, name string, state []byte) (uint64, cas.Hash, error) {
	return r.SaveFrom(j, lk, Origin{}, name, state)
}

// Origin says who saves a state: the process behind the control request
// and its run, recorded like a file operation's. Check, if set, runs under
// lk before the record is appended and refuses the save with its error: a
// save by a run a rewind cancelled must not land after the reset record.
type Origin struct {
	Pid              uint32
	Comm, Run, Agent string
	Check            func() error
}

// SaveFrom is Save on behalf of o.
func (r *Registry) SaveFrom(j *journal.Journal, lk sync.Locker, o Origin, name string, state []byte) (uint64, cas.Hash, error) {
	if err := CheckName(name); err != nil {
		return 0, cas.Hash{}, err
	}
	if len(state) > MaxState {
		return 0, cas.Hash{}, fmt.Errorf("%w: agent %s: %d bytes, at most %d", ErrTooBig, name, len(state), MaxState)
	}
	h := cas.Sum(state)
	rec := &journal.Record{Op: journal.OpAgentState, Label: name, Root: h, Pid: o.Pid, Comm: o.Comm, Run: o.Run, Agent: o.Agent}
	if lk != nil {
		lk.Lock()
	}
	if o.Check != nil {
		if err := o.Check(); err != nil {
			if lk != nil {
				lk.Unlock()
			}
			return 0, cas.Hash{}, fmt.Errorf("save agent %s: %w", name, err)
		}
	}
	p := j.Enqueue(rec, []cas.Blob{{Hash: h, Data: state}})
	if p.Refused() == nil {
		r.mu.Lock()
		if r.states == nil {
			r.states = map[string]cas.Hash{}
		}
		r.states[name] = h
		r.mu.Unlock()
	}
	if lk != nil {
		lk.Unlock()
	}
	if err := p.Wait(); err != nil {
		return 0, cas.Hash{}, fmt.Errorf("save agent %s: %w", name, err)
	}
	return p.Seq(), h, nil
}

// Refs returns the states as a generation record holds them, by name.
func (r *Registry) Refs() []journal.AgentRef {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Refs(r.states)
}

// Reset replaces every state (after a rewind).
func (r *Registry) Reset(states map[string]cas.Hash) {
	r.mu.Lock()
	r.states = maps.Clone(states)
	r.mu.Unlock()
}

// States returns a copy of the current states.
func (r *Registry) States() map[string]cas.Hash {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.states)
}

// Refs turns a state map into the sorted list a generation record holds.
func Refs(states map[string]cas.Hash) []journal.AgentRef {
	var out []journal.AgentRef
	for _, name := range slices.Sorted(maps.Keys(states)) {
		out = append(out, journal.AgentRef{Name: name, State: states[name]})
	}
	return out
}

// StatesAt returns every agent's state at seq x: the agent states of the
// nearest generation at or before x on x's active path (gens lists the
// generation seqs, oldest first), then the saves after it on that path up
// to x. Its cost is the records since that generation.
func StatesAt(j *journal.Journal, x uint64, gens []uint64) (map[string]cas.Hash, error) {
	path, err := j.Path()
	if err != nil {
		return nil, err
	}
	if x > j.Durable() {
		if err := j.Sync(); err != nil {
			return nil, err
		}
	}
	states := map[string]cas.Hash{}
	var from uint64 = 1
	for i := len(gens) - 1; i >= 0; i-- {
		g := gens[i]
		if g > x || !path.OnPath(g, x) {
			continue
		}
		rec, err := j.Get(g)
		if err != nil {
			return nil, fmt.Errorf("agent states at %d: generation %d: %w", x, g, err)
		}
		for _, a := range rec.Agents {
			states[a.Name] = a.State
		}
		from = g + 1
		break
	}
	errStop := errors.New("stop")
	err = j.Iter(from, func(rec *journal.Record) error {
		if rec.Seq > x {
			return errStop
		}
		if rec.Op == journal.OpAgentState && path.OnPath(rec.Seq, x) {
			states[rec.Label] = rec.Root
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, fmt.Errorf("agent states at %d: %w", x, err)
	}
	return states, nil
}
