package api

import "errors"

// Kind is an error's stable class: clients branch on it, never on the
// message, which may be reworded.
type Kind string

// The error kinds. New kinds may be added within a major version; a
// client treats one it does not know as failed.
const (
	KindBadInput            Kind = "bad_input"            // bad arguments, paths, an unknown method
	KindBadTarget           Kind = "bad_target"           // a target (gN, seq, -N, label) names no state
	KindNotRetained         Kind = "not_retained"         // the target is below the retention floor (retention dropped it)
	KindStoreLocked         Kind = "store_locked"         // another daemon holds the store
	KindStoreCorrupt        Kind = "store_corrupt"        // the store is damaged or of another format
	KindNotMounted          Kind = "not_mounted"          // the call needs a running daemon
	KindStaleMount          Kind = "stale_mount"          // a mount is left whose daemon is dead
	KindRewindInProgress    Kind = "rewind_in_progress"   // the workspace is being rewound
	KindPermissionDenied    Kind = "permission_denied"    // the caller is neither the mount's owner nor root
	KindRunsActive          Kind = "runs_active"          // a rewind that may not cancel found runs going
	KindUnsupportedProtocol Kind = "unsupported_protocol" // hello asked for a major version not served
	KindInternal            Kind = "internal"             // a bug in reynfs
	KindFailed              Kind = "failed"               // anything else: the operation failed
)

// The CLI's exit codes, one per kind (the table in 'reynfs --help').
const (
	ExitFailure  = 1
	ExitUsage    = 2
	ExitLocked   = 3
	ExitStore    = 4
	ExitNoDaemon = 5
	ExitStale    = 6
	ExitInternal = 70
)

// Exit is the exit code the CLI uses for an error of kind k.
func (k Kind) Exit() int {
	switch k {
	case KindBadInput, KindBadTarget, KindNotRetained, KindUnsupportedProtocol:
		return ExitUsage
	case KindStoreLocked:
		return ExitLocked
	case KindStoreCorrupt:
		return ExitStore
	case KindNotMounted:
		return ExitNoDaemon
	case KindStaleMount:
		return ExitStale
	case KindInternal:
		return ExitInternal
	}
	return ExitFailure
}

// JSON-RPC 2.0 error codes. Every error reynfs itself reports is
// CodeServer; its kind says which.
const (
	CodeParse          = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeServer         = -32000
)

// Error is a JSON-RPC error object with reynfs's kind and exit code.
type Error struct {
	Code    int       `json:"code"`
	Message string    `json:"message"` // one line, for people
	Data    ErrorData `json:"data"`
}

// ErrorData is what a program needs to act on an error.
type ErrorData struct {
	Kind Kind  `json:"kind"`
	Exit int   `json:"exit"`           // the CLI's exit code for it
	Head *Head `json:"head,omitempty"` // where the store stood, when known
}

func (e *Error) Error() string { return e.Message }

// KindOf is the kind of err when it is (or wraps) an *Error, else failed.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) && e.Data.Kind != "" {
		return e.Data.Kind
	}
	return KindFailed
}

// Errors a Client reports without an answer from the daemon.
var (
	// ErrDenied: the other end of the socket, or the way to it, belongs
	// to someone it must not (or the daemon refused us).
	ErrDenied = errors.New("permission denied")
	// ErrNoServer: nothing listens on the socket.
	ErrNoServer = errors.New("no server on the control socket")
	// ErrClosed: the connection closed without an answer (the daemon
	// died, or refused a connection it had queued).
	ErrClosed = errors.New("the daemon closed the connection without answering")
)
