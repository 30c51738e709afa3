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
	Names    int    `json:"names,omitempty"` // branch names sent
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

// Remotes of a store, mounted or not (added within 1.0): the CLI runs
// `remote add` (after self-testing the server's conditional writes
// itself, with its own credentials), `remote list` and `remote remove`
// through them. No credential ever crosses the socket: a remote is a
// name and a URL; the daemon reaches it with the credentials of the
// environment it was mounted from.

// Remote is one named remote.
type Remote struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Sync is "continuous" when the mount's continuous sync ships to it
	// (WS is then the workspace it writes); "" otherwise.
	Sync string `json:"sync,omitempty"`
	WS   string `json:"ws,omitempty"`
}

// RemoteListParams lists the store's remotes.
type RemoteListParams struct{}

func (RemoteListParams) Method() string { return "remote.list" }
func (RemoteListParams) readOnly() bool { return true }

// RemoteListResult is the store's remotes, by name.
type RemoteListResult struct {
	Reply
	Remotes []Remote `json:"remotes"`
}

// RemoteAddParams names a remote. The URL is checked for its form (no
// request is made: the caller self-tests the server first); a name in
// use is bad_input.
type RemoteAddParams struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

func (RemoteAddParams) Method() string { return "remote.add" }

// RemoteRemoveParams forgets a remote's name. The remote a continuous
// sync ships to is refused (bad_input): turn the sync off first
// (sync.mode manual).
type RemoteRemoveParams struct {
	Name string `json:"name"`
}

func (RemoteRemoveParams) Method() string { return "remote.remove" }

// RemoteResult is the remote added or removed.
type RemoteResult struct {
	Reply
	Remote Remote `json:"remote"`
}

// SyncModeParams turns a mounted workspace's continuous sync on
// ("continuous", to Remote: "" picks as push does; WS: "" the project
// directory's base name) or off ("manual": what is durable is shipped
// first, within the mount's drain bound, and the lease released),
// without remounting; the store remembers it as it remembers mount
// --sync.
type SyncModeParams struct {
	Mode   string `json:"mode"`
	Remote string `json:"remote,omitempty"`
	WS     string `json:"ws,omitempty"`
}

func (SyncModeParams) Method() string { return "sync.mode" }

// SyncModeResult is the sync mode now (Remote, URL, WS: the continuous
// sync's), and Warning what turning it off left unshipped.
type SyncModeResult struct {
	Reply
	Mode    string `json:"mode"`
	Remote  string `json:"remote,omitempty"`
	URL     string `json:"url,omitempty"`
	WS      string `json:"ws,omitempty"`
	Changed bool   `json:"changed"`
	Warning string `json:"warning,omitempty"`
	// State: a sync just started, once it took the lease or failed to
	// (within a few seconds; "starting" if it has not yet); Reason: why
	// it stopped (another writer's lease, another store's workspace).
	State  string `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ForgetParams raises a workspace's floor on the remote the mount's
// continuous sync ships to, through that sync (which holds the
// workspace's lease): the HEAD write is the sync's own, between two
// ships. Target is gN or the seq of a generation. Without a continuous
// sync to Remote#WS it is bad_input: the CLI then forgets as it does
// unmounted (refused while a writer's lease is live).
type ForgetParams struct {
	Remote string `json:"remote"`
	WS     string `json:"ws,omitempty"` // "": the sync's
	Target string `json:"target"`
}

func (ForgetParams) Method() string { return "forget" }

// ForgetResult is what the forget changed in HEAD.
type ForgetResult struct {
	Reply
	Forget *ForgetInfo `json:"forget"`
}

// ForgetInfo mirrors replica.ForgetResult.
type ForgetInfo struct {
	Remote      string `json:"remote"`
	WS          string `json:"ws"`
	ID          int    `json:"id"`
	Seq         uint64 `json:"seq"`
	From        uint64 `json:"from"`
	OldFloor    uint64 `json:"old_floor"`
	Floor       uint64 `json:"floor"`
	Generations int    `json:"generations"`
	Dropped     int    `json:"dropped"`
	Changed     bool   `json:"changed"`
}
