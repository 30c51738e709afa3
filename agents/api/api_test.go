package api

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"
)

func TestNegotiate(t *testing.T) {
	for _, c := range []struct {
		in, want string
		kind     Kind
	}{
		{in: Version, want: Version},
		{in: "1.99", want: "1.0"}, // a newer minor of the same major: ours
		{in: "2.0", kind: KindUnsupportedProtocol},
		{in: "0.9", kind: KindUnsupportedProtocol},
		{in: "one", kind: KindUnsupportedProtocol},
		{in: "", kind: KindUnsupportedProtocol},
	} {
		got, err := Negotiate(c.in)
		if c.kind != "" {
			if KindOf(err) != c.kind || err.(*Error).Data.Exit != ExitUsage {
				t.Errorf("Negotiate(%q) = %q, %v; want kind %s, exit %d", c.in, got, err, c.kind, ExitUsage)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Negotiate(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestKindExit(t *testing.T) {
	want := map[Kind]int{KindBadInput: 2, KindBadTarget: 2, KindNotRetained: 2, KindStoreLocked: 3, KindStoreCorrupt: 4,
		KindNotMounted: 5, KindStaleMount: 6, KindPermissionDenied: 1, KindInternal: 70, KindFailed: 1, "a_future_kind": 1}
	for k, code := range want {
		if k.Exit() != code {
			t.Errorf("%s.Exit() = %d, want %d", k, k.Exit(), code)
		}
	}
}

// TestClientDo runs the client against a server on a real unix socket
// (this process serves it, so the peer check passes): ids match, results
// decode, an error answered keeps its kind, and a server that closes
// without answering is ErrClosed.
func TestClientDo(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				dec, enc := json.NewDecoder(c), json.NewEncoder(c)
				for {
					var req Request
					if dec.Decode(&req) != nil {
						return
					}
					switch req.Method {
					case "hello":
						_ = enc.Encode(map[string]any{"jsonrpc": "2.0", "method": "event", "params": map[string]any{}}) // skipped
						_ = enc.Encode(Response{JSONRPC: JSONRPC, ID: req.ID, Result: json.RawMessage(`{"version":"1.0","head":{"seq":7,"gen":2,"epoch":1}}`)})
					case "status":
						_ = enc.Encode(Response{JSONRPC: JSONRPC, ID: req.ID, Error: &Error{Code: CodeServer, Message: "no", Data: ErrorData{Kind: KindStoreLocked, Exit: 3}}})
					default:
						return // closes without answering
					}
				}
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := c.Hello(ctx, "test")
	if err != nil || h.Version != "1.0" || h.Head == nil || *h.Head != (Head{Seq: 7, Gen: 2, Epoch: 1}) {
		t.Fatalf("Hello = %+v, %v", h, err)
	}
	if _, err := c.Status(ctx); KindOf(err) != KindStoreLocked {
		t.Fatalf("Status: %v; want kind store_locked", err)
	}
	if err := c.Do(ctx, LogParams{}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do on a server that closes: %v; want ErrClosed", err)
	}
	if _, err := Dial(ctx, filepath.Join(t.TempDir(), "none.sock")); !errors.Is(err, ErrNoServer) {
		t.Fatalf("Dial with nothing listening: %v; want ErrNoServer", err)
	}
}
