// Command agentbench measures the agents rows of scripts/bench.sh (issue 9)
// on a mounted workspace, and prints one tab-separated line per measurement
// (KEY, TARGET, RUN, VALUE, UNIT: the format of bench.sh's results file).
//
//	agentbench checkpoint -reynfs BIN -mount DIR -files N -n RUNS [-change K]
//	agentbench hook -reynfs BIN -mount DIR -files N -n RUNS -testdata DIR
//	agentbench rewind -reynfs BIN -mount DIR -n RUNS [-runs 4]
//
// checkpoint: RUNS checkpoints over one kept control-API connection (what a
// hook or an agent framework that stays connected pays), each after K small
// file rewrites in the tree of N files that test/bench/benchtool.py gentree
// made, interleaved with as many `reynfs checkpoint` processes (after 10
// unmeasured rounds). hook: `reynfs hook claude` fed recorded payloads, wall time from
// fork to exit (process start included, as the agent CLI pays it), for a
// PostToolUse of Bash after K rewrites (one checkpoint), a UserPromptSubmit
// (agent save and checkpoint), and a PostToolUse of Read (nothing to do: the
// process start alone). rewind: RUNS times, a checkpoint, 4 `reynfs run`
// loops writing into the mount, then `reynfs rewind -1`; its wall time, the
// time until the last run's shell had exited (the part of the grace period
// actually waited: a shell without a trap dies of the SIGTERM at once) and
// the difference.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: agentbench checkpoint|hook|rewind FLAGS")
		os.Exit(2)
	}
	fl := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	var o opts
	fl.StringVar(&o.reynfs, "reynfs", "reynfs", "the reynfs binary")
	fl.StringVar(&o.mount, "mount", "", "the mounted workspace")
	fl.StringVar(&o.testdata, "testdata", "agents/hooks/testdata", "the recorded hook payloads")
	fl.IntVar(&o.files, "files", 0, "files in the tree (benchtool.py gentree)")
	fl.IntVar(&o.n, "n", 10, "measurements")
	fl.IntVar(&o.change, "change", 3, "files rewritten before each checkpoint")
	fl.IntVar(&o.runs, "runs", 4, "active runs at each rewind")
	_ = fl.Parse(os.Args[2:])
	if o.mount == "" || fl.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "agentbench: want -mount DIR and no arguments")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "checkpoint":
		err = benchCheckpoint(o)
	case "hook":
		err = benchHook(o)
	case "rewind":
		err = benchRewind(o)
	default:
		err = fmt.Errorf("unknown benchmark %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "agentbench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

type opts struct {
	reynfs, mount, testdata string
	files, n, change, runs  int
}

func record(key, target string, run int, d time.Duration) {
	fmt.Printf("%s\t%s\t%d\t%.6f\ts\n", key, target, run, d.Seconds())
}

// touch rewrites k files of the tree, a different set per tag, as small
// edits (the path scheme of benchtool.py gentree).
func touch(mount string, files, k int, tag string) error {
	if files < k {
		return fmt.Errorf("a tree of %d files has fewer than %d to change", files, k)
	}
	for j := range k {
		i := (j*(files/k) + len(tag)*7919 + int(tag[len(tag)-1])*31) % files
		p := filepath.Join(mount, fmt.Sprintf("t%02d", i/10000), fmt.Sprintf("d%02d", i/100%100), fmt.Sprintf("f%02d.txt", i%100))
		if err := os.WriteFile(p, fmt.Appendf(nil, "// file %d version %s\n", i, tag), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func store(mount string) (string, error) {
	m, ok := daemon.FindMount(mount)
	if !ok {
		return "", fmt.Errorf("%s is not a reynfs mount", mount)
	}
	return m.Source, nil
}

// warmup is how many checkpoints run unmeasured first: the first ones
// after a mount's import of a big tree wait for Badger flushing and
// compacting what the import wrote (at 100k files, 20-80 ms instead of
// 4-10), which is not what an agent pays in a session.
const warmup = 10

func benchCheckpoint(o opts) error {
	st, err := store(o.mount)
	if err != nil {
		return err
	}
	ctx := context.Background()
	c, err := api.Dial(ctx, daemon.SocketPath(st))
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Hello(ctx, "agentbench"); err != nil {
		return err
	}
	key := fmt.Sprintf("agent-ckpt-%d", o.files)
	for r := 1 - warmup; r <= o.n; r++ {
		// Over the kept connection and as a process, interleaved, so
		// that both see the same machine.
		if err := touch(o.mount, o.files, o.change, fmt.Sprintf("k%d", r)); err != nil {
			return err
		}
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		t0 := time.Now()
		res, err := c.Checkpoint(ctx, api.CheckpointParams{Kind: "tool", Label: fmt.Sprintf("bench %d", r)})
		took := time.Since(t0)
		if err != nil {
			return err
		}
		if res.Generation == nil {
			return errors.New("checkpoint answered without a generation")
		}
		if err := touch(o.mount, o.files, o.change, fmt.Sprintf("p%d", r)); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, o.reynfs, "checkpoint", "--dir", o.mount, "-m", fmt.Sprintf("bench process %d", r))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		t1 := time.Now()
		err = cmd.Run()
		proc := time.Since(t1)
		if err != nil {
			return fmt.Errorf("reynfs checkpoint: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		if r < 1 {
			continue
		}
		record(key, "kept-conn", r, took)
		record(key, "daemon-cut", r, res.Generation.Took) // the cut alone, as the daemon timed it
		record(key, "process", r, proc)
	}
	return nil
}

// payload reads a recorded hook payload and points its cwd at the mount.
func payload(o opts, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(o.testdata, name))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m["cwd"] = o.mount
	return json.Marshal(m)
}

// hook runs `reynfs hook claude` on one payload: wall time from the start
// of the process to its exit. The hook exits 0 whatever happens and says
// what failed on stderr, so anything on stderr is a failure here.
func hook(o opts, in []byte) (time.Duration, error) {
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.reynfs, "hook", "claude")
	cmd.Dir = o.mount
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = &stderr
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	if err == nil && stderr.Len() > 0 {
		err = errors.New(strings.TrimSpace(stderr.String()))
	}
	return took, err
}

func headSeq(o opts) (uint64, error) {
	st, err := store(o.mount)
	if err != nil {
		return 0, err
	}
	// runs, not status: status counts the store's objects, which at 100k
	// files is work the daemon would be doing beside the hooks measured.
	var r api.RunsResult
	if err := daemon.Call(context.Background(), st, api.RunsParams{}, &r, time.Minute); err != nil {
		return 0, err
	}
	if r.Head == nil {
		return 0, errors.New("status answered without a head")
	}
	return r.Head.Seq, nil
}

func benchHook(o opts) error {
	events := []struct{ target, file string }{
		{"post-bash", "claude-PostToolUse-Bash.json"},
		{"prompt", "claude-UserPromptSubmit.json"},
		{"post-read", "claude-PostToolUse-Read.json"},
	}
	in := make([][]byte, len(events))
	for i, e := range events {
		var err error
		if in[i], err = payload(o, e.file); err != nil {
			return err
		}
	}
	key := fmt.Sprintf("agent-hook-%d", o.files)
	for r := 1; r <= o.n; r++ {
		for i, e := range events {
			if e.target == "post-bash" {
				if err := touch(o.mount, o.files, o.change, fmt.Sprintf("h%d", r)); err != nil {
					return err
				}
			}
			before, err := headSeq(o)
			if err != nil {
				return err
			}
			took, err := hook(o, in[i])
			if err != nil {
				return fmt.Errorf("%s: %w", e.file, err)
			}
			after, err := headSeq(o)
			if err != nil {
				return err
			}
			// A hook that cut nothing would measure a fast no-op.
			if wrote := after > before; wrote != (e.target != "post-read") {
				return fmt.Errorf("%s: head seq %d before the hook and %d after", e.file, before, after)
			}
			record(key, e.target, r, took)
		}
	}
	return nil
}

func benchRewind(o opts) error {
	st, err := store(o.mount)
	if err != nil {
		return err
	}
	for r := 1; r <= o.n; r++ {
		if err := oneRewind(o, st, r); err != nil {
			return fmt.Errorf("run %d: %w", r, err)
		}
	}
	return nil
}

// oneRewind cuts a generation, starts o.runs writing loops with `reynfs
// run`, waits until each has written, and times `reynfs rewind -1`.
func oneRewind(o opts, st string, r int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := daemon.Call(ctx, st, api.CheckpointParams{Label: fmt.Sprintf("before runs %d", r)}, nil, time.Minute); err != nil {
		return err
	}
	var cmds []*exec.Cmd
	defer func() {
		// On failure: nothing of ours left behind. SIGTERM first, which
		// `reynfs run` forwards to its command; a killed `reynfs run`
		// would leave its loop to the daemon's unmount.
		for _, c := range cmds {
			if c.ProcessState == nil {
				_ = c.Process.Signal(syscall.SIGTERM)
			}
		}
		for _, c := range cmds {
			if c.ProcessState == nil {
				t := time.AfterFunc(5*time.Second, func() { _ = c.Process.Kill() })
				_ = c.Wait()
				t.Stop()
			}
		}
	}()
	for i := range o.runs {
		loop := fmt.Sprintf("while :; do echo x >> f%d; sleep 0.01; done", i)
		c := exec.CommandContext(ctx, o.reynfs, "run", "--label", fmt.Sprintf("bench%d", i), "--", "sh", "-c", loop)
		c.Dir = o.mount
		if err := c.Start(); err != nil {
			return err
		}
		cmds = append(cmds, c)
	}
	pids, err := waitRunning(ctx, o, st)
	if err != nil {
		return err
	}
	exited := make([]time.Time, len(pids))
	var wg sync.WaitGroup
	for i, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return fmt.Errorf("pidfd_open %d: %w", pid, err)
		}
		wg.Go(func() {
			defer unix.Close(fd)
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			for {
				if _, err := unix.Poll(fds, 30_000); !errors.Is(err, unix.EINTR) {
					break
				}
			}
			exited[i] = time.Now()
		})
	}
	var out, stderr bytes.Buffer
	rw := exec.CommandContext(ctx, o.reynfs, "rewind", "-1", "--dir", o.mount)
	rw.Stdout, rw.Stderr = &out, &stderr
	t0 := time.Now()
	err = rw.Run()
	total := time.Since(t0)
	if err != nil {
		return fmt.Errorf("reynfs rewind -1: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	wg.Wait()
	last := slices.MaxFunc(exited, func(a, b time.Time) int { return a.Compare(b) })
	if last.IsZero() || last.After(t0.Add(total)) {
		return fmt.Errorf("a run's shell outlived the rewind (%s)", last.Sub(t0))
	}
	if n := strings.Count(out.String(), "cancelled run "); n < o.runs {
		return fmt.Errorf("the rewind named %d of %d runs it cancelled:\n%s", n, o.runs, out.String())
	}
	for _, c := range cmds {
		_ = c.Wait() // `reynfs run` passes the cancelled command's status on
	}
	waited := last.Sub(t0)
	record("agent-rewind", "total", r, total)
	record("agent-rewind", "runs-gone", r, waited)
	record("agent-rewind", "rest", r, total-waited)
	return nil
}

// waitRunning waits until o.runs runs are running and each has written
// its file; it returns the pids of their first processes (the shells).
func waitRunning(ctx context.Context, o opts, st string) ([]int, error) {
	for {
		var res api.RunsResult
		if err := daemon.Call(ctx, st, api.RunsParams{}, &res, time.Minute); err != nil {
			return nil, err
		}
		var pids []int
		for _, ri := range res.Runs {
			if ri.State == "running" && ri.Pid > 0 && strings.HasPrefix(ri.Label, "bench") {
				pids = append(pids, ri.Pid)
			}
		}
		ok := len(pids) == o.runs
		for i := range o.runs {
			if _, err := os.Stat(filepath.Join(o.mount, fmt.Sprintf("f%d", i))); err != nil {
				ok = false
			}
		}
		if ok {
			return pids, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %d runs to run and write: %w (runs: %d)", o.runs, ctx.Err(), len(pids))
		case <-time.After(20 * time.Millisecond):
		}
	}
}
