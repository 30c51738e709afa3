package api

// FollowStatus is a follower mount's part of status (mount --follow): the
// remote workspace it tracks, the seq it serves and the remote HEAD's
// seq when last read, how far behind it is, and its state: following,
// backing-off (the remote is down or failing: LastError; the mount
// keeps serving what it has) or stopped (Reason: the remote's history
// no longer continues this store's, e.g. the workspace was made again).
type FollowStatus struct {
	Source     string  `json:"source"` // as given: URL#WS or NAME#WS
	URL        string  `json:"url"`
	WS         string  `json:"ws"`
	State      string  `json:"state"`
	Since      string  `json:"since"` // RFC 3339: when the state began
	LocalSeq   uint64  `json:"local_seq"`
	RemoteSeq  uint64  `json:"remote_seq"`
	LagRecords uint64  `json:"lag_records"`
	LagSeconds float64 `json:"lag_seconds"` // since HEAD moved past local_seq
	LastError  string  `json:"last_error,omitempty"`
	Reason     string  `json:"reason,omitempty"`
}
