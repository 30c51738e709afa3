package main

import (
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/rewind"
)

// wantsJSON reports whether cmd was run with --json.
func wantsJSON(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("json")
	return f != nil && f.Value.String() == "true"
}

// jsonError is how a command run with --json reports its failure: one
// line on stderr (stdout keeps only results: 'status --json' of an
// unmounted store prints the store there and still exits 5), with the
// same exit code as without --json. kind is the control API's error kind
// (docs/api.md), which programs branch on; message is for people.
type jsonError struct {
	Error struct {
		Kind    api.Kind `json:"kind"`
		Message string   `json:"message"`
		Exit    int      `json:"exit"`
	} `json:"error"`
}

// printJSONError writes err as a jsonError line.
func printJSONError(w io.Writer, err error) {
	var e jsonError
	e.Error.Kind, e.Error.Exit = errorKind(err), exitCode(err)
	lines := strings.Split(strings.TrimPrefix(err.Error(), "usage: "), "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	e.Error.Message = strings.Join(lines, "; ")
	b, _ := json.Marshal(e)
	_, _ = w.Write(append(b, '\n'))
}

// errorKind is the API kind of a command's error: the daemon's own when
// it answered one, else the kind its exit code stands for.
func errorKind(err error) api.Kind {
	if k := api.KindOf(err); k != api.KindFailed {
		return k
	}
	switch exitCode(err) {
	case exitUsage:
		if errors.Is(err, rewind.ErrNotRetained) {
			return api.KindNotRetained
		}
		if errors.Is(err, rewind.ErrTarget) {
			return api.KindBadTarget
		}
		return api.KindBadInput
	case exitLocked:
		return api.KindStoreLocked
	case exitStore:
		return api.KindStoreCorrupt
	case exitNoDaemon:
		return api.KindNotMounted
	case exitStale:
		return api.KindStaleMount
	case exitInternal:
		return api.KindInternal
	}
	return api.KindFailed
}
