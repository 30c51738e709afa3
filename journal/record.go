package journal

import "github.com/reynfs/reynfs/cas"

// Op is the type of a journal record.
type Op uint8

// File-system ops. Each carries exactly what a replay needs to reproduce the
// mutation in the tree model without looking at anything but the record and
// the objects it names (see fs/tree Apply).
const (
	OpInvalid Op = iota
	// OpCreate makes a non-directory, non-symlink inode (regular file, fifo,
	// socket, device): Parent, Name, Ino, Mode (with type bits), Uid, Gid, Rdev.
	OpCreate
	// OpMkdir makes a directory: Parent, Name, Ino, Mode, Uid, Gid.
	OpMkdir
	// OpSymlink makes a symlink: Parent, Name, Ino, Target, Uid, Gid.
	OpSymlink
	// OpLink adds a name for an existing inode: Parent, Name, Ino.
	OpLink
	// OpUnlink removes a non-directory name: Parent, Name.
	OpUnlink
	// OpRmdir removes an empty directory: Parent, Name.
	OpRmdir
	// OpRename moves Parent/Name to NewParent/NewName; Flags holds
	// RENAME_NOREPLACE (1) or RENAME_EXCHANGE (2) as in renameat2(2).
	OpRename
	// OpData sets file content: Ino, Size (the new size), Holes (ranges of
	// chunk slots that become holes) and Chunks (the chunk slots that
	// changed, each an index and a hash; the zero hash is a hole too, as
	// records written before Holes existed have it). Holes apply first,
	// then Chunks. Slots at or past ceil(Size/ChunkSize) are dropped. Kind
	// says which syscall caused it, for people (DataWrite, DataTruncate, ...).
	OpData
	// OpSetattr sets the attributes named by Valid (SetMode, SetUid, ...).
	OpSetattr
	// OpSetxattr sets Ino's extended attribute XName to XValue.
	OpSetxattr
	// OpRemovexattr removes Ino's extended attribute XName.
	OpRemovexattr

	// Control records share the sequence.

	// OpGeneration cuts a generation: GenKind, Label, Root (the tree's
	// Merkle root at this seq), NextIno, Agents (name -> state blob).
	OpGeneration
	// OpReset is a rewind: Target is the seq whose state becomes live,
	// Supersedes the previous active pointer (0 for none).
	OpReset
	// OpAgentState publishes one agent's runtime state: Label is the agent
	// name, Root the state blob.
	OpAgentState
	// OpImport replaces the whole tree with the tree named by Root (changes
	// made to the project directory while it was not mounted); NextIno is
	// the allocator floor after it.
	OpImport
	// OpRestore puts a copy of a stored subtree at Parent/Name, replacing
	// what is there: Root names the subtree's top inode object (from any
	// retained state), Ino is the first new inode number (the copy's inodes
	// are numbered Ino, Ino+1, ... in depth-first name order), Label says
	// where it came from.
	OpRestore

	opMax
)

var opNames = [...]string{
	OpInvalid: "invalid", OpCreate: "create", OpMkdir: "mkdir", OpSymlink: "symlink",
	OpLink: "link", OpUnlink: "unlink", OpRmdir: "rmdir", OpRename: "rename",
	OpData: "data", OpSetattr: "setattr", OpSetxattr: "setxattr", OpRemovexattr: "removexattr",
	OpGeneration: "generation", OpReset: "reset", OpAgentState: "agent-state", OpImport: "import",
	OpRestore: "restore",
}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// Rename flags, as in renameat2(2).
const (
	RenameNoreplace = 1
	RenameExchange  = 2
)

// Setattr Valid bits.
const (
	SetMode  = 1 << 0
	SetUid   = 1 << 1
	SetGid   = 1 << 2
	SetAtime = 1 << 3
	SetMtime = 1 << 4
)

// Data kinds: which syscall an OpData came from.
const (
	DataWrite     = 0
	DataTruncate  = 1
	DataFallocate = 2
	DataCopy      = 3
)

// Chunk is one changed chunk slot of a file.
type Chunk struct {
	Index uint64
	Hash  cas.Hash
}

// HoleRange is Count chunk slots from Start on that become holes: a punched
// 40 GiB range is one HoleRange, not 655,360 chunk entries.
type HoleRange struct {
	Start, Count uint64
}

// Record is one journal record. Fields an Op does not use are zero and are
// not encoded. Time is the wall clock in Unix nanoseconds when the record was
// made; replay uses it as the ctime (and mtime where the op changes it), so a
// replay reproduces the live tree exactly.
type Record struct {
	Seq  uint64
	Op   Op
	Time int64
	Pid  uint32 // process that caused it, from the FUSE request (0 if none)
	Comm string // that process's command name
	// Run and Agent name the `reynfs run` that process belonged to and
	// its agent ("" for none). Like Pid and Comm any op may carry them;
	// they are tagged fields, so records written before they existed
	// decode with both empty.
	Run   string
	Agent string

	Parent    uint64
	Name      string
	NewParent uint64
	NewName   string
	Ino       uint64
	Mode      uint32
	Uid       uint32
	Gid       uint32
	Rdev      uint32
	Flags     uint32
	Target    string // symlink target

	Size   uint64
	Kind   uint8 // Data* for OpData
	Chunks []Chunk
	Holes  []HoleRange // sorted, disjoint, not adjacent; OpData only

	Valid uint32 // Set* for OpSetattr
	Atime int64
	Mtime int64

	XName  string
	XValue []byte

	// Control records.
	GenKind    string // import|turn|plan-step|phase|manual|auto|rewind
	Label      string
	Root       cas.Hash
	NextIno    uint64
	ResetTo    uint64 // OpReset: target seq
	Supersedes uint64 // OpReset: previous active pointer
	Agents     []AgentRef
}

// AgentRef names one agent's runtime-state blob in a generation.
type AgentRef struct {
	Name  string
	State cas.Hash
}
