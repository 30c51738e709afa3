package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
)

// followMeta is the journal meta key of a follower store:
// {"source":"origin#main","url":URL,"ws":WS}; absent: not a follower.
const followMeta = "follow"

// FollowConfig is what a follower store remembers (mount --follow).
type FollowConfig struct {
	// Source is what the user gave (a URL or a remote's name, with #WS),
	// for messages.
	Source string `json:"source"`
	URL    string `json:"url"`
	WS     string `json:"ws"`
}

// SetFollow marks the store j as a follower of c.URL#c.WS: from now on
// it refuses every write to a remote (push, continuous sync).
func SetFollow(j *journal.Journal, c FollowConfig) error {
	if err := CheckName(c.WS); err != nil {
		return fmt.Errorf("follow: workspace %w", err)
	}
	v, _ := json.Marshal(c)
	if err := j.SetMeta(followMeta, v); err != nil {
		return err
	}
	return j.DB().Sync()
}

// Following returns the store's follow configuration (nil: the store is
// not a follower).
func Following(j *journal.Journal) (*FollowConfig, error) {
	v, err := j.GetMeta(followMeta)
	if err != nil || len(v) == 0 {
		return nil, err
	}
	var c FollowConfig
	if err := json.Unmarshal(v, &c); err != nil {
		return nil, fmt.Errorf("store meta %s: %w", followMeta, err)
	}
	return &c, nil
}

// ErrFollower: the store follows a workspace written elsewhere and is
// read-only (FollowerError says which).
var ErrFollower = errors.New("read-only follower")

// FollowerError refuses a write to a follower store.
type FollowerError struct{ Source string }

func (e *FollowerError) Error() string {
	return fmt.Sprintf("this store follows %s: read-only", e.Source)
}

func (e *FollowerError) Unwrap() error { return ErrFollower }

// refuseFollower is the check every writer to a remote runs first.
func refuseFollower(j *journal.Journal) error {
	c, err := Following(j)
	if err != nil {
		return err
	}
	if c != nil {
		return &FollowerError{Source: c.Source}
	}
	return nil
}

// The follower's states (FollowStatus.State).
const (
	FollowStarting  = "starting"
	FollowFollowing = "following"
	FollowDown      = "backing-off"
	FollowStopped   = "stopped"
)

// FollowOptions run a Follower.
type FollowOptions struct {
	Every      time.Duration // how often HEAD is read (1 s)
	MinBackoff time.Duration // the first retry's wait when the remote fails (500 ms)
	MaxBackoff time.Duration // the backoff's cap (30 s)
	Log        zerolog.Logger
	// Advance moves what is served to the state at seq head, once the
	// records through head are in the store (rewind.Rewinder.Advance).
	Advance func(head uint64) error
	// Served is the seq served when the follower starts (the store's
	// head).
	Served uint64
}

// FollowStatus is what status shows of a follower.
type FollowStatus struct {
	Source     string    `json:"source"`
	URL        string    `json:"url"`
	WS         string    `json:"ws"`
	State      string    `json:"state"`
	Since      time.Time `json:"since"`
	Local      uint64    `json:"local_seq"`   // the seq served
	Remote     uint64    `json:"remote_seq"`  // HEAD's seq when last read
	LagRecords uint64    `json:"lag_records"` // Remote - Local
	// LagSeconds: how long HEAD has been past what is served (0: not).
	LagSeconds float64   `json:"lag_seconds"`
	LastError  string    `json:"last_error,omitempty"`
	Reason     string    `json:"reason,omitempty"` // why it stopped
	Checked    time.Time `json:"checked"`          // HEAD last read
}

// Follower keeps a follower store at its remote workspace's head: it
// reads HEAD every Every and, when its seq moved, fetches the new
// records (Fetch) and has them served (Advance).
type Follower struct {
	j      *journal.Journal
	b      objstore.Backend
	c      FollowConfig
	o      FollowOptions
	cancel context.CancelFunc
	done   chan struct{}

	ix IndexCache // index files read by earlier steps

	mu     sync.Mutex
	st     FollowStatus
	behind time.Time // when HEAD was first seen past what is served
}

// StartFollower starts following c on the store j (a follower store:
// SetFollow was called) through b.
func StartFollower(j *journal.Journal, b objstore.Backend, c FollowConfig, o FollowOptions) (*Follower, error) {
	if err := CheckName(c.WS); err != nil {
		return nil, fmt.Errorf("follow: workspace %w", err)
	}
	if o.Advance == nil {
		return nil, errors.New("follow: no Advance")
	}
	if o.Every <= 0 {
		o.Every = time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 500 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Follower{j: j, b: b, c: c, o: o, cancel: cancel, done: make(chan struct{}), ix: IndexCache{}}
	f.st = FollowStatus{Source: c.Source, URL: c.URL, WS: c.WS, State: FollowStarting, Since: time.Now(), Local: o.Served}
	go f.run(ctx)
	return f, nil
}

// Stop ends the follower and waits for its step in flight.
func (f *Follower) Stop() {
	f.cancel()
	<-f.done
}

// Status returns the follower's state.
func (f *Follower) Status() FollowStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st
	if st.Remote > st.Local {
		st.LagRecords = st.Remote - st.Local
		if !f.behind.IsZero() {
			st.LagSeconds = time.Since(f.behind).Seconds()
		}
	}
	return st
}

func (f *Follower) run(ctx context.Context) {
	defer close(f.done)
	backoff := time.Duration(0)
	for {
		err := f.step(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := f.o.Every
		switch {
		case err == nil:
			backoff = 0
			f.setState(FollowFollowing, "", "")
		case stopsFollowing(err):
			f.setState(FollowStopped, "", err.Error())
			return
		default:
			backoff = min(max(backoff*2, f.o.MinBackoff), f.o.MaxBackoff)
			wait = backoff
			f.setState(FollowDown, err.Error(), "")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// stopsFollowing: errors no retry mends. A takeover (a new epoch that
// continues HEAD's seqs) and a raised floor are not among them: Fetch
// follows both.
func stopsFollowing(err error) bool {
	return errors.Is(err, ErrDiverged) || errors.Is(err, ErrCloneAgain) || errors.Is(err, ErrCorrupt)
}

// setState records the state, with one log line per change of state (a
// remote that stays down is not logged every retry).
func (f *Follower) setState(state, lastErr, reason string) {
	f.mu.Lock()
	changed := f.st.State != state
	if changed {
		f.st.State, f.st.Since = state, time.Now()
	}
	f.st.LastError, f.st.Reason = lastErr, reason
	st := f.st
	f.mu.Unlock()
	if !changed {
		return
	}
	ev := f.o.Log.Info()
	switch state {
	case FollowDown:
		ev = f.o.Log.Warn().Str("error", lastErr)
	case FollowStopped:
		ev = f.o.Log.Error().Str("reason", reason)
	}
	ev.Str("remote", f.c.URL).Str("ws", f.c.WS).Uint64("local", st.Local).Uint64("remote_seq", st.Remote).Msg("follow: " + state)
}

// step reads HEAD and, when it moved past what is served, fetches and
// advances.
func (f *Follower) step(ctx context.Context) error {
	h, _, err := ReadHead(ctx, f.b, f.c.WS)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.st.Remote, f.st.Checked = h.Seq, time.Now()
	served := f.st.Local
	if h.Seq > served && f.behind.IsZero() {
		f.behind = time.Now()
	}
	f.mu.Unlock()
	if h.Seq == served && f.j.Head() == served {
		return nil
	}
	if h.Seq < served {
		return fmt.Errorf("%w: the remote's HEAD is at seq %d, behind the seq %d this follower serves", ErrDiverged, h.Seq, served)
	}
	if _, err := FetchWith(ctx, f.j, f.b, f.c.WS, f.ix); err != nil {
		return err
	}
	head := f.j.Head()
	if head != served {
		if err := f.o.Advance(head); err != nil {
			return fmt.Errorf("serve seq %d: %w", head, err)
		}
	}
	f.mu.Lock()
	f.st.Local = head
	if f.st.Remote <= head {
		f.behind = time.Time{}
	}
	f.mu.Unlock()
	return nil
}
