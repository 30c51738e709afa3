package daemon

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/journal"
)

// TestDispatchOffline drives the one dispatch as the CLI does on an
// unmounted store: results carry the head, and each failure has its kind.
func TestDispatchOffline(t *testing.T) {
	j, err := journal.Open(filepath.Join(t.TempDir(), "db"), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	s := &Service{J: j}
	var lg api.LogReply
	if err := Serve(s, api.LogParams{}, &lg); err != nil || lg.Head == nil || lg.Log == nil {
		t.Fatalf("log: %+v, %v; want a timeline and a head", lg, err)
	}
	for _, c := range []struct {
		req  api.Request
		kind api.Kind
	}{
		{api.Request{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: "no-such"}, api.KindBadInput},
		{api.Request{JSONRPC: "1.0", ID: json.RawMessage("2"), Method: "log"}, api.KindBadInput},
		{api.Request{JSONRPC: "2.0", ID: json.RawMessage("3"), Method: "hello", Params: json.RawMessage(`{"version":"2.0"}`)}, api.KindUnsupportedProtocol},
		{api.Request{JSONRPC: "2.0", ID: json.RawMessage("4"), Method: "status"}, api.KindNotMounted},
		{api.Request{JSONRPC: "2.0", ID: json.RawMessage("5"), Method: "rewind", Params: json.RawMessage(`{"target":"g99"}`)}, api.KindBadTarget},
		{api.Request{JSONRPC: "2.0", ID: json.RawMessage("6"), Method: "log", Params: json.RawMessage(`{"all":"yes"}`)}, api.KindBadInput},
	} {
		resp := dispatch(s, nil, &c.req)
		if resp.Error == nil || resp.Error.Data.Kind != c.kind || resp.Error.Data.Exit != c.kind.Exit() || string(resp.ID) != string(c.req.ID) {
			t.Errorf("%s %s: %+v; want an error of kind %s with id %s", c.req.Method, c.req.Params, resp.Error, c.kind, c.req.ID)
		}
	}
	var h api.HelloResult
	if err := Serve(s, api.HelloParams{Version: "1.5"}, &h); err != nil || h.Version != "1.0" || h.Mounted {
		t.Errorf("hello 1.5 offline: %+v, %v; want version 1.0, not mounted", h, err)
	}
}
