package daemon

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/journal"
)

// TestPanicInReadOnlyMethod: a panic in a method that only reads (here
// runs, on a daemon without its run registry) is answered as an internal
// error and the daemon goes on; one in a method that changes things
// (run.start) is not survived.
func TestPanicInReadOnlyMethod(t *testing.T) {
	j, err := journal.Open(t.TempDir(), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	d := &Daemon{j: j, log: zerolog.Nop(), done: make(chan struct{}), svc: &Service{J: j}}
	e := rpc(t, d, api.RunsParams{}, nil)
	if e == nil || e.Data.Kind != api.KindInternal || strings.Contains(e.Message, "\n") || !strings.Contains(e.Message, "runs: internal error:") {
		t.Fatalf("runs on a daemon whose handler panics: %+v, want one-line kind internal", e)
	}
	if e.Data.Head == nil {
		t.Errorf("the internal error carries no head")
	}
	// The daemon still answers.
	if e := rpc(t, d, api.HelloParams{Version: api.Version}, nil); e != nil {
		t.Fatalf("hello after a recovered panic: %+v", e)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("a panic in run.start was survived; want it to end the daemon")
			}
		}()
		rpc(t, d, api.RunStartParams{Agent: "coder"}, nil)
	}()
}
