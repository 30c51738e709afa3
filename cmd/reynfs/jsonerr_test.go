package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/rewind"
)

// TestJSONError: under --json an error is one line {"error":{kind,
// message, exit}} whose kind is the daemon's when it answered one (also a
// kind without a sentinel, runs_active) and whose exit is the exit code.
func TestJSONError(t *testing.T) {
	remote := func(k api.Kind) error {
		return daemon.ErrorOf(&api.Error{Code: api.CodeServer, Message: "rewind: 1 runs active", Data: api.ErrorData{Kind: k, Exit: k.Exit()}})
	}
	for _, c := range []struct {
		err  error
		kind api.Kind
		exit int
	}{
		{fmt.Errorf("%w: bad flag", errUsage), api.KindBadInput, 2},
		{fmt.Errorf("resolve: %w: no generation g9", rewind.ErrTarget), api.KindBadTarget, 2},
		{remote(api.KindRunsActive), api.KindRunsActive, 1},
		{remote(api.KindBadTarget), api.KindBadTarget, 2},
		{remote(api.KindInternal), api.KindInternal, 70},
		{fmt.Errorf("%w (store)", daemon.ErrNotRunning), api.KindNotMounted, 5},
		{errors.New("disk on fire\nsecond line"), api.KindFailed, 1},
	} {
		var b bytes.Buffer
		printJSONError(&b, c.err)
		var got jsonError
		if err := json.Unmarshal(b.Bytes(), &got); err != nil || bytes.Count(b.Bytes(), []byte("\n")) != 1 {
			t.Fatalf("%v: %q is not one line of JSON: %v", c.err, b.String(), err)
		}
		if got.Error.Kind != c.kind || got.Error.Exit != c.exit || got.Error.Exit != exitCode(c.err) || got.Error.Message == "" {
			t.Errorf("%v: %+v; want kind %s exit %d", c.err, got.Error, c.kind, c.exit)
		}
	}
}
