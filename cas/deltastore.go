package cas

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// Deltas in the segment log (format 3; see doc.go, "Deltas").
//
// A blob that names a Base (the previous version of the same inode) is
// stored as a Delta against it when the base is in the index, the base's
// chain is short enough (MaxChain) and the delta is well under half the
// object's whole stored form. The index entry then names the base and the
// chain's depth; a read walks the chain down to a whole (or cached)
// object, applies the deltas upward and checks the result's hash once.

// MaxChain bounds a delta chain: a read of an object applies at most
// MaxChain deltas, and a version that would go deeper is stored whole.
// Measured (BenchmarkGetDeltaChain, a 4 KB directory read cold): 11 µs
// whole, 4.5 µs more per link (a lookup and a pread), so at most some
// 150 µs at 32; and on the store-size benchmark (10k files, 100
// checkpoints) a bound of 16 stored 32 more directories whole than 32
// (7.79 against 7.67 MiB), which for a directory changed at every
// checkpoint is 40 % more bytes per version. A directory once read is held
// by the tree, so cold reads are rare (mount, rewind): 32.
var MaxChain = 32

// MaxDataChain is MaxChain for file chunks (blobs that bring their
// BaseData, or are marked Chunk): a link of a 64 KiB chunk's chain costs far more to read
// than a directory's (BenchmarkGetDataChain, cold, loaded machine: whole
// 33-46 us, 8 deltas 200-370 us, 16 deltas 260-320 us: a lookup, a pread
// and a copy of the whole chunk per link), a file is read cold more often
// than a directory (which the tree holds once read), and a random
// writer's read-modify-write of a chunk no cache holds walks its chain.
// At 8 a chunk rewritten 4 KiB at a time stores one version in 9 whole:
// some 11 KiB a write where every version whole is 64 KiB.
var MaxDataChain = 8

// maxDepth bounds the chain a read follows, whatever the entries say: a
// damaged index entry cannot send a read round a cycle.
const maxDepth = 1 << 12

// deltaOverhead is what a delta entry costs beyond its bytes: the base's
// name in the frame and in the index entry, and the depth.
const deltaOverhead = 2*len(Hash{}) + 4

// minDeltaObject: smaller objects (a small file's inode object, 72 bytes)
// are not worth a delta, which costs deltaOverhead before its first op.
const minDeltaObject = 4 * deltaOverhead

// maxDeltaObject bounds the objects a writer tries to delta: inode
// objects are kilobytes; a very large directory is left whole rather
// than indexed on the commit path.
const maxDeltaObject = 1 << 20

// asDelta returns bl stored as a delta against bl.Base when that pays (see
// above); whole is the size of its whole stored form. It notes the base
// with the guard before looking it up, as a dedup does: a running sweep
// then keeps the base and, through its closure, the base's chain.
func (b *Badger) asDelta(bl Blob, whole int, crcs []uint32) (stored, bool) {
	if bl.Base.IsZero() || bl.Base == bl.Hash || len(bl.Data) > maxDeltaObject || whole < minDeltaObject {
		return stored{}, false
	}
	b.guard.note(bl.Base) // before the lookup, as a dedup (guard.go)
	loc, found, inLog, err := b.baseLoc(bl.Base)
	if err != nil || !found {
		return stored{}, false
	}
	depth := 1
	if inLog && loc.Comp == compDelta {
		depth += int(loc.Depth)
	}
	if depth > MaxChain || (bl.BaseData != nil || bl.Chunk) && depth > MaxDataChain {
		return stored{}, false
	}
	base := bl.BaseData
	if base == nil {
		if base, err = b.Get(bl.Base); err != nil {
			return stored{}, false
		}
	}
	var d []byte
	if bl.BaseData != nil && b.pagesVouched(bl, crcs) {
		d = DeltaPages(base, bl.Data, bl.Pages)
	} else {
		d = Delta(base, bl.Data)
	}
	if 2*(len(d)+deltaOverhead) > whole {
		return stored{}, false
	}
	return stored{h: bl.Hash, raw: len(bl.Data), comp: compDelta, data: d, base: bl.Base, depth: uint16(depth)}, true
}

// pagesVouched reports whether DeltaPages may take bl.Data's pages outside
// bl.Pages as equal to bl.BaseData's without comparing them: crcs (the
// page CRC-32Cs of bl.Data) must match, page by page, the CRCs remembered
// for the base (as verified when the live tree read it, or as written).
// The writer's page tracking is then checked, not trusted: a page it
// missed differs in CRC (but for a 2^-32 chance), and the chunk gets an
// ordinary Delta. Without the base remembered, or with lengths that
// differ, it is an ordinary Delta too.
func (b *Badger) pagesVouched(bl Blob, crcs []uint32) bool {
	if bl.Pages == 0 || crcs == nil || len(bl.Data) != len(bl.BaseData) || len(crcs) > 64 {
		return false
	}
	e, ok := b.locs.get(bl.Base)
	if !ok || int(e.loc.Raw) != len(bl.BaseData) || len(e.crcs) != len(crcs) {
		return false
	}
	for i, c := range crcs {
		if bl.Pages&(1<<i) == 0 && c != e.crcs[i] {
			return false
		}
	}
	return true
}

// baseLoc looks up the index entry of a delta's base for asDelta (which
// needs its depth), from the remembered locations first: the base of a
// live tree's read-modify-write was just read, so its location is
// usually remembered, and that saves the committer a Badger lookup per
// chunk (fio's random 4 KiB writes: one per write). A remembered entry
// is as good as the index here: a sweep's Delete forgets the hashes it
// deletes before it releases the guard's lock, which asDelta has just
// taken to note the base, so an object it finds remembered is either
// spared by the running sweep or was not condemned; a location stale by
// a compactor's move has the same depth as the copy (the copy is the
// delta as it was). (From the unmerged branch randcpu, 16c1957.)
func (b *Badger) baseLoc(h Hash) (loc Loc, found, inLog bool, err error) {
	if b.log != nil {
		if l, ok := b.locs.link(h); ok {
			return l, true, true, nil
		}
	}
	_, loc, found, inLog, err = b.lookup(h, false)
	return loc, found, inLog, err
}

// undelta returns the object a delta entry stores: it walks the chain of
// bases down to a cached or whole object and applies the deltas upward,
// between two buffers. Only the result is checked against its hash (by
// Get, or against the page CRCs remembered for it): a damaged link makes
// it mismatch. A missing base is damage of this object.
//
// A link's location comes from the remembered locations (loccache.go)
// when they have it, else from the index, in one transaction for the
// rest of the chain: a random writer's chunk is a chain of versions this
// store wrote itself and remembered (Commit), so its read needs no index
// lookup at all. A remembered location is only ever stale by a move or a
// delete, after which the old bytes still read until their segment is
// retired, and then not at all: a read error there walks the chain again
// from the index alone.
//
// The chain's whole bottom, when stored uncompressed, is read into into
// if it fits (nil: a buffer of the read's own); the result then aliases
// it when every link edits in place (a file chunk's chain: GetOnceInto).
func (b *Badger) undelta(loc Loc, into []byte) ([]byte, error) {
	out, err := b.undeltaVia(loc, true, into)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		out, err = b.undeltaVia(loc, false, into)
	}
	return out, err
}

// undeltaVia is undelta, taking the links' locations from the remembered
// ones first when remembered is set.
func (b *Badger) undeltaVia(loc Loc, remembered bool, into []byte) ([]byte, error) {
	chain := []Loc{loc}
	var base []byte
	owned := true // base is a buffer of this read's own, not the cache's
	var txn *badger.Txn
	defer func() {
		if txn != nil {
			txn.Discard()
		}
	}()
	for cur := loc; ; {
		if data, ok := b.cache.get(cur.Base); ok {
			base, owned = data, false
			break
		}
		var bl Loc
		if l, ok := b.locs.link(cur.Base); remembered && ok {
			bl = l
		} else {
			if txn == nil {
				txn = b.db.NewTransaction(false)
			}
			data, l, found, inLog, err := b.lookupTxn(txn, cur.Base, true)
			if err != nil {
				return nil, err
			}
			if !found {
				return nil, fmt.Errorf("delta base %s missing: %w", cur.Base, ErrCorrupt)
			}
			if !inLog {
				base = data // format 1, inline
				break
			}
			bl = l
		}
		if bl.Comp != compDelta {
			var err error
			if base, err = b.readWhole(cur.Base, bl, into); err != nil {
				return nil, err
			}
			break
		}
		if len(chain) > maxDepth {
			return nil, fmt.Errorf("delta chain longer than %d: %w", maxDepth, ErrCorrupt)
		}
		chain = append(chain, bl)
		cur = bl
	}
	// A link that edits in place (a file chunk a write patched) is
	// applied to the buffer below it, which this read owns (readWhole
	// returns a buffer of its own; a cached base is copied first); the
	// others are applied into a spare buffer (the one below the last),
	// and the result's is always of its own.
	var spare []byte
	scratch := linkBufs.Get().(*[]byte)
	defer func() {
		if cap(*scratch) <= maxLinkBuf {
			linkBufs.Put(scratch)
		}
	}()
	for i := len(chain) - 1; i >= 0; i-- {
		l := chain[i]
		if cap(*scratch) < int(l.Stored) {
			*scratch = make([]byte, l.Stored)
		}
		d := (*scratch)[:l.Stored]
		if err := b.log.readAtInto(l.Seg, l.Off, d); err != nil {
			return nil, err
		}
		if _, ok := inPlaceOps(len(base), d); ok && int(l.Raw) == len(base) {
			if !owned {
				base, owned = bytes.Clone(base), true
			}
			undeltaInPlace(base, d)
			continue
		}
		var dst []byte
		if i > 0 {
			dst = spare[:0]
		}
		out, err := undeltaInto(dst, base, d, int(l.Raw))
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, ErrCorrupt)
		}
		if owned {
			spare = base
		}
		base, owned = out, true
	}
	return base, nil
}

// linkBufs holds the buffers undeltaVia reads a chain's links into: a
// link's bytes are only read while it is applied (undeltaInto and
// undeltaInPlace copy what they keep), so one buffer serves a whole chain
// and then the next read, instead of an allocation per link (a random
// 4 KiB writer's read-modify-write walks a chain of up to MaxDataChain
// links per write). A buffer grown for a big link (a directory's delta)
// is not kept past maxLinkBuf.
var linkBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxLinkBuf bounds the buffers linkBufs keeps.
const maxLinkBuf = 256 << 10

// checkDelta verifies that d, a delta stored at loc, makes the object h.
func (b *Badger) checkDelta(h Hash, loc Loc, d []byte) error {
	base, err := b.Get(loc.Base)
	if err != nil {
		return fmt.Errorf("%s: delta base: %w", h, err)
	}
	out, err := Undelta(base, d, int(loc.Raw))
	if err != nil || Sum(out) != h {
		return fmt.Errorf("%s: %w", h, ErrCorrupt)
	}
	return nil
}

// cacheWritten caches what a commit wrote with a Base and big enough for
// a delta: the object is most likely the base of the next version, which
// a later commit then finds without walking its chain. The data is copied
// (a PutBatch caller may reuse it). A blob that came with its BaseData is
// not: its writer (the live tree, for file chunks) hands the next
// version's base in too, and copying every chunk a random writer
// rewrites into the cache would cost the committer a 64 KiB copy each and
// push the inode objects out.
func (b *Badger) cacheWritten(blobs []Blob, written map[Hash]bool, epoch uint64) {
	for _, bl := range blobs {
		if !bl.Base.IsZero() && bl.BaseData == nil && !bl.Chunk && written[bl.Hash] && len(bl.Data) >= minDeltaObject && len(bl.Data) <= maxDeltaObject {
			b.cache.add(bl.Hash, bytes.Clone(bl.Data), epoch)
		}
	}
}

// rememberWritten remembers the location and page CRCs of each delta a
// commit wrote for a blob that came with its BaseData (loccache.go; Commit
// computes the CRCs before it takes the writer's lock), as
// a read that verified it would: the writer (the live tree's Flush) has
// just computed Hash from exactly these bytes, so they are as verified as
// a read's. The next read-modify-write of the chunk, which a random
// writer makes long after the cache has dropped it, then walks its chain
// without index lookups and checks the result against the CRCs instead
// of hashing it again (Get); damage in any link still makes it mismatch,
// and the read falls back to the index and the full hash (ErrCorrupt).
// Whole objects are not remembered: their remembered location would let
// ReadRange and splice serve bytes never read back from disk.
func (b *Badger) rememberWritten(crcs map[Hash][]uint32, entries []blobEntry, epoch uint64) {
	if len(crcs) == 0 {
		return
	}
	for _, e := range entries {
		if c, ok := crcs[e.h]; ok && e.loc.Comp == compDelta && len(c) == (int(e.loc.Raw)+pageSize-1)/pageSize {
			b.locs.add(e.h, locEntry{loc: e.loc, crcs: c}, epoch)
			// The base is now a link of this chain (see locCache).
			b.locs.demote(e.loc.Base, epoch)
		}
	}
}

// deltaLocs lists the index entry of every delta (in the index and the
// read-only tail): what the sweep's closure and order follow.
func (b *Badger) deltaLocs() (map[Hash]Loc, error) {
	out := map[Hash]Loc{}
	if b.log == nil {
		return out, nil
	}
	live, err := b.liveBySegment()
	if err != nil {
		return nil, err
	}
	for _, ents := range live {
		for _, e := range ents {
			if e.loc.Comp == compDelta {
				out[e.h] = e.loc
			}
		}
	}
	for h, l := range b.tail {
		if l.Comp == compDelta {
			out[h] = l
		}
	}
	return out, nil
}
