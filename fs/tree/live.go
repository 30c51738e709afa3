package tree

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// Journal is what the live tree needs of the journal: *journal.Journal.
type Journal interface {
	Enqueue(r *journal.Record, blobs []cas.Blob) *journal.Pending
	// EnqueueSyncing is Enqueue for a record whose Sync follows at once
	// (Fsync): it leaves the committer asleep for the Sync to append.
	EnqueueSyncing(r *journal.Record, blobs []cas.Blob) *journal.Pending
	Sync() error
	// Admit reports whether an ordinary write of about n journaled bytes
	// may go ahead (journal.Admit*: the class); its error wraps
	// journal.ErrNoSpace when the store's file system is full.
	Admit(n int, class int) error
}

// Caller says who asked for an operation: the process from the FUSE
// request, recorded in every record it causes.
type Caller struct {
	Pid  uint32
	Comm string
	// Run and Agent name the `reynfs run` the process belongs to ("" for
	// none); a mutation by a run a rewind cancelled is refused
	// (CancelRunsLocked).
	Run   string
	Agent string
	Uid   uint32
	Gid   uint32
	// Umask is the caller's umask for a create, mkdir or mknod: with
	// FUSE_DONT_MASK the kernel leaves it to the file system, which
	// applies it only where no default ACL decides the mode.
	Umask uint32
}

// Live is the tree the mount serves: the pure Tree plus the lock, the
// journal every mutation goes through, inode allocation, open counts for
// unlinked files, and write buffering.
//
// A mutation is checked and applied to the tree and enqueued in the journal
// under one write lock, so apply order is seq order; the lock is released
// before the journal commits (group commit does the rest). Replies do not
// wait for the commit (except a big write's, whose bytes the commit
// borrows: see WriteAt): like a kernel file system, an operation is
// durable once fsync (Sync) returns, and a crash keeps a prefix of the
// journal.
type Live struct {
	mu    sync.RWMutex
	t     *Tree
	j     Journal
	stage *staging // chunks enqueued but not yet committed

	nextIno, inoCeil uint64
	reserve          func(ceil uint64) error // persists a new inode ceiling

	opens   map[uint64]int   // open handles per inode
	orphans map[uint64]*Node // unlinked but still open or referenced

	// refs counts the references handed out by Lookup, the node-making
	// calls and Entry, until Forget returns them (the kernel's nlookup):
	// an unlinked inode the kernel still knows stays usable, as on ext4.
	// refMu nests inside mu and may be taken under its read lock.
	refMu   sync.Mutex
	refs    map[uint64]uint64
	dirty   map[uint64]*Node  // files with pending data
	writers map[uint64]Caller // who last wrote each dirty file's pending data
	written map[uint64]int    // bytes written into each dirty file's buffers since its last flush
	pending int               // bytes in pending buffers

	// lending is set while WriteAt flushes chunks whose bytes are its
	// request's (Prepared.Lent): commitAs then lends them to the
	// staging and notes them in lent for WriteAt to wait for.
	lending bool
	lent    []lentCommit

	epoch  Epoch // counts swaps; a handle opened before one is stale
	failed error // first journal failure: every later mutation fails
	// cancelled holds the runs a rewind cancelled (CancelRunsLocked):
	// their mutations are refused, so none lands after the reset record.
	cancelled map[string]bool
	// privileged is set while FlushAllLocked runs (a generation cut, a
	// rewind, an unmount): its commits may use the space reserve that
	// ordinary writes leave (journal/space.go).
	privileged bool
	// syncing is set while Fsync flushes under the lock: its record is
	// enqueued for the Sync that follows (Journal.EnqueueSyncing).
	syncing   bool
	now       func() int64
	afterPlan func() // tests: runs in ReadVec between the lock and the store reads
}

// Write buffering limits: a file's pending data is journaled once
// FileFlushBytes were written into it, or once its chunk buffers hold
// FileBufferBytes (counted by PendingBytes, each touched chunk at its
// buffer's size), and everything once all files' buffers together hold
// TotalFlushBytes.
//
// Counting what was written rather than the buffers lets small writes
// scattered over a file gather in its buffers: fio's 4 KiB random writes
// were journaled every 16 writes, each of a whole 64 KiB chunk, and in a
// small file (a database) the chunks a later write lands in again are
// now journaled once. A sequential writer fills whole chunks, so both
// counts reach FileFlushBytes together. FileBufferBytes bounds what one
// flush hashes under the live lock.
const (
	FileFlushBytes  = 1 << 20
	FileBufferBytes = 4 << 20
	TotalFlushBytes = 64 << 20
	inoBlock        = 1 << 16
)

// ErrFailed wraps the journal failure that stopped all mutations.
var ErrFailed = errors.New("journal failed: file system is read-only")

// ErrRunCancelled refuses a mutation by a run a rewind cancelled. It wraps
// ErrStale: the caller belongs to the abandoned future, as a handle opened
// before the rewind does, and gets ESTALE.
var ErrRunCancelled = fmt.Errorf("run cancelled by a rewind: %w", ErrStale)

// NewLive serves t. nextIno is the first unused inode number and ceil the
// highest one reserved durably; reserve is called (under the lock) to move
// the ceiling before an inode past it is handed out.
func NewLive(t *Tree, j Journal, nextIno, ceil uint64, reserve func(uint64) error) *Live {
	l := &Live{
		t: t, j: j, nextIno: nextIno, inoCeil: ceil, reserve: reserve,
		opens: map[uint64]int{}, orphans: map[uint64]*Node{}, dirty: map[uint64]*Node{}, writers: map[uint64]Caller{},
		refs: map[uint64]uint64{}, epoch: NoHandle + 1,
		now: func() int64 { return time.Now().UnixNano() },
	}
	l.stage = newStaging(t.store)
	l.adopt(t)
	return l
}

// Lock and Unlock give rewind/ exclusive access for a generation cut or a
// swap; Tree is valid only while the lock is held.
func (l *Live) Lock()       { l.mu.Lock() }
func (l *Live) Unlock()     { l.mu.Unlock() }
func (l *Live) Tree() *Tree { return l.t }

// EachNodeLocked calls fn for every node the live tree serves, unlinked
// files still open included, in no order; the caller holds the lock. The
// collector marks what they name (rewind/collect.go).
func (l *Live) EachNodeLocked(fn func(n *Node)) {
	for _, n := range l.t.nodes {
		fn(n)
	}
	for _, n := range l.orphans {
		fn(n)
	}
}

// Swap replaces the served tree (a rewind); the caller holds the lock.
// Pending data of the old tree is discarded with it.
func (l *Live) Swap(t *Tree) {
	l.adopt(t)
	l.epoch++
	for _, n := range l.dirty {
		n.ClearPending()
		n.counted = 0
	}
	l.dirty = map[uint64]*Node{}
	l.writers = map[uint64]Caller{}
	l.written = nil
	l.pending = 0
}

// adopt makes t the served tree, reading through the staging overlay.
func (l *Live) adopt(t *Tree) {
	l.t = t
	t.store = l.stage
	t.recycle = l.stage.recycle
	t.OnDrop = l.onDrop
}

func (l *Live) onDrop(n *Node) {
	if l.opens[n.Ino] > 0 || l.referenced(n.Ino) {
		// Still open: its buffered writes stay readable through the
		// handles (flush keeps an orphan's data in memory only).
		l.orphans[n.Ino] = n
		return
	}
	if n.pending != nil {
		l.dropPending(n, nil)
	}
}

// Epoch counts the swaps of the served tree. A handle remembers the epoch
// it was opened in and hands it to every write through it (WriteAt,
// Fallocate, CopyRange, SetAttr by handle): once a rewind has swapped the
// tree, the write belongs to the discarded future and fails with ErrStale.
// The comparison runs under l.mu, the lock Swap holds too, so no write can
// pass the check and then land in the tree swapped in after it
// (invariant 5). A check before taking the lock would leave that window.
type Epoch uint64

// NoHandle is the epoch of a change that did not come through an open
// handle (truncate(2) by path, reynfs's own tools): it is never stale.
// It is the zero value, so the live tree counts its epochs from 1.
const NoHandle Epoch = 0

// Epoch returns the current epoch, for a handle being opened.
func (l *Live) Epoch() Epoch {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epoch
}

// handleNode is node for a request through a handle opened in epoch e.
// Caller holds l.mu (read or write).
func (l *Live) handleNode(ino uint64, e Epoch) (*Node, error) {
	if e != NoHandle && e != l.epoch {
		return nil, ErrStale
	}
	return l.node(ino)
}

// node returns inode ino, also when it is unlinked but still open.
func (l *Live) node(ino uint64) (*Node, error) {
	if n := l.t.nodes[ino]; n != nil {
		return n, nil
	}
	if n := l.orphans[ino]; n != nil {
		return n, nil
	}
	return nil, ErrStale
}

// commit applies r to the tree and enqueues it. Caller holds l.mu.
//
// Everything that can refuse the record runs before Apply: Validate (the
// fields and the encoded size the journal accepts) and Admit (free space
// in the store). A refusal there is an errno for this one operation and
// the tree is unchanged; only a journal that stopped taking records after
// Apply (closed or failed) makes the file system read-only.
func (l *Live) commit(c Caller, r *journal.Record, blobs []cas.Blob) error {
	return l.commitAs(c, c, r, blobs)
}

// commitAs is commit for a request by c of a record made by who: a flush
// journals data another caller wrote.
func (l *Live) commitAs(c, who Caller, r *journal.Record, blobs []cas.Blob) error {
	_, err := l.commitP(c, who, r, blobs)
	return err
}

// commitP is commitAs that returns the commit's Pending (nil with an
// error).
func (l *Live) commitP(c, who Caller, r *journal.Record, blobs []cas.Blob) (*journal.Pending, error) {
	if l.failed != nil {
		return nil, l.failed
	}
	if err := l.refuseCancelled(c); err != nil {
		return nil, err
	}
	if r.Time == 0 {
		r.Time = l.now()
	}
	r.Pid, r.Comm, r.Run, r.Agent = who.Pid, who.Comm, who.Run, who.Agent
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if err := l.dirRoom(r); err != nil {
		return nil, err
	}
	if !l.privileged {
		n := r.EncodedLen()
		for _, b := range blobs {
			n += len(b.Data)
		}
		if err := l.j.Admit(n, admitClass(r, blobs)); err != nil {
			return nil, err
		}
	}
	if err := l.t.Apply(r); err != nil {
		return nil, err
	}
	var p *journal.Pending
	if l.syncing || l.lending {
		// Its Sync, or the lending WriteAt's WaitLogged, appends the
		// batch itself when the committer is idle.
		p = l.j.EnqueueSyncing(r, blobs)
	} else {
		p = l.j.Enqueue(r, blobs)
	}
	if err := p.Refused(); err != nil {
		// Applied but not journaled: the tree is ahead of the journal.
		l.failed = fmt.Errorf("%w: %v", ErrFailed, err)
		return nil, l.failed
	}
	if l.lending {
		l.stage.lend(blobs)
		l.lent = append(l.lent, lentCommit{p: p, blobs: blobs})
		return p, nil
	}
	l.stage.hold(blobs, p)
	return p, nil
}

// lentCommit is a commit whose blobs' bytes a write lent (see WriteAt).
type lentCommit struct {
	p     *journal.Pending
	blobs []cas.Blob
}

// CancelRunsLocked marks runs cancelled: from now on every mutation they
// ask for is refused with ErrRunCancelled, before it changes anything. A
// rewind calls it under the lock before it appends its reset record, once
// the runs' processes are gone: a request one of them had already sent,
// still waiting for the lock, is refused then rather than journaled after
// the reset. The kernel keeps a killed process waiting for the answer to a
// request it sent, so "the cgroup is empty" covers most of them; this
// covers the rest (background requests, a process that could not be
// killed in time, one the fallback mode lost track of) without trusting
// any of that. The caller holds the lock.
func (l *Live) CancelRunsLocked(ids []string) {
	for _, id := range ids {
		if id == "" {
			continue
		}
		if l.cancelled == nil {
			l.cancelled = map[string]bool{}
		}
		l.cancelled[id] = true
	}
}

// CancelRuns is CancelRunsLocked for a caller without the lock.
func (l *Live) CancelRuns(ids []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.CancelRunsLocked(ids)
}

// RefuseRunLocked is the refusal every mutation of run gets once a rewind
// cancelled it (nil otherwise), for what changes the journal beside the
// tree under the same lock: an agent's saved state. The caller holds the
// lock.
func (l *Live) RefuseRunLocked(run string) error { return l.refuseCancelled(Caller{Run: run}) }

// refuseCancelled refuses a caller whose run was cancelled. Every mutation
// asks, under the lock: commit for those that make a record, and the
// buffered writes before they touch a buffer (whoever flushes it later
// would journal their data). Caller holds l.mu.
func (l *Live) refuseCancelled(c Caller) error {
	if c.Run != "" && l.cancelled[c.Run] {
		return fmt.Errorf("%w (run %s)", ErrRunCancelled, c.Run)
	}
	return nil
}

// admitClass says how much of the space reserve r may use: removals and
// in-place metadata changes may go on where creating and growing stop, so
// files can still be deleted on a full disk.
func admitClass(r *journal.Record, blobs []cas.Blob) int {
	switch r.Op {
	case journal.OpUnlink, journal.OpRmdir, journal.OpRename, journal.OpSetattr, journal.OpRemovexattr:
		return journal.AdmitShrink
	case journal.OpData:
		if len(blobs) == 0 {
			return journal.AdmitShrink // truncate or punch: holes cost no space
		}
	}
	return journal.AdmitWrite
}

// fallocClass: punching a hole frees, preallocating grows.
func fallocClass(mode uint32) int {
	if mode&FallocPunchHole != 0 {
		return journal.AdmitShrink
	}
	return journal.AdmitWrite
}

// MaxXattrBytes bounds the extended attributes of one inode, names and
// values together. They live in the inode's object, which must fit one
// Badger value (see MaxWriteSize): 64 KiB values are legal, so without a
// bound a few thousand setxattr calls would make an object the next
// generation cut cannot store. Past it setxattr is ENOSPC, as on ext4
// when an inode's xattr space is used up.
const MaxXattrBytes = 16 << 20

// maxDirBytes bounds the entries of one directory as its object encodes
// them (name, inode number, object hash: up to len(name)+44 bytes each).
// The object must fit one Badger value (128 MiB) or the generation cut
// that stores it fails and the mount goes read-only; past the bound a new
// name is ENOSPC, as on ext4 when a directory's index is full. A variable
// so that tests can lower it.
var maxDirBytes = 96 << 20

// dirRoom refuses a record that adds a name to a directory already at
// maxDirBytes. Only directories with more entries than could fit at the
// longest names are measured, so the check costs nothing below ~300,000
// entries.
func (l *Live) dirRoom(r *journal.Record) error {
	parent, name := r.Parent, r.Name
	switch r.Op {
	case journal.OpCreate, journal.OpMkdir, journal.OpSymlink, journal.OpLink, journal.OpRestore:
	case journal.OpRename:
		parent, name = r.NewParent, r.NewName
	default:
		return nil
	}
	d := l.t.nodes[parent]
	if d == nil || !d.IsDir() || len(d.entries)*(MaxName+dirEntryBytes) <= maxDirBytes {
		return nil
	}
	total := len(name) + dirEntryBytes
	for k := range d.entries {
		total += len(k) + dirEntryBytes
	}
	if total > maxDirBytes {
		return fmt.Errorf("add %q to directory %d: its entries would take %d bytes, more than %d: %w",
			name, parent, total, maxDirBytes, ErrNoSpace)
	}
	return nil
}

// dirEntryBytes is what one entry costs in a directory object besides its
// name, at most.
const dirEntryBytes = 44

// xattrRoom refuses a setxattr that would take n's attributes past
// MaxXattrBytes.
func xattrRoom(n *Node, name string, value []byte) error {
	total := len(name) + len(value)
	for k, v := range n.xattrs {
		if k != name {
			total += len(k) + len(v)
		}
	}
	if total > MaxXattrBytes {
		return fmt.Errorf("setxattr %s: inode %d would hold %d bytes of attributes, more than %d: %w",
			name, n.Ino, total, MaxXattrBytes, ErrNoSpace)
	}
	return nil
}

// admit asks the journal for room for n more bytes of file data that will
// be buffered and journaled later (write, copy_file_range, fallocate,
// truncate), before the buffers change: a refusal leaves the file as it
// was. Caller holds l.mu.
func (l *Live) admit(n uint64, class int) error {
	if l.privileged {
		return nil
	}
	return l.j.Admit(int(min(uint64(l.pending)+n, 1<<40)), class)
}

// Fail stops all mutations after a journal error (the journal reports it
// again to every Sync).
func (l *Live) Fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.FailLocked(err)
}

// FailLocked is Fail for a caller that holds the lock.
func (l *Live) FailLocked(err error) {
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %v", ErrFailed, err)
	}
}

// allocIno hands out a new inode number. Caller holds l.mu.
func (l *Live) allocIno() (uint64, error) {
	if l.nextIno > l.inoCeil {
		ceil := l.nextIno + inoBlock
		if err := l.reserve(ceil); err != nil {
			return 0, fmt.Errorf("reserve inode numbers: %w", err)
		}
		l.inoCeil = ceil
	}
	ino := l.nextIno
	l.nextIno++
	return ino, nil
}

// NextIno returns the first unused inode number.
func (l *Live) NextIno() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.nextIno
}

// Open counts an open handle of ino so it outlives its last name. It
// returns the epoch the handle belongs to, read under the same lock as the
// node: an epoch read after Open returned could be a rewind's, and a
// handle opened on the discarded future would then write into the new
// tree (invariant 5).
func (l *Live) Open(ino uint64) (Attr, Epoch, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.node(ino)
	if err != nil {
		return Attr{}, NoHandle, err
	}
	l.opens[ino]++
	return n.Attr, l.epoch, nil
}

// Release drops an open handle; an unlinked file goes with its last one.
func (l *Live) Release(ino uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.opens[ino]--; l.opens[ino] > 0 {
		return
	}
	delete(l.opens, ino)
	l.reap(ino)
}

// ref counts one reference to ino handed out. Caller holds l.mu (read or
// write).
func (l *Live) ref(ino uint64) {
	l.refMu.Lock()
	l.refs[ino]++
	l.refMu.Unlock()
}

func (l *Live) referenced(ino uint64) bool {
	l.refMu.Lock()
	defer l.refMu.Unlock()
	return l.refs[ino] > 0
}

// Forget returns n references to ino (the kernel forgot the inode); an
// unlinked inode goes with its last reference and its last open handle.
func (l *Live) Forget(ino, n uint64) {
	l.refMu.Lock()
	left := l.refs[ino] - min(n, l.refs[ino])
	if left == 0 {
		delete(l.refs, ino)
	} else {
		l.refs[ino] = left
	}
	l.refMu.Unlock()
	if left > 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reap(ino)
}

// reap drops an orphan nobody holds any more. Caller holds l.mu.
func (l *Live) reap(ino uint64) {
	n := l.orphans[ino]
	if n == nil || l.opens[ino] > 0 || l.referenced(ino) {
		return
	}
	delete(l.orphans, ino)
	l.dropPending(n, nil)
}

// NextInoLocked is NextIno for a caller that holds the lock.
func (l *Live) NextInoLocked() uint64 { return l.nextIno }

// FlushAllLocked is FlushAll for a caller that holds the lock: a
// generation cut, a rewind or an unmount, which must finish on a full
// disk and so may use the space reserve.
func (l *Live) FlushAllLocked(c Caller) error {
	l.privileged = true
	defer func() { l.privileged = false }()
	return l.flushAll(c)
}
