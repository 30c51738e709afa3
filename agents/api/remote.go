package api

import "time"

// Replication of a mounted workspace to its remotes (issue 12): push and
// sync through the daemon, on the live journal, and each remote's state
// in status.

// PushParams pushes the mounted workspace to a remote: the records after
// the remote's head with the objects they reach. With a continuous sync
// to that remote running, it waits for the sync to reach the durable
// head instead of pushing beside it.
type PushParams struct {
	// Remote names the remote ("": the continuous sync's, else "origin",
	// else the store's only one).
	Remote string `json:"remote,omitempty"`
	// WS is the workspace's name in the remote ("": the continuous
	// sync's, else the project directory's base name).
	WS string `json:"ws,omitempty"`
}

func (PushParams) Method() string { return "push" }

// PushResult is what a push sent.
type PushResult struct {
	Reply
	Push *PushInfo `json:"push"`
}

// PushInfo is what a push sent (a push through a continuous sync: only
// Remote, WS, Through and Continuous).
type PushInfo struct {
	Remote   string `json:"remote"` // the remote's URL
	WS       string `json:"ws"`
	From     uint64 `json:"from"`    // first seq sent (0: nothing to send)
	Through  uint64 `json:"through"` // the remote's seq after the push
	Records  int    `json:"records"`
	Segments int    `json:"segments"`
	Packs    int    `json:"packs"`
	Objects  int    `json:"objects"`
	Bytes    int64  `json:"bytes"`
	// Continuous: the continuous sync shipped it; push waited for it.
	Continuous bool `json:"continuous,omitempty"`
}

// SyncParams blocks until the remote's HEAD covers the workspace's
// durable head at the time of the call (buffered writes are journaled
// and made durable first). It fails when Timeout passes, or at once when
// the remote is down (a continuous sync backing off) or the sync stopped.
type SyncParams struct {
	Remote  string        `json:"remote,omitempty"`  // as in PushParams
	Timeout time.Duration `json:"timeout,omitempty"` // ns; 0: 10 minutes
}

func (SyncParams) Method() string { return "sync" }

// SyncResult says where the remote stands.
type SyncResult struct {
	Reply
	Remote string `json:"remote"` // the remote's name
	URL    string `json:"url"`
	WS     string `json:"ws"`
	// Seq is the durable head the call waited for; Shipped the remote's
	// seq now (≥ Seq).
	Seq     uint64        `json:"seq"`
	Shipped uint64        `json:"shipped"`
	Took    time.Duration `json:"took_ns"`
}

// RemoteSync is one remote of a mounted workspace in status: a
// continuous sync's live state, or (mode manual) what the store records
// the remote holds.
type RemoteSync struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	WS   string `json:"ws"`
	Mode string `json:"mode"` // continuous or manual
	// State: starting, shipping, idle, backing-off or stopped (a
	// continuous sync); "" for manual.
	State string    `json:"state,omitempty"`
	Since time.Time `json:"since,omitzero"`
	// Shipped: the remote holds the workspace's seqs through it (0:
	// nothing recorded, or not read yet).
	Shipped uint64 `json:"shipped"`
	Durable uint64 `json:"durable"`
	// LagRecords: seqs after Shipped up to Durable; LagSeconds: the age
	// of the oldest of them (continuous only).
	LagRecords   uint64  `json:"lag_records"`
	LagSeconds   float64 `json:"lag_seconds"`
	PendingBytes int64   `json:"pending_bytes"` // estimate (continuous only)
	LastError    string  `json:"last_error,omitempty"`
	Reason       string  `json:"reason,omitempty"` // why a continuous sync stopped
	Requests     int64   `json:"requests,omitempty"`
	BytesSent    int64   `json:"bytes_sent,omitempty"`
	// HoldsFloor: local retention keeps the records after Shipped for
	// this remote (FloorSeq: the first it keeps).
	HoldsFloor bool   `json:"holds_floor"`
	FloorSeq   uint64 `json:"floor_seq,omitempty"`
}

// UnmountResult is unmount's reply: the head, and what the unmount
// could not do (a continuous sync that did not ship everything).
type UnmountResult struct {
	Reply
	Warnings []string `json:"warnings,omitempty"`
}

// CheckpointSyncInfo is what `reynfs checkpoint --wait-remote --json`
// prints: the generation cut, then the sync that waited for it.
type CheckpointSyncInfo struct {
	CheckpointResult
	Sync *SyncResult `json:"sync"`
}
