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
	"golang.org/x/term"

	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

type mountOptions struct {
	at, store  string
	foreground bool
	readyFd    int
	debug      bool
}

func (o *mountOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.at, "at", "", "mount at `MOUNTPOINT` instead of over DIR itself")
	f.StringVar(&o.store, "store", "", "store folder (default: $XDG_DATA_HOME/reynfs/<project>-<hash>)")
	f.BoolVar(&o.foreground, "foreground", false, "stay attached; log to stderr too")
	f.BoolVar(&o.debug, "debug", false, "log every FUSE request")
	f.IntVar(&o.readyFd, "ready-fd", 0, "")
	_ = f.MarkHidden("ready-fd")
}

func newMountCommand() *cobra.Command {
	var o mountOptions
	cmd := &cobra.Command{
		Use:   "mount DIR [--at MOUNTPOINT] [--store PATH]",
		Short: "Mount a project directory as a versioned workspace",
		Long: `Mount DIR (over itself unless --at is given). The first mount imports DIR as the
first generation; later mounts resume at head and record changes made to DIR while it
was unmounted as a generation of their own. Returns once the mount is ready; the daemon
keeps running in the background until 'reynfs unmount'.

` + exitCodeHelp,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMount(cmd.Context(), o, args[0])
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func runMount(ctx context.Context, o mountOptions, dir string) error {
	paths, err := daemon.Resolve(dir, o.at, o.store)
	if err != nil {
		return err
	}
	// Refuse a live mountpoint before anything is created on disk.
	if err := daemon.ClearDeadMount(paths.Mountpoint); err != nil {
		return err
	}
	if o.foreground || o.readyFd != 0 {
		return runDaemon(ctx, o, paths)
	}
	return spawnDaemon(o, paths)
}

// daemonMemoryLimit is the daemon's soft memory limit (GOMEMLIMIT
// overrides it): issue 4 holds the daemon under 300 MiB at 100k files.
const daemonMemoryLimit = 256 << 20

// runDaemon serves the mount in this process.
func runDaemon(ctx context.Context, o mountOptions, paths daemon.Paths) error {
	var ready *os.File
	if o.readyFd != 0 {
		ready = os.NewFile(uintptr(o.readyFd), "ready")
		defer ready.Close()
	}
	fail := func(err error) error {
		if ready != nil {
			fmt.Fprintf(ready, "error %s\n", oneLine(err.Error()))
			fmt.Fprintf(ready, "code %d\n", exitCode(err))
		}
		return err
	}
	_, statErr := os.Stat(paths.Store)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(paths.Store, 0o700); err != nil {
		return fail(fmt.Errorf("store %s: %w", paths.Store, err))
	}
	logf, err := os.OpenFile(daemon.LogPath(paths.Store), os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600) // a planted link is refused
	if err != nil {
		return fail(fmt.Errorf("log: %w", err))
	}
	defer logf.Close()
	var w io.Writer = logf
	if o.foreground && ready == nil {
		w = zerolog.MultiLevelWriter(logf, zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly})
	}
	log := zerolog.New(w).With().Timestamp().Logger()
	cfg := daemon.Config{Paths: paths, Log: log, Debug: o.debug}
	switch {
	case ready != nil:
		cfg.Progress = throttle(func(files int, bytes int64) {
			fmt.Fprintf(ready, "progress %d %d\n", files, bytes)
		})
	case term.IsTerminal(int(os.Stderr.Fd())):
		cfg.Progress = throttle(printProgress)
	}
	cfg.Warn = func(s string) { fmt.Fprintln(os.Stderr, "reynfs: warning: "+s) }
	if ready != nil {
		cfg.Warn = func(s string) { fmt.Fprintf(ready, "warn %s\n", oneLine(s)) }
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// A soft limit: the collector works harder before the heap (two
		// trees at once while a remount compares the project directory)
		// grows the daemon past it; nothing fails at the limit.
		debug.SetMemoryLimit(daemonMemoryLimit)
	}
	d, err := daemon.Start(cfg)
	if err != nil {
		log.Error().Err(err).Msg("mount failed")
		if created {
			_ = os.RemoveAll(paths.Store) // a refused first mount leaves nothing behind
		}
		return fail(err)
	}
	debug.FreeOSMemory() // the import's and recovery's garbage goes back now
	if ready != nil {
		fmt.Fprintln(ready, "ready")
		ready.Close()
	} else {
		fmt.Fprintf(os.Stderr, "reynfs: mounted %s at %s (store %s)\n", paths.Dir, paths.Mountpoint, paths.Store)
	}
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
// the mount is ready (or why it is not).
func spawnDaemon(o mountOptions, paths daemon.Paths) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
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
	cmd := exec.Command(self, args...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/" // never keep a directory under the mount busy
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start daemon: %w", err)
	}
	w.Close()
	go func() { _ = cmd.Wait() }()
	showProgress := term.IsTerminal(int(os.Stderr.Fd()))
	var failure string
	code := exitFailure
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "ready":
			if showProgress {
				fmt.Fprint(os.Stderr, "\r\033[K")
			}
			fmt.Printf("mounted %s at %s\n", paths.Dir, paths.Mountpoint)
			return nil
		case strings.HasPrefix(line, "progress "):
			var files int
			var bytes int64
			if _, err := fmt.Sscanf(line, "progress %d %d", &files, &bytes); err == nil && showProgress {
				printProgress(files, bytes)
			}
		case strings.HasPrefix(line, "warn "):
			fmt.Fprintln(os.Stderr, "reynfs: warning: "+strings.TrimPrefix(line, "warn "))
		case strings.HasPrefix(line, "error "):
			failure = strings.TrimPrefix(line, "error ")
		case strings.HasPrefix(line, "code "):
			fmt.Sscanf(line, "code %d", &code)
		}
	}
	if failure == "" {
		failure = "daemon exited before the mount was ready; see " + daemon.LogPath(paths.Store)
	}
	return &codedError{msg: failure, code: code}
}

// codedError carries an exit code decided in the daemon process.
type codedError struct {
	msg  string
	code int
}

func (e *codedError) Error() string { return e.msg }

func printProgress(files int, bytes int64) {
	fmt.Fprintf(os.Stderr, "\r\033[Kimporting: %d files, %.1f MiB", files, float64(bytes)/(1<<20))
}

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
