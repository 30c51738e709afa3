package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

// runJSON writes the two JSON lines of 'reynfs run --json': the API's
// run.started and run.exited events, so a script reads one shape from the
// CLI and from a subscription. They go to stderr (or --json-file), never
// stdout: stdout is CMD's, and a pipeline behind 'reynfs run' must see
// exactly what CMD printed. A nil *runJSON writes nothing.
type runJSON struct {
	w      io.Writer
	f      *os.File // --json-file, closed by close
	closed bool
}

// openRunJSON writes to file, appended to (several runs can share one
// file of JSON lines; /dev/fd/N names an inherited descriptor), or to
// stderr when file is "".
func openRunJSON(file string) (*runJSON, error) {
	if file == "" {
		return &runJSON{w: os.Stderr}, nil
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: --json-file: %v", errUsage, err)
	}
	return &runJSON{w: f, f: f}, nil
}

func (o *runJSON) line(ev api.Event) {
	if o == nil || o.closed {
		return
	}
	b, err := json.Marshal(&ev)
	if err == nil {
		_, err = o.w.Write(append(b, '\n'))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "reynfs: run %s: --json: %v\n", ev.Run.ID, err)
	}
}

// started is the line once CMD runs (after the daemon tracks its pid).
func (o *runJSON) started(info api.RunInfo, h *api.Head) {
	if o == nil {
		return
	}
	info.State = "running"
	o.line(api.Event{Type: api.EventRunStarted, Head: headOr(h), Run: &info})
}

// exited is the line once CMD has ended with code (the status reynfs run
// exits with). The daemon's list says whether a rewind cancelled the run;
// without it the run is reported as exited.
func (o *runJSON) exited(store string, info api.RunInfo, h *api.Head, code int) {
	if o == nil {
		return
	}
	info.State = "exited"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var r api.RunsResult
	if daemon.Call(ctx, store, api.RunsParams{}, &r, 10*time.Second) == nil {
		for _, run := range r.Runs {
			if run.ID == info.ID {
				info = run
			}
		}
	}
	info.ExitCode = code
	o.line(api.Event{Type: api.EventRunExited, Head: headOr(h), Run: &info})
}

func (o *runJSON) close() {
	if o == nil || o.closed {
		return
	}
	o.closed = true
	if o.f != nil {
		if err := o.f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "reynfs: --json-file: %v\n", err)
		}
	}
}

func headOr(h *api.Head) api.Head {
	if h == nil {
		return api.Head{}
	}
	return *h
}
