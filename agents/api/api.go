// Package api is reynfs's control protocol: the typed requests, replies
// and errors the daemon serves on its unix socket, and a Go client for
// them. The CLI, the agent hooks and any other program speak it through
// this package, so the wire format lives in one place (docs/api.md).
//
// The envelope is JSON-RPC 2.0, one JSON object per line, because agent
// authors already have clients for it (LSP, MCP). A connection may carry
// many calls; it starts with an optional hello that settles the protocol
// version. Within a major version changes are add-only: a field or a
// method may be added, none renamed, removed or given another meaning.
package api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The protocol version this package speaks.
const (
	Major = 1
	Minor = 0
)

// Version is Major.Minor as hello carries it.
var Version = fmt.Sprintf("%d.%d", Major, Minor)

// JSONRPC is the envelope's version member.
const JSONRPC = "2.0"

// Request is one call: a line holding a JSON-RPC 2.0 request object.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"` // absent: a notification, not answered
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Response answers a Request with the same id: a result or an error.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"` // null when the request could not be read (or was refused)
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Head is where the store stands. Every reply carries it, so a client can
// tell what a result was computed against without a second call.
type Head struct {
	// Seq is the newest journal record.
	Seq uint64 `json:"seq"`
	// Gen is the id (the N of gN) of the newest generation, 0 before the first.
	Gen int `json:"gen"`
	// Epoch counts the rewinds the store has seen. It changes whenever
	// history was cut back: a seq remembered from an older epoch may name
	// records of an abandoned future.
	Epoch int `json:"epoch"`
}

// Reply is embedded in every result: the head when the call was answered.
type Reply struct {
	Head *Head `json:"head,omitempty"`
}

// SetHead records the head a result was answered at.
func (r *Reply) SetHead(h Head) { r.Head = &h }

// At is the head the result was answered at (nil: not set yet).
func (r *Reply) At() *Head { return r.Head }

// Result is what every result type is: something that carries a head.
type Result interface {
	SetHead(Head)
	At() *Head
}

// Params is what every request's parameters are: they name their method,
// so a caller never spells a method name.
type Params interface{ Method() string }

// ReadOnly reports whether a call only reads the store (an unmounted store
// can then be opened read-only, even by a look-only user).
func ReadOnly(p Params) bool {
	r, ok := p.(interface{ readOnly() bool })
	return ok && r.readOnly()
}

// ParseVersion splits "major.minor".
func ParseVersion(v string) (major, minor int, err error) {
	a, b, ok := strings.Cut(v, ".")
	if ok {
		major, err = strconv.Atoi(a)
		if err == nil {
			minor, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || major < 0 || minor < 0 {
		return 0, 0, fmt.Errorf("parse protocol version %q: want major.minor", v)
	}
	return major, minor, nil
}

// Negotiate answers a hello from a client speaking version v: the version
// both sides will speak (the lower minor of the same major), or an error
// of kind unsupported_protocol.
func Negotiate(v string) (string, error) {
	major, minor, err := ParseVersion(v)
	if err != nil {
		return "", &Error{Code: CodeInvalidParams, Message: err.Error(), Data: ErrorData{Kind: KindUnsupportedProtocol, Exit: KindUnsupportedProtocol.Exit()}}
	}
	if major != Major {
		return "", &Error{Code: CodeServer, Message: fmt.Sprintf("protocol version %s: this daemon speaks %d.x (%s): unsupported", v, Major, Version),
			Data: ErrorData{Kind: KindUnsupportedProtocol, Exit: KindUnsupportedProtocol.Exit()}}
	}
	return fmt.Sprintf("%d.%d", Major, min(minor, Minor)), nil
}
