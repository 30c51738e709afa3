package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/fs"
)

type mountOptions struct {
	at, store   string
	foreground  bool
	readyFd     int
	newStore    bool // the spawning parent created the store folder
	debug       bool
	viewsName   string
	viewsSet    bool // --views-name given; else the store's remembered name
	private     bool
	privateSet  bool // --private-history given (true or false); else the store's remembered choice
	prefetch    bool
	prefetchSet bool // --prefetch given; else what clone --lazy recorded
	asJSON      bool
	sync        string        // --sync continuous|manual ("": as the store remembers)
	remote      string        // --remote NAME of a continuous sync
	syncDrain   time.Duration // --sync-drain: the unmount's wait for the rest to ship
	follow      string        // --follow URL#WS (cmd_follow.go)
	followEvery time.Duration // --follow-every
}

func (o *mountOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.at, "at", "", "mount at `MOUNTPOINT` instead of over DIR itself")
	f.StringVar(&o.store, "store", "", "store folder (default: $XDG_DATA_HOME/reynfs/<project>-<hash>)")
	f.BoolVar(&o.foreground, "foreground", false, "stay attached; log to stderr too")
	f.BoolVar(&o.debug, "debug", false, "log every FUSE request")
	f.StringVar(&o.viewsName, "views-name", "", "name the read-only history views `NAME` in the mount root, for a project with its own .reynfs (default .reynfs; remembered for later mounts)")
	f.BoolVar(&o.private, "private-history", false, "only the mount's owner and root may browse the history views (remembered for later mounts; --private-history=false turns it off)")
	f.BoolVar(&o.prefetch, "prefetch", true, "a lazy clone's store: fetch the objects still on the remote in the background (default: as clone --prefetch said)")
	f.BoolVar(&o.asJSON, "json", false, "print where it is mounted as JSON (no progress line)")
	f.StringVar(&o.sync, "sync", "", "`continuous`: replicate to a remote while mounted (remembered for later mounts); manual: turn that off")
	f.StringVar(&o.remote, "remote", "", "the remote `NAME` of --sync continuous (default origin, or the store's only remote)")
	f.DurationVar(&o.syncDrain, "sync-drain", daemon.DefaultSyncDrain, "how long the unmount waits for a continuous sync to ship the rest")
	f.StringVar(&o.follow, "follow", "", "follow `URL#WS` (or NAME#WS) read-only: clone it lazily if DIR has no store, serve its head as it moves (remembered)")
	f.DurationVar(&o.followEvery, "follow-every", daemon.DefaultFollowEvery, "how often a follower reads the remote's HEAD")
	f.IntVar(&o.readyFd, "ready-fd", 0, "")
	_ = f.MarkHidden("ready-fd")
	f.BoolVar(&o.newStore, "new-store", false, "")
	_ = f.MarkHidden("new-store")
}

func newMountCommand() *cobra.Command {
	var o mountOptions
	cmd := &cobra.Command{
		Use:   "mount DIR [--at MOUNTPOINT] [--store PATH] [--follow URL#WS [--follow-every D]]",
		Short: "Mount a project directory as a versioned workspace",
		Long: `Mount DIR (over itself unless --at is given). The first mount imports DIR as the
first generation; later mounts resume at head and record changes made to DIR while it
was unmounted as a generation of their own. Returns once the mount is ready; the daemon
keeps running in the background until 'reynfs unmount'. Ctrl-C (or SIGTERM) during
the import stops it: nothing is mounted, DIR is left as it was, and a first mount
leaves no store behind (exit 130, or 143).

The store folder is private: one others can write to is refused, one others can
read is made 0700 (with a line in reynfs.log). The daemon's messages, and any crash
report, go to reynfs.log in the store.

The read-only history views answer as .reynfs in the mount root. A project with
its own .reynfs is refused unless --views-name names the views differently; the
store remembers that name, so later mounts need the flag only to change it.
--private-history keeps the views to the mount's owner and root; the store
remembers it too, until a mount with --private-history=false turns it off.

--sync continuous replicates the workspace to a remote while it is mounted (--remote
NAME; default origin, or the store's only remote): every second the new durable
records go to the remote, and 'reynfs status' shows how far behind it is. The store
remembers it for later mounts until --sync manual. Unmount waits up to --sync-drain
for the rest to ship. The daemon keeps this command's environment (AWS credentials).

` + followHelp + "\n\n" + exitCodeHelp,
		Args:        usageArgs(cobra.ExactArgs(1)),
		Annotations: map[string]string{annotationCleansUp: "yes"},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.viewsSet = cmd.Flags().Changed("views-name")
			o.privateSet = cmd.Flags().Changed("private-history")
			o.prefetchSet = cmd.Flags().Changed("prefetch")
			return runMount(cmd.Context(), o, args[0])
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func runMount(ctx context.Context, o mountOptions, dir string) error {
	switch o.sync {
	case "", daemon.SyncContinuous, daemon.SyncManual:
	default:
		return fmt.Errorf("%w: --sync %q: want continuous or manual", errUsage, o.sync)
	}
	if o.remote != "" && o.sync != daemon.SyncContinuous {
		return fmt.Errorf("%w: --remote NAME goes with --sync continuous", errUsage)
	}
	if o.follow != "" && o.sync == daemon.SyncContinuous {
		return fmt.Errorf("%w: --follow mounts read-only; it cannot be combined with --sync continuous", errUsage)
	}
	if o.followEvery <= 0 {
		return fmt.Errorf("%w: --follow-every %s: want a positive duration", errUsage, o.followEvery)
	}
	made, err := followDir(o, dir)
	if err != nil {
		return err
	}
	paths, err := daemon.Resolve(dir, o.at, o.store)
	if err != nil {
		return err
	}
	// Refuse a live mountpoint before anything is created on disk.
	if err := daemon.ClearDeadMount(paths.Mountpoint); err != nil {
		return err
	}
	if o.follow != "" && o.readyFd == 0 { // the spawning parent did it
		if err := prepareFollow(ctx, o, paths); err != nil {
			if made {
				_ = os.Remove(paths.Dir)
			}
			return err
		}
	}
	// A name given, or the default for a store that cannot remember one
	// yet, is checked here before anything is created; the daemon checks
	// the name a store remembers.
	if views := o.viewsName; o.viewsSet || !storeExists(paths.Store) {
		if !o.viewsSet {
			views = fs.ViewDir
		}
		if err := fs.CheckViewsName(paths.Dir, views); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	if o.foreground || o.readyFd != 0 {
		return runDaemon(ctx, o, paths)
	}
	return spawnDaemon(ctx, o, paths)
}

// runDaemon serves the mount in this process.
func runDaemon(ctx context.Context, o mountOptions, paths daemon.Paths) error {
	var ready *os.File
	if o.readyFd != 0 {
		ready = os.NewFile(uintptr(o.readyFd), "ready")
		defer ready.Close()
	}
	fail := func(err error) error {
		err = interrupted(ctx, err)
		if ready != nil {
			fmt.Fprintf(ready, "error %s\n", oneLine(err.Error()))
			fmt.Fprintf(ready, "code %d\n", exitCode(err))
		}
		return err
	}
	sd, err := daemon.PrepareStore(paths.Store)
	if err != nil {
		return fail(err)
	}
	defer sd.Log.Close()
	created := sd.Created || o.newStore
	var w io.Writer = sd.Log
	if o.foreground && ready == nil {
		w = zerolog.MultiLevelWriter(sd.Log, zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly, NoColor: !colour(os.Stderr)})
	}
	log := zerolog.New(w).With().Timestamp().Logger()
	logTightened(log, sd, paths.Store)
	cfg := daemon.Config{Paths: paths, Log: log, Debug: o.debug, Ctx: ctx, ViewsName: o.viewsName,
		Sync: o.sync, SyncRemote: o.remote, SyncDrain: o.syncDrain, FollowEvery: o.followEvery}
	if o.privateSet {
		cfg.PrivateHistory = &o.private
	}
	if o.prefetchSet {
		cfg.Prefetch = &o.prefetch
	}
	switch {
	case ready != nil:
		cfg.Progress = throttle(func(files int, bytes int64) {
			fmt.Fprintf(ready, "progress %d %d\n", files, bytes)
		})
	case interactive() && !o.asJSON:
		bar := newImportBar()
		defer bar.done() // also when the mount fails
		cfg.Progress = throttle(bar.update)
	}
	cfg.Warn = func(s string) { fmt.Fprintln(os.Stderr, "reynfs: warning: "+s) }
	if ready != nil {
		cfg.Warn = func(s string) { fmt.Fprintf(ready, "warn %s\n", oneLine(s)) }
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// A soft limit: the collector works harder before the heap (two
		// trees at once while a remount compares the project directory)
		// grows the daemon past it; nothing fails at the limit. It
		// follows the live heap above its floor (daemon/memlimit.go).
		daemon.LimitMemory(daemon.MemoryFloor)
	}
	logFrom := logSize(sd.Log)
	d, err := daemon.Start(cfg)
	if err != nil {
		err = fusermountCause(err, sd.Log, logFrom)
		log.Error().Err(err).Msg("mount failed")
		if created {
			_ = os.RemoveAll(paths.Store) // a refused first mount leaves nothing behind
		}
		if ctx.Err() != nil {
			what := "nothing mounted, " + paths.Dir + " unchanged"
			if created {
				what += ", the new store removed"
			}
			err = fmt.Errorf("mount interrupted before it was ready: %s (%w)", what, err)
		}
		return fail(err)
	}
	if ready != nil {
		fmt.Fprintln(ready, "ready")
		ready.Close()
	} else if o.asJSON {
		_ = printJSON(api.MountInfo{Mounted: true, Dir: paths.Dir, Mountpoint: paths.Mountpoint, Store: paths.Store})
	} else {
		fmt.Fprintf(os.Stderr, "reynfs: mounted %s at %s (store %s)\n", paths.Dir, paths.Mountpoint, paths.Store)
	}
	// The import's and recovery's garbage goes back to the system now,
	// after the mount said it is ready: a full collection and a scavenge
	// of the heap the import left (150-200 MiB at 100k files) took
	// 0.2-0.4 s of a first mount's time on 2 CPUs, which nobody waited
	// for on purpose. It runs beside the first requests; the memory limit
	// (daemon/memlimit.go) bounds the heap meanwhile.
	go func() {
		t0 := time.Now()
		debug.FreeOSMemory()
		log.Info().Dur("took", time.Since(t0)).Msg("returned the start's garbage to the system")
	}()
	if path := os.Getenv("REYNFS_CPUPROFILE"); path != "" {
		// For profiling the daemon (scripts/bench.sh, perf work): the
		// profile covers the mount's whole life.
		f, err := os.Create(path)
		if err == nil {
			defer f.Close()
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			log.Error().Err(err).Msg("cpu profile")
		} else {
			defer pprof.StopCPUProfile()
		}
	}
	return d.Serve(ctx)
}

// spawnDaemon starts the daemon in the background and waits until it says
// the mount is ready (or why it is not). The daemon's stderr is the
// store's log, so a crash report (a panic, SIGBUS) lands there. The daemon
// runs in a session of its own, out of reach of the terminal's Ctrl-C, so
// a signal this process gets before the mount is ready is passed on to it:
// it stops its import, cleans up and says so on the ready pipe.
func spawnDaemon(ctx context.Context, o mountOptions, paths daemon.Paths) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	sd, err := daemon.PrepareStore(paths.Store)
	if err != nil {
		return err
	}
	defer sd.Log.Close()
	logTightened(zerolog.New(sd.Log).With().Timestamp().Logger(), sd, paths.Store)
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	args := []string{"mount", paths.Dir, "--store", paths.Store, "--ready-fd", "3"}
	if paths.Mountpoint != paths.Dir {
		args = append(args, "--at", paths.Mountpoint)
	}
	if o.debug {
		args = append(args, "--debug")
	}
	if sd.Created {
		args = append(args, "--new-store")
	}
	if o.viewsSet {
		args = append(args, "--views-name", o.viewsName)
	}
	if o.privateSet {
		args = append(args, fmt.Sprintf("--private-history=%t", o.private))
	}
	if o.prefetchSet {
		args = append(args, fmt.Sprintf("--prefetch=%t", o.prefetch))
	}
	if o.sync != "" {
		args = append(args, "--sync", o.sync)
	}
	if o.remote != "" {
		args = append(args, "--remote", o.remote)
	}
	args = append(args, "--sync-drain", o.syncDrain.String(), "--follow-every", o.followEvery.String())
	// cmd.Env stays nil: the daemon inherits this environment, and with it
	// the remote's credentials (AWS_* variables, AWS_PROFILE) for --sync.
	cmd := exec.Command(self, args...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stderr = sd.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/" // never keep a directory under the mount busy
	if err := cmd.Start(); err != nil {
		w.Close()
		if sd.Created {
			_ = os.RemoveAll(paths.Store)
		}
		return fmt.Errorf("start daemon: %w", err)
	}
	w.Close()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	forward := context.AfterFunc(ctx, func() {
		var sc signalCause
		if errors.As(context.Cause(ctx), &sc) {
			_ = cmd.Process.Signal(sc.sig)
		}
	})
	defer forward()
	var bar *importBar // the import's progress, on a terminal only
	if interactive() && !o.asJSON {
		bar = newImportBar()
	}
	clearBar := func() {
		if bar != nil {
			bar.done()
			bar = nil
		}
	}
	defer clearBar()
	var failure string
	code := exitFailure
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "ready":
			clearBar()
			if !forward() {
				// The signal reached the daemon as it became ready: it
				// unmounts again; say so once it has.
				<-exited
				return interrupted(ctx, fmt.Errorf("mount interrupted as it became ready: unmounted again, %s holds the tree", paths.Dir))
			}
			if o.asJSON {
				return printJSON(api.MountInfo{Mounted: true, Dir: paths.Dir, Mountpoint: paths.Mountpoint, Store: paths.Store})
			}
			fmt.Printf("mounted %s at %s\n", paths.Dir, paths.Mountpoint)
			return nil
		case strings.HasPrefix(line, "progress "):
			var files int
			var bytes int64
			if _, err := fmt.Sscanf(line, "progress %d %d", &files, &bytes); err == nil && bar != nil {
				bar.update(files, bytes)
			}
		case strings.HasPrefix(line, "warn "):
			if bar != nil {
				_ = bar.bar.Clear() // drawn again at the next update
			}
			fmt.Fprintln(os.Stderr, "reynfs: warning: "+strings.TrimPrefix(line, "warn "))
		case strings.HasPrefix(line, "error "):
			failure = strings.TrimPrefix(line, "error ")
		case strings.HasPrefix(line, "code "):
			fmt.Sscanf(line, "code %d", &code)
		}
	}
	clearBar()
	if failure == "" {
		failure = "daemon exited before the mount was ready; see " + daemon.LogPath(paths.Store)
	}
	return interrupted(ctx, &codedError{msg: failure, code: code})
}

// storeExists says whether store holds a database (which may remember a
// views name).
func storeExists(store string) bool {
	_, err := os.Lstat(daemon.DBPath(store))
	return err == nil
}

// logTightened says in the log that the store folder was made private.
func logTightened(log zerolog.Logger, sd *daemon.StoreDir, store string) {
	if sd.Tightened != 0 {
		log.Warn().Str("store", store).Str("was", fmt.Sprintf("%04o", sd.Tightened)).Msg("store folder was open to other users; made it private (0700)")
	}
}

// codedError carries an exit code decided in the daemon process.
type codedError struct {
	msg  string
	code int
}

func (e *codedError) Error() string { return e.msg }

// throttle calls f at most ten times a second.
func throttle(f func(int, int64)) func(int, int64) {
	var last time.Time
	return func(files int, bytes int64) {
		if now := time.Now(); now.Sub(last) > 100*time.Millisecond {
			last = now
			f(files, bytes)
		}
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
