// Package daemon is the reynfs daemon: it opens a workspace's store,
// recovers or imports the tree, serves it over FUSE, answers the control
// socket, and on unmount writes the live tree back into the project
// directory.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/fs"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// Meta keys of the daemon's bookkeeping in the store.
const (
	metaDir       = "dir"       // the project directory this store belongs to
	metaDirBase   = "dirbase"   // Merkle root the project directory holds
	metaWriteback = "writeback" // root being written back (crash-safe redo)
	metaInoCeil   = "inoceil"   // highest inode number reserved
	metaViews     = "views"     // the history views' name (mount --views-name)
	metaPrivate   = "private"   // "on": mount --private-history (absent: off)
	// Unix ns read just before the import or write-back that left dirbase
	// in the directory started; "" when unknown or when that write-back
	// kept or failed paths (rewind.UnderneathSince).
	metaDirSince = "dirsince"
)

// Config is what a daemon serves.
type Config struct {
	Paths
	Log zerolog.Logger
	// Progress reports import progress (files, bytes) on a terminal.
	Progress func(files int, bytes int64)
	// Warn, if set, shows a warning to whoever runs the mount command.
	Warn  func(string)
	Debug bool
	// Ctx, if set, cancels the mount before it is ready (Ctrl-C during a
	// long import): Start then fails and nothing is mounted.
	Ctx context.Context
	// ViewsName names the history views (mount --views-name); "" uses the
	// name the store remembers from the last mount that gave one, or
	// fs.ViewDir. A name given is remembered for later mounts.
	ViewsName string
	// PrivateHistory is fs.Options's (mount --private-history): true or
	// false is remembered for later mounts, like ViewsName; nil keeps what
	// the store remembers (off for a new store). A mount that forgot it
	// would open a private history to every user without a word.
	PrivateHistory *bool
	// Sync is mount --sync: "continuous" replicates to SyncRemote (""
	// : origin or the only remote) while mounted, "manual" turns that
	// off, "" keeps what the store remembers (sync.go). SyncDrain bounds
	// the unmount's wait for the rest to ship (0: DefaultSyncDrain).
	Sync       string
	SyncRemote string
	SyncDrain  time.Duration
	// Prefetch: a lazy clone's prefetcher runs (mount --prefetch); nil
	// keeps what clone --prefetch recorded (on by default).
	Prefetch *bool
	// FollowEvery: how often a follower store reads its remote's HEAD
	// (mount --follow-every; 0: DefaultFollowEvery). follow.go.
	FollowEvery time.Duration
}

// Daemon is one served workspace.
type Daemon struct {
	cfg  Config
	log  zerolog.Logger
	j    *journal.Journal
	live *tree.Live
	fs   *fs.FS
	svc  *Service
	// views is the name the history views answer to in the mount root.
	views string
	// private: only the mount's owner and root may browse the views.
	private bool

	unmountOnce sync.Once
	done        chan struct{}
	finalErr    error
	started     time.Time
	bootNext    uint64 // inode allocation before Live exists (imports)
	ln          net.Listener
	handlers    sync.WaitGroup // control requests being answered
	dirf        *os.File       // the project directory, opened before the mount covers it
	runs        *agents.Runs   // the runs started with `reynfs run`
	runEvents   runBroker      // run.started and run.exited for the subscriptions
	rewinding   atomic.Int64   // Unix ns since a rewind holds the workspace; 0: none (runs.go)
	mem         memReturner    // free heap pages back to the system after a rewind (memlimit.go)
	sync        *syncer        // replication (sync.go); set once mounted
	syncWarn    string         // what the unmount's sync left unshipped
	lazy        lazyState      // a lazy clone's origin and prefetcher (lazy.go)
	follow      followState    // a follower mount's config and loop (follow.go)
}

// Start opens the store, brings the tree up to date with the project
// directory and mounts it. It returns once the mount is ready.
func Start(cfg Config) (*Daemon, error) {
	d := &Daemon{cfg: cfg, log: cfg.Log, done: make(chan struct{}), started: time.Now()}
	d.mem.log = cfg.Log
	if err := ClearDeadMount(cfg.Mountpoint); err != nil {
		return nil, err
	}
	j, err := journal.Open(DBPath(cfg.Store), journal.Options{Logger: cfg.Log})
	if err != nil {
		return nil, err
	}
	d.j = j
	// The store lock is ours: take the control socket before the mount, so
	// that a daemon which reports ready can always be reached.
	if d.ln, err = listen(SocketPath(cfg.Store)); err != nil {
		_ = j.Close()
		return nil, err
	}
	fail := func(err error) (*Daemon, error) {
		_ = d.ln.Close()
		d.closeLazy()
		_ = j.Close()
		return nil, err
	}
	if err := d.openLazy(); err != nil {
		return fail(err)
	}
	if err := d.loadFollow(); err != nil {
		return fail(err)
	}
	if err := rewind.Reindex(j); err != nil {
		return fail(err)
	}
	remembered, err := j.GetMeta(metaViews)
	if err != nil {
		return fail(err)
	}
	d.views = cmp.Or(cfg.ViewsName, string(remembered), fs.ViewDir)
	wasPrivate, err := privateMeta(j)
	if err != nil {
		return fail(err)
	}
	d.private = wasPrivate
	if cfg.PrivateHistory != nil {
		d.private = *cfg.PrivateHistory
	}
	t, err := d.prepare()
	if err != nil {
		return fail(err)
	}
	if err := d.interrupted(); err != nil {
		return fail(err)
	}
	if d.views != string(remembered) && cfg.ViewsName != "" {
		// Remembered only once the directory passed the check, so that a
		// later mount without --views-name finds the views where they were.
		if err := j.SetMeta(metaViews, []byte(d.views)); err != nil {
			return fail(err)
		}
	}
	if d.private != wasPrivate {
		var on []byte // off: no key
		if d.private {
			on = []byte("on")
		}
		if err := j.SetMeta(metaPrivate, on); err != nil {
			return fail(err)
		}
	}
	syncing, err := d.prepareSync()
	if err != nil {
		return fail(err)
	}
	ceil, err := d.metaUint(metaInoCeil)
	if err != nil {
		return fail(err)
	}
	next := max(ceil+1, t.MaxIno()+1)
	d.live = tree.NewLive(t, j, next, next-1, func(c uint64) error {
		return j.SetMeta(metaInoCeil, []byte(strconv.FormatUint(c, 10)))
	})
	states, err := rewind.AgentStates(j, j.Head())
	if err != nil {
		return fail(err)
	}
	if d.runs, err = openRuns(cfg.Store); err != nil {
		return fail(err)
	}
	rw := &rewind.Rewinder{J: j, Live: d.live, Agents: agents.NewRegistry(states)}
	d.svc = &Service{J: j, Live: d.live, RW: rw, Views: d.views}
	d.fs, err = fs.Mount(d.live, cfg.Mountpoint, fs.Options{Log: cfg.Log, FsName: cfg.Store, StoreDir: cfg.Store,
		History: history{d.svc}, Debug: cfg.Debug, ViewsName: d.views, PrivateHistory: d.private,
		Attribute: d.attribute, ReadOnly: d.follow.cfg != nil})
	if err != nil {
		_ = d.runs.Close() // no run exists yet
		return fail(err)
	}
	rw.Inv = d.fs
	d.startSync(syncing)
	if err := d.startFollow(); err != nil {
		d.log.Error().Err(err).Msg("follow: not started")
	}
	go d.flusher()
	go d.collector()
	d.startPrefetch()
	go func() {
		d.fs.Wait()
		d.finish()
	}()
	d.log.Info().Str("dir", cfg.Dir).Str("mountpoint", cfg.Mountpoint).Str("views", d.views).Bool("private_history", d.private).Uint64("head", j.Head()).Msg("mounted")
	return d, nil
}

// interrupted is the error of a start cancelled through cfg.Ctx.
func (d *Daemon) interrupted() error {
	if d.cfg.Ctx == nil || d.cfg.Ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("start: %w", context.Cause(d.cfg.Ctx))
}

// prepare returns the tree to serve: the first import of the project
// directory, or head, redoing an interrupted write-back and recording
// changes made to the directory while it was unmounted.
func (d *Daemon) prepare() (*tree.Tree, error) {
	store := d.j.Objects()
	if err := d.openDir(); err != nil {
		return nil, err
	}
	// The project must not have an entry of the views' name (the name the
	// store remembers is checked here, the CLI checks one it is given).
	if err := fs.CheckViewsName(d.cfg.Dir, d.views); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	warnUsers(d.log, d.cfg.Dir, d.cfg.Warn)
	if d.j.Head() == 0 {
		if d.j.HadHistory() { // never re-import a store that lost its history as a new timeline
			return nil, fmt.Errorf("%w: store lost acknowledged history: its manifest records synced history but the journal is empty; refusing to import %s as a new timeline", journal.ErrCorrupt, d.cfg.Dir)
		}
		// A new store: nothing the import writes is stored yet (Fresh).
		im := &rewind.Importer{Store: store, Alloc: d.bootAlloc(), Progress: d.cfg.Progress, Ctx: d.cfg.Ctx, Fresh: true}
		start := time.Now().UnixNano()
		t, err := im.ImportAt(d.dirf)
		if err != nil {
			return nil, err
		}
		walked := time.Now()
		// The objects go to the store as they are made, in parallel
		// batches, not all at once (a million at 1M files).
		g, inodes, err := rewind.CommitFreshImport(d.j, t, d.bootNext, "import "+d.cfg.Dir)
		if err != nil {
			return nil, err
		}
		// The first mount's longest step, in the log for whoever wonders:
		// the walk (reading and storing the files) and the commit (the
		// tree's objects and the import record).
		d.log.Info().Int("inodes", inodes).Dur("took", time.Since(time.Unix(0, start))).
			Dur("walk", walked.Sub(time.Unix(0, start))).Dur("commit", time.Since(walked)).Msg("imported the project directory")
		return t, d.setMetas(metaDir, d.cfg.Dir, metaDirBase, g.Root.String(), metaInoCeil, strconv.FormatUint(d.bootNext, 10), metaDirSince, sinceMeta(start, nil))
	}
	t, err := rewind.Reconstruct(d.j, d.j.Head())
	if err != nil {
		return nil, err
	}
	if err := d.redoWriteback(); err != nil {
		return nil, err
	}
	base, err := d.dirBase()
	if err != nil {
		return nil, err
	}
	ceil, err := d.metaUint(metaInoCeil)
	if err != nil {
		return nil, err
	}
	pins, err := d.pins()
	if err != nil {
		return nil, err
	}
	d.bootNext = max(ceil+1, t.MaxIno()+1, base.MaxIno()+1)
	im := &rewind.Importer{Store: store, Base: base, Pin: pins, Alloc: d.bootAlloc(), Progress: d.cfg.Progress, Ctx: d.cfg.Ctx}
	start := time.Now().UnixNano()
	nt, err := im.ImportAt(d.dirf)
	if err != nil {
		return nil, err
	}
	root, blobs, err := nt.Root()
	if err != nil {
		return nil, err
	}
	baseRoot, _, _ := base.Root()
	if root == baseRoot {
		// The directory holds what we wrote: serve head. The files the
		// last write-back wrote have ctimes after its start; this import
		// found them as written, so the check at unmount counts from here
		// (a change it can see only by ctime it misses as the import does).
		return t, d.setMetas(metaDirSince, sinceMeta(start, pins))
	}
	if c := d.follow.cfg; c != nil {
		return nil, fmt.Errorf("%w (changed while unmounted; a follower records nothing of its own: move the changes out of %s, or clone it anew)", followerError(d.cfg.Dir, c), d.cfg.Dir)
	}
	d.log.Info().Msg("project directory changed while unmounted: recording an import generation")
	g, err := rewind.CommitImport(d.j, root, blobs, d.bootNext, "changes made while unmounted")
	if err != nil {
		return nil, err
	}
	return nt, d.setMetas(metaDirBase, g.Root.String(), metaInoCeil, strconv.FormatUint(d.bootNext, 10), metaDirSince, sinceMeta(start, pins))
}

// sinceMeta is metaDirSince's value for a directory that holds the tree
// an import or write-back that started at start put there: nothing when
// some paths hold something else (pinned ones).
func sinceMeta(start int64, pins rewind.PathSet) string {
	if len(pins) > 0 {
		return ""
	}
	return strconv.FormatInt(start, 10)
}

// bootAlloc hands out inode numbers during an import, before Live exists.
func (d *Daemon) bootAlloc() func() (uint64, error) {
	if d.bootNext < tree.RootIno+1 {
		d.bootNext = tree.RootIno + 1
	}
	return func() (uint64, error) {
		ino := d.bootNext
		d.bootNext++
		return ino, nil
	}
}

func (d *Daemon) setMetas(kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if err := d.j.SetMeta(kv[i], []byte(kv[i+1])); err != nil {
			return err
		}
	}
	return nil
}

func (d *Daemon) metaUint(key string) (uint64, error) {
	b, err := d.j.GetMeta(key)
	if err != nil || len(b) == 0 {
		return 0, err
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("store meta %s: %w", key, err)
	}
	return v, nil
}

// flusher journals buffered writes every second, so data written to a file
// that stays open does not wait for its close. Failures are logged by
// flushLog, which does not repeat them every second.
func (d *Daemon) flusher() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	fl := flushLog{log: d.log}
	for {
		select {
		case <-d.done:
			return
		case now := <-tick.C:
			fl.note(d.live.FlushAll(tree.Caller{Comm: "reynfs"}), now)
		}
	}
}

// Unmount unmounts the file system; finish then writes back and closes.
// It fails while the mount is busy, and the daemon keeps serving.
func (d *Daemon) Unmount() error {
	// The workspace's runs end with it, first (their cwd would keep the
	// mount busy); no lock is held, so their in-flight requests finish.
	d.cancelRuns()
	if err := d.live.Sync(tree.Caller{Comm: "reynfs"}); err != nil {
		return err
	}
	if err := d.fs.Unmount(); err != nil {
		return fmt.Errorf("unmount %s: %w (is a process still using it?)", d.cfg.Mountpoint, err)
	}
	<-d.done
	return d.finalErr
}

// finish runs once the mount is gone: a last generation, the write-back
// into the project directory, and the store closed.
func (d *Daemon) finish() {
	d.unmountOnce.Do(func() {
		defer close(d.done)
		d.closeRuns() // before the write-back: a run left going would write under it
		d.stopFollow()
		d.finishLazy()
		root, err := d.unmountRoot()
		shipped := make(chan string, 1) // the sync ships the rest meanwhile
		go func() { shipped <- d.stopSync() }()
		if err == nil {
			d.live.Lock()
			t := d.live.Tree()
			d.live.Unlock()
			err = d.writeback(t, root)
		}
		d.syncWarn = <-shipped
		d.closeDir()
		stopCollector(d.j)
		d.closeLazy()
		if cerr := d.j.Close(); err == nil {
			err = cerr
		}
		d.finalErr = err
		if err != nil {
			d.log.Error().Err(err).Msg("unmount")
		} else {
			d.log.Info().Msg("unmounted and written back")
		}
	})
}

// Done is closed when the daemon has finished.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// Err is the result of finishing, valid after Done.
func (d *Daemon) Err() error { return d.finalErr }

// Serve answers the control socket until the daemon finishes or ctx ends
// (then it unmounts as if asked).
func (d *Daemon) Serve(ctx context.Context) error {
	servePprof(d.log)
	go d.accept(d.ln)
	select {
	case <-d.done:
	case <-ctx.Done():
		if err := d.Unmount(); err != nil && !errors.Is(err, context.Canceled) {
			d.log.Error().Err(err).Msg("unmount on signal")
			_ = LazyUnmount(d.cfg.Mountpoint)
			<-d.done
		}
	}
	// Let the requests in flight answer (the unmount request itself
	// waits for its reply to be written) before the process exits.
	_ = d.ln.Close()
	waited := make(chan struct{})
	go func() { d.handlers.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
	}
	return d.finalErr
}

// privateMeta reports whether the store remembers --private-history.
func privateMeta(j *journal.Journal) (bool, error) {
	b, err := j.GetMeta(metaPrivate)
	return string(b) == "on", err
}
