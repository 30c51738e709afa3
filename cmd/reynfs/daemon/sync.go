package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
	"github.com/reynfs/reynfs/rewind/replica"
)

// Replication while mounted (issue 12). `mount --sync continuous` runs a
// replica.Shipper for the mount's life; the store remembers the choice
// (metaSync) like --views-name, and `--sync manual` forgets it. Push and
// sync through the control socket run on the live journal: with the
// continuous sync's remote they wait for it, else a push runs beside
// the mount. Local retention keeps what a remote has not received
// (syncHolds).

// The sync modes of mount --sync.
const (
	SyncContinuous = "continuous"
	SyncManual     = "manual"
)

// metaSync: {"mode":"continuous","remote":NAME,"ws":WS}; absent: manual.
const metaSync = "sync"

// DefaultSyncDrain bounds how long an unmount waits for a continuous
// sync to ship the rest.
const DefaultSyncDrain = 10 * time.Second

// LeaseTTLEnv sets the lease's TTL of pushes and continuous syncs (tests
// shorten it).
const LeaseTTLEnv = "REYNFS_LEASE_TTL"

type syncConfig struct {
	Mode   string `json:"mode"`
	Remote string `json:"remote"`
	WS     string `json:"ws"`
}

func loadSync(j *journal.Journal) (syncConfig, error) {
	var c syncConfig
	b, err := j.GetMeta(metaSync)
	if err != nil || len(b) == 0 {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("store meta %s: %w", metaSync, err)
	}
	return c, nil
}

// PickRemote resolves a remote name: the one given, else "origin", else
// the store's only remote; rs is the store's remotes.
func PickRemote(rs map[string]string, name string) (string, error) {
	names := replica.RemoteNames(rs)
	switch {
	case name != "":
		if _, ok := rs[name]; !ok {
			return "", fmt.Errorf("%w: no remote %s (the store names %s; 'reynfs remote add %s URL' names one)", ErrUsage, name, listOr(names), name)
		}
		return name, nil
	case rs["origin"] != "":
		return "origin", nil
	case len(names) == 1:
		return names[0], nil
	case len(names) == 0:
		return "", fmt.Errorf("%w: the store names no remote ('reynfs remote add NAME URL' names one)", ErrUsage)
	}
	return "", fmt.Errorf("%w: the store names %d remotes (%s) and none is origin: name one (--remote NAME)", ErrUsage, len(names), strings.Join(names, ", "))
}

func listOr(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func leaseTTL() (time.Duration, error) {
	v := os.Getenv(LeaseTTLEnv)
	if v == "" {
		return 0, nil
	}
	ttl, err := time.ParseDuration(v)
	if err != nil || ttl <= 0 {
		return 0, fmt.Errorf("%w: %s=%q: want a positive duration", ErrUsage, LeaseTTLEnv, v)
	}
	return ttl, nil
}

// syncer is a daemon's replication: the continuous sync (sh, nil when
// manual) and the one-shot pushes beside it. d.sync is set once mounted
// and never replaced; sync.mode (syncmode.go) changes its fields under
// mu, so a reader takes them with running.
type syncer struct {
	mu     sync.Mutex
	cfg    syncConfig
	url    string
	b      objstore.Backend
	ttl    time.Duration // the lease's (0: the shipper's default)
	sh     *replica.Shipper
	closed bool       // unmounting: no sync starts any more
	push   sync.Mutex // one mounted push at a time
}

// running returns the continuous sync (nil when manual) with its
// config and URL.
func (s *syncer) running() (*replica.Shipper, syncConfig, string) {
	if s == nil {
		return nil, syncConfig{}, ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sh, s.cfg, s.url
}

// prepareSync settles the sync mode before the mount: the flag, else
// what the store remembers; a continuous sync's remote must resolve
// (no remote, or several and none named, is refused). It remembers the
// choice and returns the syncer to start (nil: manual).
func (d *Daemon) prepareSync() (*syncer, error) {
	old, err := loadSync(d.j)
	if err != nil {
		return nil, err
	}
	if fc := d.follow.cfg; fc != nil { // follow.go: never written to a remote
		if d.cfg.Sync == SyncContinuous {
			return nil, fmt.Errorf("--sync continuous: %w", followerError(d.cfg.Dir, fc))
		}
		return nil, nil
	}
	c := old
	switch d.cfg.Sync {
	case "":
		if c.Mode != SyncContinuous {
			return nil, nil
		}
		c.Remote = cmp.Or(d.cfg.SyncRemote, c.Remote)
	case SyncManual:
		if d.cfg.SyncRemote != "" {
			return nil, fmt.Errorf("%w: --remote goes with --sync continuous", ErrUsage)
		}
		if old.Mode != "" {
			return nil, d.j.SetMeta(metaSync, nil)
		}
		return nil, nil
	case SyncContinuous:
		c = syncConfig{Mode: SyncContinuous, Remote: d.cfg.SyncRemote}
	default:
		return nil, fmt.Errorf("%w: --sync %q: want continuous or manual", ErrUsage, d.cfg.Sync)
	}
	rs, err := replica.Remotes(d.j)
	if err != nil {
		return nil, err
	}
	if _, ok := rs[c.Remote]; !ok && d.cfg.Sync == "" && d.cfg.SyncRemote == "" && c.Remote != "" {
		// The remembered sync's remote was removed ('reynfs remote
		// remove'): the sync ends with it, said once.
		if d.cfg.Warn != nil {
			d.cfg.Warn(fmt.Sprintf("the continuous sync's remote %s was removed: syncing is off ('reynfs mount --sync continuous --remote NAME' turns it on)", c.Remote))
		}
		d.log.Warn().Str("remote", c.Remote).Msg("sync: the remote was removed; continuous sync off")
		return nil, d.j.SetMeta(metaSync, nil)
	}
	if c.Remote, err = PickRemote(rs, c.Remote); err != nil {
		return nil, fmt.Errorf("--sync continuous: %w ('reynfs mount --sync manual' turns the sync off)", err)
	}
	if c.Remote != old.Remote || c.WS == "" {
		c.WS = filepath.Base(d.cfg.Dir)
	}
	if err := replica.CheckName(c.WS); err != nil {
		return nil, fmt.Errorf("%w: --sync continuous: workspace %v (push --ws names another)", ErrUsage, err)
	}
	ttl, err := leaseTTL()
	if err != nil {
		return nil, err
	}
	ctx := cmp.Or(d.cfg.Ctx, context.Background())
	b, err := objstore.Open(ctx, rs[c.Remote])
	if err != nil {
		return nil, fmt.Errorf("%w: remote %s: %v", ErrUsage, c.Remote, err)
	}
	if c != old {
		v, _ := json.Marshal(c)
		if err := d.j.SetMeta(metaSync, v); err != nil {
			return nil, err
		}
	}
	return &syncer{cfg: c, url: rs[c.Remote], b: b, ttl: ttl}, nil
}

// startSync starts the continuous sync once mounted.
func (d *Daemon) startSync(s *syncer) {
	if s == nil {
		d.sync = &syncer{}
		return
	}
	sh, err := replica.StartShipper(d.j, s.b, s.cfg.WS, replica.ShipOptions{Options: replica.Options{TTL: s.ttl},
		Log: d.log.With().Str("sync", s.cfg.Remote).Logger()})
	if err != nil { // the name was checked by prepareSync
		d.log.Error().Err(err).Msg("sync: not started")
		d.sync = &syncer{}
		return
	}
	s.sh = sh
	d.sync = s
	d.log.Info().Str("remote", s.cfg.Remote).Str("url", s.url).Str("ws", s.cfg.WS).Msg("sync: continuous")
}

// stopSync ships what it can within the drain bound and releases the
// lease; it returns a warning for whoever unmounts when records stay
// unshipped ("" when none).
func (d *Daemon) stopSync() string {
	if d.sync == nil {
		return ""
	}
	d.sync.mu.Lock()
	d.sync.closed = true
	sh, c := d.sync.sh, d.sync.cfg
	d.sync.mu.Unlock()
	if sh == nil {
		return ""
	}
	return d.drainSync(sh, c)
}

// drainSync stops sh (the continuous sync to c's remote) as stopSync
// says.
func (d *Daemon) drainSync(sh *replica.Shipper, c syncConfig) string {
	wait := cmp.Or(d.cfg.SyncDrain, DefaultSyncDrain)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	st, err := sh.Stop(ctx)
	if err == nil {
		d.log.Info().Str("remote", c.Remote).Uint64("shipped", st.Shipped).Msg("sync: shipped everything and released the lease")
		return ""
	}
	w := fmt.Sprintf("remote %s: %v; %d records (%.1f s) not shipped: 'reynfs push %s' sends them", c.Remote, err, st.LagRecords, st.LagSeconds, c.Remote)
	if st.LagRecords == 0 {
		w = fmt.Sprintf("remote %s: %v", c.Remote, err)
	}
	d.log.Warn().Msg("sync: " + w)
	return w
}

// durableNow journals buffered writes and makes the head durable: what
// a push or sync called now must cover.
func (d *Daemon) durableNow() (uint64, error) {
	if err := d.live.FlushAll(tree.Caller{Comm: "reynfs"}); err != nil {
		return 0, err
	}
	if err := d.j.Sync(); err != nil {
		return 0, err
	}
	return d.j.Durable(), nil
}

// remoteFor resolves a push's or sync's remote: the continuous sync's
// when none is named, then as PickRemote.
func (d *Daemon) remoteFor(name string) (string, string, error) {
	if sh, c, url := d.sync.running(); name == "" && sh != nil {
		return c.Remote, url, nil
	}
	rs, err := replica.Remotes(d.j)
	if err != nil {
		return "", "", err
	}
	name, err = PickRemote(rs, name)
	if err != nil {
		return "", "", err
	}
	return name, rs[name], nil
}

// continuousFor returns the running shipper, and the workspace it
// writes, when name is its remote.
func (d *Daemon) continuousFor(name string) (*replica.Shipper, string) {
	if sh, c, _ := d.sync.running(); sh != nil && c.Remote == name {
		return sh, c.WS
	}
	return nil, ""
}

// Push pushes the mounted workspace (see api.PushParams).
func (d *Daemon) Push(ctx context.Context, p api.PushParams) (*api.PushInfo, error) {
	return d.push(ctx, p)
}

func (d *Daemon) push(ctx context.Context, p api.PushParams) (*api.PushInfo, error) {
	name, url, err := d.remoteFor(p.Remote)
	if err != nil {
		return nil, err
	}
	target, err := d.durableNow()
	if err != nil {
		return nil, err
	}
	if sh, ws := d.continuousFor(name); sh != nil {
		if p.WS != "" && p.WS != ws {
			return nil, fmt.Errorf("%w: push --ws %s: the continuous sync to %s writes workspace %s", ErrUsage, p.WS, name, ws)
		}
		if err := sh.Wait(ctx, target); err != nil {
			return nil, fmt.Errorf("remote %s: %w", name, err)
		}
		st := sh.Status()
		return &api.PushInfo{Remote: url, WS: ws, Through: st.Shipped, Continuous: true}, nil
	}
	ws := cmp.Or(p.WS, filepath.Base(d.cfg.Dir))
	if err := replica.CheckName(ws); err != nil {
		return nil, fmt.Errorf("%w: workspace %v (--ws names it)", ErrUsage, err)
	}
	b, err := objstore.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("%w: remote %s: %v", ErrUsage, name, err)
	}
	ttl, err := leaseTTL()
	if err != nil {
		return nil, err
	}
	d.sync.push.Lock()
	defer d.sync.push.Unlock()
	r, err := replica.PushWith(ctx, d.j, b, ws, replica.Options{TTL: ttl})
	if err != nil {
		return nil, err
	}
	if r.CompactError != "" {
		d.log.Warn().Str("remote", r.Remote).Str("ws", ws).Str("err", r.CompactError).Msg("push: merging the remote's segments stopped short; the next push merges again")
	}
	return &api.PushInfo{Remote: r.Remote, WS: r.WS, From: r.From, Through: r.Through, Records: r.Records,
		Segments: r.Segments, Packs: r.Packs, Objects: r.Objects, Bytes: r.Bytes, Names: r.Names}, nil
}

// Sync waits until the remote holds the durable head (see
// api.SyncParams): a continuous sync's progress, else a push.
func (d *Daemon) Sync(ctx context.Context, p api.SyncParams) (*api.SyncResult, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, cmp.Or(p.Timeout, 10*time.Minute),
		fmt.Errorf("timed out after %s", cmp.Or(p.Timeout, 10*time.Minute)))
	defer cancel()
	name, _, err := d.remoteFor(p.Remote)
	if err != nil {
		return nil, err
	}
	target, err := d.durableNow()
	if err != nil {
		return nil, err
	}
	info, err := d.push(ctx, api.PushParams{Remote: name})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("sync %s: the remote does not hold seq %d: %w", name, target, context.Cause(ctx))
		}
		return nil, fmt.Errorf("sync: %w", err)
	}
	return &api.SyncResult{Remote: name, URL: info.Remote, WS: info.WS, Seq: target, Shipped: info.Through, Took: time.Since(start)}, nil
}

// remoteStatus lists the remotes for status: the continuous sync, and
// every remote with a shipped seq the store records.
func (d *Daemon) remoteStatus() ([]api.RemoteSync, error) {
	rs, err := replica.Remotes(d.j)
	if err != nil {
		return nil, err
	}
	holds, err := syncHolds(d.j)
	if err != nil {
		return nil, err
	}
	floor, err := d.j.Floor()
	if err != nil {
		return nil, err
	}
	durable := d.j.Durable()
	var out []api.RemoteSync
	seen := map[string]bool{}
	if sh, c, url := d.sync.running(); sh != nil {
		st := sh.Status()
		r := api.RemoteSync{Name: c.Remote, URL: url, WS: st.WS, Mode: SyncContinuous,
			State: st.State, Since: st.Since, Shipped: st.Shipped, Durable: st.Durable,
			LagRecords: st.LagRecords, LagSeconds: st.LagSeconds, PendingBytes: st.PendingBytes,
			LastError: st.LastError, Reason: st.Reason, Requests: st.Requests, BytesSent: st.BytesSent}
		for _, h := range holds {
			if h.Remote == r.Name && h.WS == r.WS {
				r.HoldsFloor, r.FloorSeq = h.Seq <= durable, h.Seq
			}
		}
		seen[r.Name+"#"+r.WS] = true
		out = append(out, r)
	}
	for _, h := range holds {
		if seen[h.Remote+"#"+h.WS] {
			continue
		}
		seen[h.Remote+"#"+h.WS] = true
		r := api.RemoteSync{Name: h.Remote, URL: rs[h.Remote], WS: h.WS, Mode: SyncManual,
			Shipped: h.Shipped, Durable: durable, HoldsFloor: h.Seq <= durable, FloorSeq: h.Seq}
		if durable > h.Shipped {
			r.LagRecords = durable - max(h.Shipped, floor-1)
		}
		out = append(out, r)
	}
	return out, nil
}

// syncHolds are the remotes local retention keeps records for: each
// remote with a shipped seq (replica.FloorHolds), and a continuous sync
// that never shipped (from seq 1).
func syncHolds(j *journal.Journal) ([]replica.FloorHold, error) {
	holds, err := replica.FloorHolds(j)
	if err != nil {
		return nil, err
	}
	c, err := loadSync(j)
	if err != nil || c.Mode != SyncContinuous {
		return holds, err
	}
	for _, h := range holds {
		if h.Remote == c.Remote && h.WS == c.WS {
			return holds, nil
		}
	}
	rs, err := replica.Remotes(j)
	if err != nil {
		return nil, err
	}
	if _, ok := rs[c.Remote]; !ok {
		return holds, nil // removed: released
	}
	return append(holds, replica.FloorHold{Seq: 1, Remote: c.Remote, WS: c.WS}), nil
}

// recordHolds turns syncHolds into the collector's holds.
func recordHolds(j *journal.Journal) ([]rewind.RecordHold, error) {
	holds, err := syncHolds(j)
	if err != nil {
		return nil, err
	}
	var out []rewind.RecordHold
	for _, h := range holds {
		out = append(out, rewind.RecordHold{Seq: h.Seq, By: h.Why()})
	}
	return out, nil
}
