package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// SubscribeParams turns the connection into an event stream: after the
// reply, the daemon sends Notifications and answers no more calls on it.
type SubscribeParams struct {
	// Buffer is how many events may wait for the subscriber before it is
	// dropped as too slow (0: the daemon's default, 256).
	Buffer int `json:"buffer,omitempty"`
}

func (SubscribeParams) Method() string { return "subscribe" }
func (SubscribeParams) readOnly() bool { return true }

// SubscribeResult acknowledges a subscription; the init event follows.
type SubscribeResult struct{ Reply }

// EventMethod is the method of the notifications a subscription sends.
const EventMethod = "event"

// Event types. The first event of a subscription is always init; a
// subscriber that falls too far behind gets dropped, the last one.
const (
	EventInit       = "init"
	EventCheckpoint = "checkpoint"
	EventRewind     = "rewind"
	EventWrites     = "writes"
	EventDropped    = "dropped"
	EventRunStarted = "run.started" // a run's first process was attached
	EventRunExited  = "run.exited"  // a run's first process exited
)

// Event is one thing that happened to the workspace, in journal order.
type Event struct {
	Type string `json:"type"`
	// Head is where the store stood once the event's records were in:
	// init carries the full position to start from.
	Head       Head         `json:"head"`
	Generation *Gen         `json:"generation,omitempty"` // checkpoint
	Rewind     *RewindEvent `json:"rewind,omitempty"`     // rewind
	Writes     *WritesEvent `json:"writes,omitempty"`     // writes
	Reason     string       `json:"reason,omitempty"`     // dropped
	Run        *RunInfo     `json:"run,omitempty"`        // run.started, run.exited
}

// RewindEvent is a reset record: history after ToSeq was abandoned.
type RewindEvent struct {
	Seq        uint64 `json:"seq"`        // the reset record
	ToSeq      uint64 `json:"to_seq"`     // the state it went back to
	Supersedes uint64 `json:"supersedes"` // the head it abandoned
	// Op is the operation the reset record is (rewind, undo, redo or
	// checkout) and OpID its id in the op log (op.log), so a subscriber
	// need not read the op log to tell an undo from a rewind. Added in
	// 1.x: an older daemon leaves them out.
	Op   string `json:"op,omitempty"`
	OpID uint64 `json:"op_id,omitempty"`
	// Of is the operation an undo or redo undid or redid; Branch the
	// branch a checkout moved to.
	Of     uint64 `json:"of,omitempty"`
	Branch string `json:"branch,omitempty"`
}

// WritesEvent sums the records of about 100 ms between two other events.
type WritesEvent struct {
	FromSeq uint64         `json:"from_seq"`
	ToSeq   uint64         `json:"to_seq"`
	Records int            `json:"records"`
	Ops     map[string]int `json:"ops"` // records per operation (write, create, rename, ...)
	// Top are the inodes most written to, most first (at most 8).
	// Inodes, not paths: a path would need the live tree's lock per
	// record, which a stream must never take from the file system.
	Top []InodeCount `json:"top"`
}

// InodeCount is how many records touched one inode.
type InodeCount struct {
	Ino     uint64 `json:"ino"`
	Records int    `json:"records"`
}

// Notification is a JSON-RPC notification carrying an Event.
type Notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  Event  `json:"params"`
}

// Subscription is a connection turned into an event stream.
type Subscription struct{ c *Client }

// Subscribe turns the connection into a stream of events; the client
// answers no more calls. Read them with Next; Close ends the stream.
func (c *Client) Subscribe(ctx context.Context, p SubscribeParams) (*Subscription, error) {
	if err := c.Do(ctx, p, nil); err != nil {
		return nil, err
	}
	return &Subscription{c: c}, nil
}

// Next waits for the next event (until ctx ends). After a dropped event
// the stream ends: Next then returns io.EOF.
func (s *Subscription) Next(ctx context.Context) (*Event, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = s.c.c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	line, err := s.c.r.ReadBytes('\n')
	if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("event stream: %w", context.Cause(ctx))
		}
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("event stream: %w", err)
	}
	var n Notification
	if err := json.Unmarshal(line, &n); err != nil || n.Method != EventMethod {
		return nil, fmt.Errorf("event stream: not an event: %.80q", line)
	}
	return &n.Params, nil
}

// Close ends the stream and the connection.
func (s *Subscription) Close() error { return s.c.Close() }
