package api

import (
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/rewind"
)

// The methods, each a Params type (what the caller sends) and a result
// type (what comes back). docs/api.md shows an exchange for each.

// HelloParams opens a connection: the version the client speaks.
type HelloParams struct {
	Version string `json:"version"`          // major.minor
	Client  string `json:"client,omitempty"` // a name for the daemon's log
}

func (HelloParams) Method() string { return "hello" }
func (HelloParams) readOnly() bool { return true }

// HelloResult is the version both sides speak from now on.
type HelloResult struct {
	Reply
	Version string `json:"version"`
	Mounted bool   `json:"mounted"` // false: answered on an unmounted store
}

// StatusParams asks a running daemon how it is.
type StatusParams struct{}

func (StatusParams) Method() string { return "status" }
func (StatusParams) readOnly() bool { return true }

// StatusResult describes the daemon (or, from store_status, the store).
type StatusResult struct {
	Reply
	Status *Status `json:"status"`
}

// StoreStatusParams describes an unmounted store.
type StoreStatusParams struct {
	Store string `json:"store"`
}

func (StoreStatusParams) Method() string { return "store_status" }
func (StoreStatusParams) readOnly() bool { return true }

// CheckpointParams cuts a generation of the mounted workspace.
type CheckpointParams struct {
	Label string `json:"label,omitempty"`
	Kind  string `json:"kind,omitempty"` // turn, tool, plan-step, phase or manual (the default)
	// Unique makes a label that the naming rule refuses (it reads as a
	// target, duplicates a live label or branch name, has control
	// characters, is too long) into one it accepts (a prefix, a " (2)"
	// suffix) rather than refusing the checkpoint: for labels made from
	// text nobody chose, such as a prompt. Without it such a label is
	// refused (bad_input).
	Unique bool `json:"unique,omitempty"`
}

func (CheckpointParams) Method() string { return "checkpoint" }

// CheckpointResult is the generation cut.
type CheckpointResult struct {
	Reply
	Generation *Gen `json:"generation"`
}

// UnmountParams stops the daemon and unmounts its workspace; the reply
// comes once it is unmounted.
type UnmountParams struct{}

func (UnmountParams) Method() string { return "unmount" }

// EmptyResult carries only the head.
type EmptyResult struct{ Reply }

// LogParams lists the timeline.
type LogParams struct {
	All bool `json:"all,omitempty"` // include abandoned branches
	WAL bool `json:"wal,omitempty"` // include each generation's records
	// Run keeps only the records made by that run (implies WAL) and the
	// generations that have any.
	Run string `json:"run,omitempty"`
	// Paths keeps the generations (and records) that changed one of these
	// paths, relative to the workspace root, a directory with everything
	// below it; Exclude drops the paths a glob matches (whole, by base
	// name, or a directory above them). Counts are of the kept changes.
	Paths   []string `json:"paths,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
	// Agents adds each generation's agent states (LogEntry.AgentStates):
	// one call gives a picker its agent column, where agent.list and
	// agent.show per generation would cost two calls or more each.
	Agents bool `json:"agents,omitempty"`
}

func (LogParams) Method() string { return "log" }
func (LogParams) readOnly() bool { return true }

// LogReply is the timeline.
type LogReply struct {
	Reply
	Log *LogResult `json:"log"`
}

// DiffParams compares two states (Other "": the current one).
type DiffParams struct {
	Target string `json:"target"`
	Other  string `json:"other,omitempty"`
	Patch  bool   `json:"patch,omitempty"` // also a unified diff of the files
	// Paths and Exclude keep some of the changes, as in LogParams.
	Paths   []string `json:"paths,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
}

func (DiffParams) Method() string { return "diff" }
func (DiffParams) readOnly() bool { return true }

// DiffResult lists the changes.
type DiffResult struct {
	Reply
	Changes []rewind.Change `json:"changes"`
	Patch   string          `json:"patch,omitempty"`
}

// ShowParams describes one generation or record.
type ShowParams struct {
	Target string `json:"target"`
}

func (ShowParams) Method() string { return "show" }
func (ShowParams) readOnly() bool { return true }

// ShowResult is a record, and the generation when the target is one.
type ShowResult struct {
	Reply
	Record *RecordLine `json:"record,omitempty"`
	Gen    *LogEntry   `json:"gen,omitempty"`
}

// ExportParams writes a state's tree into a new directory.
type ExportParams struct {
	Target string `json:"target"`
	Dir    string `json:"dir"`
}

func (ExportParams) Method() string { return "export" }
func (ExportParams) readOnly() bool { return true }

// SeqResult names the record a call made or read.
type SeqResult struct {
	Reply
	Seq uint64 `json:"seq"`
}

// RewindParams brings the whole workspace back to a state.
type RewindParams struct {
	Target string `json:"target"`
	Dry    bool   `json:"dry,omitempty"` // only say what would change
	// NoCancel refuses the rewind (runs_active) while a run that is not
	// started with --on-rewind keep still has a process, instead of
	// cancelling or freezing it.
	NoCancel bool `json:"no_cancel,omitempty"`
}

func (RewindParams) Method() string   { return "rewind" }
func (p RewindParams) readOnly() bool { return p.Dry }

// RewindResult says what the rewind did (or would do).
type RewindResult struct {
	Reply
	Rewind *rewind.Result `json:"rewind"`
	// The runs the rewind cancelled (on-rewind kill), froze across the
	// swap and thawed after it (freeze), and left alone (keep).
	Cancelled []RunInfo `json:"cancelled,omitempty"`
	Frozen    []RunInfo `json:"frozen,omitempty"`
	Kept      []RunInfo `json:"kept,omitempty"`
	// Already: the workspace was in the target state already; nothing
	// was written and no run was stopped.
	Already bool `json:"already,omitempty"`
}

// RestoreParams brings one path back from a state.
type RestoreParams struct {
	Path   string `json:"path"` // below the workspace root
	Target string `json:"target"`
	// Dry only says what would change (Changes), writing nothing.
	Dry bool `json:"dry,omitempty"`
}

func (RestoreParams) Method() string   { return "restore" }
func (p RestoreParams) readOnly() bool { return p.Dry }

// RestoreResult says what was restored.
type RestoreResult struct {
	Reply
	Restore *rewind.RestoreResult `json:"restore"`
	// Changes are what the restore changes (or, dry, would change) below
	// its path, from the live tree to the target's: set on a dry run.
	Changes []rewind.Change `json:"changes,omitempty"`
}

// GCParams runs the collector: it applies the store's retention policy
// (see RetentionParams), or, with Keep > 0, keeps the Keep newest
// generations of the current path and everything after the oldest of
// them, and drops the objects nothing retained names. Mounted or not.
type GCParams struct {
	Keep int  `json:"keep"` // 0: the store's policy
	Dry  bool `json:"dry,omitempty"`
}

func (GCParams) Method() string { return "gc" }

func (p GCParams) readOnly() bool { return p.Dry }

// GCResult says what was (or would be) dropped.
type GCResult struct {
	Reply
	GC *rewind.RetainResult `json:"gc"`
}

// RetentionParams reports the store's retention policy and floors; with
// a window, the period or Default set, it changes the policy first (kept
// in the store; the next collection applies it).
type RetentionParams struct {
	Seqs        string `json:"seqs,omitempty"`        // every seq for this long ("7d", "36h") or this many records ("500")
	Generations string `json:"generations,omitempty"` // generations for this long ("90d") or this many ("50")
	Every       string `json:"every,omitempty"`       // the mounted collector's period ("10m")
	Default     bool   `json:"default,omitempty"`     // back to the default policy (then the others apply)
}

func (RetentionParams) Method() string { return "retention" }

func (p RetentionParams) readOnly() bool {
	return p.Seqs == "" && p.Generations == "" && p.Every == "" && !p.Default
}

// RetentionResult is the policy and the floors.
type RetentionResult struct {
	Reply
	Retention *rewind.RetentionInfo `json:"retention"`
}

// AgentSaveParams saves an agent's state as one record.
type AgentSaveParams struct {
	Name string `json:"name"`
	Data []byte `json:"data"` // base64 in JSON
}

func (AgentSaveParams) Method() string { return "agent.save" }

// AgentListParams lists the agents' states at a target ("" now).
type AgentListParams struct {
	At string `json:"at,omitempty"`
}

func (AgentListParams) Method() string { return "agent.list" }
func (AgentListParams) readOnly() bool { return true }

// AgentListResult is each agent's state and the seq it was read at.
type AgentListResult struct {
	Reply
	Agents []AgentState `json:"agents"`
	Seq    uint64       `json:"seq"`
}

// AgentShowParams reads one agent's saved state.
type AgentShowParams struct {
	Name string `json:"name"`
	At   string `json:"at,omitempty"`
}

func (AgentShowParams) Method() string { return "agent.show" }
func (AgentShowParams) readOnly() bool { return true }

// AgentShowResult is the state as saved.
type AgentShowResult struct {
	Reply
	Data []byte `json:"data"`
}

// Status describes a running daemon, or an unmounted store.
type Status struct {
	Mounted     bool   `json:"mounted"`
	Dir         string `json:"dir"`
	Mountpoint  string `json:"mountpoint"`
	Store       string `json:"store"`
	Pid         int    `json:"pid"`
	HeadSeq     uint64 `json:"head_seq"`
	Records     uint64 `json:"records"`
	Objects     int64  `json:"objects"`
	ObjectBytes int64  `json:"object_bytes"`
	StoreBytes  int64  `json:"store_bytes"`
	Inodes      int    `json:"inodes"`
	Buffered    int    `json:"buffered_bytes"`
	Uptime      string `json:"uptime"`
	// ViewsName is the name of the history views in the mount root
	// (mount --views-name, remembered in the store).
	ViewsName string `json:"views_name"`
	// PrivateHistory: only the mount's owner and root may browse the
	// views (mount --private-history, remembered in the store).
	PrivateHistory bool `json:"private_history"`
	// RunMode is how `reynfs run` tracks runs (cgroup2, or process-group
	// where no cgroup2 is writable) and RunModeReason why; empty on an
	// unmounted store.
	RunMode       string `json:"run_mode,omitempty"`
	RunModeReason string `json:"run_mode_reason,omitempty"`
	// Remotes: each remote with a continuous sync or a shipped seq the
	// store records (remote.go).
	Remotes []RemoteSync `json:"remotes,omitempty"`
	// Lazy: the store is a lazy clone (clone --lazy); absent when
	// every object is local.
	Lazy *LazyStatus `json:"lazy,omitempty"`
	// Follow: the mount is a read-only follower (mount --follow).
	Follow *FollowStatus `json:"follow,omitempty"`
}

// LazyStatus is a lazy clone's progress: what is still on its remote
// and what was fetched since the store was opened, on demand (a read of
// an object the store lacked) and by the prefetcher.
type LazyStatus struct {
	Remote           string `json:"remote"`
	RemoteObjects    int64  `json:"remote_objects"`
	RemoteBytes      int64  `json:"remote_bytes"` // as stored (compressed) on the remote
	DemandObjects    int64  `json:"demand_objects"`
	DemandBytes      int64  `json:"demand_bytes"`
	DemandRequests   int64  `json:"demand_requests"`
	PrefetchObjects  int64  `json:"prefetch_objects"`
	PrefetchBytes    int64  `json:"prefetch_bytes"`
	PrefetchRequests int64  `json:"prefetch_requests"`
	Prefetching      bool   `json:"prefetching"` // the prefetcher runs
	// Complete: every object was fetched while this daemon ran; the
	// store is whole (later opens show no lazy part).
	Complete bool `json:"complete,omitempty"`
}

// Gen describes a generation that was cut.
type Gen struct {
	ID    int           `json:"id"` // gN
	Took  time.Duration `json:"took_ns"`
	Seq   uint64        `json:"seq"`
	Kind  string        `json:"kind"`
	Label string        `json:"label"`
	Root  string        `json:"root"`
}

// LogEntry is one generation of the timeline.
type LogEntry struct {
	ID      int            `json:"id"`
	Seq     uint64         `json:"seq"`
	Kind    string         `json:"kind"`
	Label   string         `json:"label"`
	Time    time.Time      `json:"time"`
	Root    string         `json:"root"`
	Active  bool           `json:"active"` // on the path of the current state
	Changed rewind.Summary `json:"changed"`
	Parent  uint64         `json:"parent_seq"` // previous generation on its own path
	// Pid and Comm name the process that asked for the generation (a
	// checkpoint's caller, from the control socket's peer credentials),
	// Run and Agent the `reynfs run` it belongs to: a hook of an agent
	// started with reynfs run names that run. Empty when not known.
	Pid   uint32 `json:"pid,omitempty"`
	Comm  string `json:"comm,omitempty"`
	Run   string `json:"run,omitempty"`
	Agent string `json:"agent,omitempty"`
	// AgentStates are the agents' saved states the generation holds, by
	// name (only with LogParams.Agents).
	AgentStates []GenAgentState `json:"agent_states,omitempty"`
	Records     []RecordLine    `json:"records,omitempty"`
	IsLatest    bool            `json:"-"`
}

// GenAgentState is one agent's saved state in a generation.
type GenAgentState struct {
	Name  string `json:"name"`
	State string `json:"state"` // the state blob's hash
	// Changed: the state differs from the one the previous generation on
	// the path held (or there was none): the agent saved during it.
	Changed bool `json:"changed,omitempty"`
	// Session is the conversation a hook saved ('reynfs hook'), for a
	// changed state that is a hook's; "" otherwise.
	Session string `json:"session,omitempty"`
}

// RecordLine is one journal record for people.
type RecordLine struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Op   string    `json:"op"`
	What string    `json:"what"`
	// Paths are the paths the record touched, relative to the workspace
	// root (log --wal; a rename names the old and the new).
	Paths []string `json:"paths,omitempty"`
	Pid   uint32   `json:"pid,omitempty"`
	Comm  string   `json:"comm,omitempty"`
	// Run and Agent: the `reynfs run` whose process made the record.
	Run   string `json:"run,omitempty"`
	Agent string `json:"agent,omitempty"`
}

// Branch is an abandoned segment: records Seqs From..To left by the reset at Reset.
type Branch struct {
	Reset  uint64 `json:"reset_seq"`
	Target uint64 `json:"target_seq"`
	From   uint64 `json:"from_seq"`
	To     uint64 `json:"to_seq"`
	Active bool   `json:"active"`
}

// LogResult is the timeline, newest first.
type LogResult struct {
	Head     uint64     `json:"head_seq"`
	Gens     []LogEntry `json:"generations"`
	Branches []Branch   `json:"branches,omitempty"`
}

// AgentState is one agent's saved state.
type AgentState struct {
	Name  string   `json:"name"`
	State cas.Hash `json:"state"`
}
