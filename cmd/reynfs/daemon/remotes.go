package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/rewind/replica"
)

// Remotes on a mounted store (issue 12): remote.list, remote.add and
// remote.remove answer on the store the daemon holds (and, through the
// CLI's offline path, on an unmounted one); sync.mode starts or stops
// the continuous sync without a remount; forget raises a floor through
// the continuous sync's own lease.
//
// Credentials never cross the socket. `reynfs remote add` self-tests
// the server in the CLI, with the CLI's environment, as it does
// unmounted; the daemon stores only the name and URL. What the daemon
// sends later (push, sync, sync.mode continuous) uses the credentials
// of the environment it was mounted from, as mount --sync always has:
// a remote whose credentials the mount's environment lacks fails there
// (the continuous sync backs off and status shows why).

// remoteList lists the store's remotes, marking the one the continuous
// sync ships to (d nil: an unmounted store).
func remoteList(s *Service, d *Daemon) (*api.RemoteListResult, error) {
	rs, err := replica.Remotes(s.J)
	if err != nil {
		return nil, err
	}
	var sh *replica.Shipper
	var c syncConfig
	if d != nil {
		sh, c, _ = d.sync.running()
	}
	out := &api.RemoteListResult{Remotes: []api.Remote{}}
	for _, n := range replica.RemoteNames(rs) {
		r := api.Remote{Name: n, URL: rs[n]}
		if sh != nil && c.Remote == n {
			r.Sync, r.WS = SyncContinuous, c.WS
		}
		out.Remotes = append(out.Remotes, r)
	}
	return out, nil
}

// remoteAdd names a remote: the name checked, the URL's form checked
// (objstore.Open makes no request; the CLI self-tested the server), a
// name in use refused.
func remoteAdd(ctx context.Context, s *Service, p api.RemoteAddParams) (*api.RemoteResult, error) {
	if err := replica.CheckName(p.Name); err != nil {
		return nil, fmt.Errorf("%w: remote %v", ErrUsage, err)
	}
	b, err := objstore.Open(ctx, p.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	rs, err := replica.Remotes(s.J)
	if err != nil {
		return nil, err
	}
	if u, ok := rs[p.Name]; ok {
		return nil, fmt.Errorf("%w: remote %s exists already (%s); 'reynfs remote remove %s' first", ErrUsage, p.Name, u, p.Name)
	}
	if err := replica.SetRemote(s.J, p.Name, b.String()); err != nil {
		return nil, err
	}
	return &api.RemoteResult{Remote: api.Remote{Name: p.Name, URL: b.String()}}, nil
}

// remoteRemove forgets a remote's name. The remote the continuous sync
// ships to is refused rather than the sync stopped behind the user's
// back: stopping it drains what is unshipped (up to the drain bound) and
// ends the replication they asked for; 'reynfs sync --manual' says so
// explicitly, and is one command.
func remoteRemove(s *Service, d *Daemon, p api.RemoteRemoveParams) (*api.RemoteResult, error) {
	if err := replica.CheckName(p.Name); err != nil {
		return nil, fmt.Errorf("%w: remote %v", ErrUsage, err)
	}
	if d != nil {
		if sh, ws := d.continuousFor(p.Name); sh != nil {
			return nil, fmt.Errorf("%w: remote %s: the continuous sync ships workspace %s to it; 'reynfs sync --manual' (or 'reynfs mount --sync manual' at the next mount, or unmount) turns it off first", ErrUsage, p.Name, ws)
		}
	}
	rs, err := replica.Remotes(s.J)
	if err != nil {
		return nil, err
	}
	u, ok := rs[p.Name]
	if !ok {
		return nil, fmt.Errorf("%w: no remote %s ('reynfs remote list' names them)", ErrUsage, p.Name)
	}
	if _, err := replica.RemoveRemote(s.J, p.Name); err != nil {
		return nil, err
	}
	return &api.RemoteResult{Remote: api.Remote{Name: p.Name, URL: u}}, nil
}

// SetSyncMode turns the continuous sync on or off while mounted (see
// api.SyncModeParams); the store remembers the mode as mount --sync
// does (metaSync).
func (d *Daemon) SetSyncMode(ctx context.Context, p api.SyncModeParams) (*api.SyncModeResult, error) {
	if d.sync == nil {
		return nil, fmt.Errorf("%w: this mount does not replicate (no sync to turn on or off)", ErrUsage)
	}
	switch p.Mode {
	case SyncManual:
		if p.Remote != "" || p.WS != "" {
			return nil, fmt.Errorf("%w: sync --manual takes no remote or workspace (it stops the continuous sync)", ErrUsage)
		}
		d.sync.push.Lock() // no sync.mode continuous starts while this one drains
		defer d.sync.push.Unlock()
		d.sync.mu.Lock()
		sh, c := d.sync.sh, d.sync.cfg
		d.sync.sh, d.sync.cfg, d.sync.url, d.sync.b = nil, syncConfig{}, "", nil
		d.sync.mu.Unlock()
		if err := d.j.SetMeta(metaSync, nil); err != nil {
			return nil, err
		}
		if sh == nil {
			return &api.SyncModeResult{Mode: SyncManual}, nil
		}
		w := d.drainSync(sh, c)
		d.log.Info().Str("remote", c.Remote).Msg("sync: manual (turned off while mounted)")
		return &api.SyncModeResult{Mode: SyncManual, Remote: c.Remote, WS: c.WS, Changed: true, Warning: w}, nil
	case SyncContinuous:
	default:
		return nil, fmt.Errorf("%w: sync mode %q: want continuous or manual", ErrUsage, p.Mode)
	}
	rs, err := replica.Remotes(d.j)
	if err != nil {
		return nil, err
	}
	name, err := PickRemote(rs, p.Remote)
	if err != nil {
		return nil, err
	}
	ws := cmp.Or(p.WS, filepath.Base(d.cfg.Dir))
	if err := replica.CheckName(ws); err != nil {
		return nil, fmt.Errorf("%w: workspace %v (--ws names another)", ErrUsage, err)
	}
	ttl, err := leaseTTL()
	if err != nil {
		return nil, err
	}
	b, err := objstore.Open(ctx, rs[name])
	if err != nil {
		return nil, fmt.Errorf("%w: remote %s: %v", ErrUsage, name, err)
	}
	sh, running, err := d.startShipper(syncConfig{Mode: SyncContinuous, Remote: name, WS: ws}, rs[name], b, ttl)
	if err != nil || running {
		if running {
			return &api.SyncModeResult{Mode: SyncContinuous, Remote: name, URL: rs[name], WS: ws}, nil
		}
		return nil, err
	}
	d.log.Info().Str("remote", name).Str("url", rs[name]).Str("ws", ws).Msg("sync: continuous (turned on while mounted)")
	st := firstState(ctx, sh, 5*time.Second) // no lock held: status answers meanwhile
	return &api.SyncModeResult{Mode: SyncContinuous, Remote: name, URL: rs[name], WS: ws, Changed: true,
		State: st.State, Reason: st.Reason}, nil
}

// startShipper starts the continuous sync c and remembers it; running:
// that very sync runs already.
func (d *Daemon) startShipper(c syncConfig, url string, b objstore.Backend, ttl time.Duration) (*replica.Shipper, bool, error) {
	d.sync.push.Lock() // a one-shot push to it ends first: one writer
	defer d.sync.push.Unlock()
	d.sync.mu.Lock()
	defer d.sync.mu.Unlock()
	if d.sync.closed {
		return nil, false, fmt.Errorf("%w: the workspace is unmounting", ErrNotRunning)
	}
	if sh := d.sync.sh; sh != nil {
		if d.sync.cfg == c {
			return sh, true, nil
		}
		return nil, false, fmt.Errorf("%w: the continuous sync ships workspace %s to %s; 'reynfs sync --manual' first", ErrUsage, d.sync.cfg.WS, d.sync.cfg.Remote)
	}
	sh, err := replica.StartShipper(d.j, b, c.WS, replica.ShipOptions{Options: replica.Options{TTL: ttl},
		Log: d.log.With().Str("sync", c.Remote).Logger()})
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	v, _ := json.Marshal(c)
	if err := d.j.SetMeta(metaSync, v); err != nil {
		_, _ = sh.Stop(context.Background())
		return nil, false, err
	}
	d.sync.sh, d.sync.cfg, d.sync.url, d.sync.b, d.sync.ttl = sh, c, url, b, ttl
	return sh, false, nil
}

// firstState waits (up to d) for a shipper just started to leave
// "starting": it holds the lease, or could not take it (stopped, or
// backing off), so the caller hears of a locked remote at once.
func firstState(ctx context.Context, sh *replica.Shipper, d time.Duration) replica.ShipStatus {
	deadline := time.Now().Add(d)
	for {
		st := sh.Status()
		if st.State != replica.ShipStarting || time.Now().After(deadline) || ctx.Err() != nil {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Forget raises a workspace's floor on the remote the continuous sync
// ships it to, through the sync's lease (replica.Shipper.Forget).
func (d *Daemon) Forget(ctx context.Context, p api.ForgetParams) (*api.ForgetInfo, error) {
	sh, ws := d.continuousFor(p.Remote)
	if sh == nil || p.WS != "" && p.WS != ws {
		return nil, fmt.Errorf("%w: no continuous sync ships %s#%s from this mount", ErrUsage, p.Remote, cmp.Or(p.WS, ws))
	}
	r, err := sh.Forget(ctx, p.Target)
	if errors.Is(err, replica.ErrTarget) {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if err != nil {
		return nil, err
	}
	return &api.ForgetInfo{Remote: r.Remote, WS: r.WS, ID: r.ID, Seq: r.Seq, From: r.From, OldFloor: r.OldFloor,
		Floor: r.Floor, Generations: r.Generations, Dropped: r.Dropped, Changed: r.Changed}, nil
}
