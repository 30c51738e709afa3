package daemon

// A follower mount (mount --follow URL#WS DIR) serves a workspace that
// is written elsewhere, read-only, and keeps it at the remote's head. The
// CLI makes the store (a lazy clone of head) and marks it a follower
// (replica.SetFollow); from then on every mount of that store follows:
//
//   - the kernel mount is read-only (fs.Options.ReadOnly: every mutation
//     is EROFS before it reaches a handler), and the control methods
//     that would append a record or write to a remote (checkpoint,
//     rewind, restore, undo, redo, checkout, branch naming, agent save,
//     push, sync) are refused with "DIR follows SRC: read-only", mounted
//     or not (dispatch's guard; replica refuses a follower's push and
//     lease itself). The unmount cuts no generation: the write-back
//     writes the live tree as it is.
//   - a replica.Follower reads HEAD every --follow-every (1 s); when its
//     seq moved it fetches the new records under their own seqs
//     (replica.Fetch: objects first) and has the live tree moved to the
//     new head by rewind.Rewinder.Advance, which appends nothing: the
//     follower's journal is always a prefix of the remote's, so the next
//     fetch never finds it diverged. Advance reconstructs and swaps
//     under the live lock and invalidates the kernel's caches after
//     releasing it, as a rewind does (invariant 12).
//   - the remote down: the follower backs off (500 ms doubling to 30 s,
//     one log line per change of state) and the mount serves what it
//     has; status shows it. A history that no longer continues the
//     store's (diverged, the workspace made again, its seqs forgotten
//     past what the store holds) stops the follower with the reason.
//   - a project directory changed while unmounted is refused: a follower
//     records nothing of its own.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
	"github.com/reynfs/reynfs/rewind/replica"
)

// DefaultFollowEvery is how often a follower reads its remote's HEAD.
const DefaultFollowEvery = time.Second

type followState struct {
	cfg *replica.FollowConfig // nil: not a follower
	f   *replica.Follower
}

// loadFollow reads whether the store is a follower.
func (d *Daemon) loadFollow() error {
	c, err := replica.Following(d.j)
	d.follow.cfg = c
	return err
}

// followerError is the one line that refuses a change to a follower.
func followerError(dir string, c *replica.FollowConfig) error {
	return fmt.Errorf("%w: %s follows %s: read-only", ErrUsage, dir, c.Source)
}

// startFollow starts the follower once mounted.
func (d *Daemon) startFollow() error {
	c := d.follow.cfg
	if c == nil {
		return nil
	}
	ctx := cmp.Or(d.cfg.Ctx, context.Background())
	b, err := objstore.Open(ctx, c.URL)
	if err != nil {
		return fmt.Errorf("%w: follow %s: %v", ErrUsage, c.Source, err)
	}
	log := d.log.With().Str("follow", c.Source).Logger()
	f, err := replica.StartFollower(d.j, b, *c, replica.FollowOptions{
		Every: cmp.Or(d.cfg.FollowEvery, DefaultFollowEvery), Log: log, Served: d.j.Head(),
		Advance: func(head uint64) error {
			res, err := d.svc.RW.Advance(head)
			if err == nil {
				log.Debug().Uint64("seq", head).Int("changes", len(res.Changes)).Dur("took", res.Took).Msg("follow: serving")
			}
			return err
		}})
	if err != nil {
		return err
	}
	d.follow.f = f
	log.Info().Str("url", c.URL).Str("ws", c.WS).Msg("follow: read-only follower")
	return nil
}

// stopFollow stops the follower (before the unmount's write-back).
func (d *Daemon) stopFollow() {
	if d.follow.f != nil {
		d.follow.f.Stop()
	}
}

// unmountRoot is the root the unmount writes back: a new generation's,
// or on a follower, which cuts none, the live tree's own.
func (d *Daemon) unmountRoot() (cas.Hash, error) {
	if d.follow.cfg == nil {
		g, err := d.svc.RW.Cut(rewind.KindAuto, "unmount")
		if err != nil {
			return cas.Hash{}, err
		}
		return g.Root, nil
	}
	d.live.Lock()
	defer d.live.Unlock()
	root, blobs, err := d.live.Tree().Root()
	if err != nil {
		return cas.Hash{}, err
	}
	// The write-back records root as what the directory holds: its
	// objects must be stored (Root hands new ones out once).
	return root, rewind.StoreBlobs(d.j.Objects(), blobs)
}

// followStatus is status's follower part (nil: not a follower).
func (d *Daemon) followStatus() *api.FollowStatus {
	c := d.follow.cfg
	if c == nil {
		return nil
	}
	if d.follow.f == nil {
		return &api.FollowStatus{Source: c.Source, URL: c.URL, WS: c.WS, State: replica.FollowStopped,
			LocalSeq: d.j.Head(), Reason: "not started"}
	}
	st := d.follow.f.Status()
	return &api.FollowStatus{Source: st.Source, URL: st.URL, WS: st.WS, State: st.State,
		Since: st.Since.UTC().Format(time.RFC3339), LocalSeq: st.Local, RemoteSeq: st.Remote,
		LagRecords: st.LagRecords, LagSeconds: st.LagSeconds, LastError: st.LastError, Reason: st.Reason}
}

// storeFollowStatus is the follower part of an unmounted store's
// status (nil: not a follower): what it follows and the seq it holds.
func storeFollowStatus(j *journal.Journal) (*api.FollowStatus, error) {
	c, err := replica.Following(j)
	if err != nil || c == nil {
		return nil, err
	}
	return &api.FollowStatus{Source: c.Source, URL: c.URL, WS: c.WS, State: "not mounted", LocalSeq: j.Head()}, nil
}

// followerRefuses refuses, on a follower store (mounted or not), the
// control methods that would append a record or write to a remote.
func followerRefuses(s *Service, d *Daemon, method string, raw json.RawMessage) error {
	switch method {
	case api.CheckpointParams{}.Method(), api.AgentSaveParams{}.Method(), api.UndoParams{}.Method(),
		api.RedoParams{}.Method(), api.BranchNameParams{}.Method(), api.CheckoutParams{}.Method(),
		api.PushParams{}.Method(), api.SyncParams{}.Method(), api.SyncModeParams{}.Method():
	case api.RewindParams{}.Method():
		if p, err := params[api.RewindParams](raw); err == nil && p.Dry {
			return nil
		}
	case api.RestoreParams{}.Method():
		if p, err := params[api.RestoreParams](raw); err == nil && p.Dry {
			return nil
		}
	default:
		return nil
	}
	c := (*replica.FollowConfig)(nil)
	dir := ""
	if d != nil {
		c, dir = d.follow.cfg, d.cfg.Dir
	} else if s != nil && s.J != nil {
		var err error
		if c, err = replica.Following(s.J); err != nil {
			return err
		}
		b, _ := s.J.GetMeta(metaDir)
		dir = cmp.Or(string(b), "the workspace")
	}
	if c == nil {
		return nil
	}
	return followerError(dir, c)
}
