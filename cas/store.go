package cas

import (
	"errors"
	"fmt"
)

// ChunkSize is the fixed size of a file data chunk. Fixed-size chunks keep an
// in-place edit of a large file to the chunks it touched.
const ChunkSize = 64 << 10

var (
	// ErrNotFound: no object has that hash.
	ErrNotFound = errors.New("object not found")
	// ErrCorrupt: the stored bytes do not hash to their name.
	ErrCorrupt = errors.New("object corrupt: hash mismatch")
)

// Blob is an object and its name.
type Blob struct {
	Hash Hash
	Data []byte
	// Base, when not Zero, names an object Data is likely to share most of
	// its bytes with: the previous version of the same inode. A store may
	// then keep Data as a delta against it (logstore.go); a store that
	// cannot, or a Base it does not hold, stores Data whole. It never
	// changes what Get returns.
	Base Hash
	// BaseData, when set, holds the bytes of Base, which the caller has
	// in hand (the live tree's read-modify-write of a chunk read them,
	// verified, from this store): the store then builds the delta without
	// reading the base itself, and does not cache Data as the next
	// version's base (the caller keeps that). It must be exactly the
	// object Base names, as a PutFresh caller's Hash must be Sum(Data):
	// a wrong one makes a delta that Get reports as ErrCorrupt.
	BaseData []byte
	// Pages, with BaseData as long as Data, names the 4 KiB pages of Data
	// the writer changed since it read BaseData (bit i: bytes
	// [i*4096, (i+1)*4096)); zero when it does not know. The store then
	// compares only those against the base (DeltaPages), after checking
	// the others' CRC-32C against the base's remembered ones: a page the
	// writer missed makes it compare them all (Delta), as without Pages.
	Pages uint64
	// Chunk: Data is file data whose Base the caller has not read (the
	// live tree names the chunk a truncation cut from the same slot). A
	// delta of it is bounded by MaxDataChain, like one that came with its
	// BaseData, and it is not cached as the next version's base.
	Chunk bool
	// Raw: the writer found Data incompressible (Incompressible), so a
	// store keeps it as it is without judging it again. The live tree
	// judges its chunks on several CPUs while it hashes them, which takes
	// the check off the journal's single committer.
	Raw bool
}

// Store holds objects by hash. It is the seam for a second backend (object
// storage): fs/ and rewind/ only see this interface.
type Store interface {
	// Get returns the object's bytes after checking they hash to h
	// (ErrCorrupt if not) or ErrNotFound. The caller must not modify them.
	Get(h Hash) ([]byte, error)
	// Has reports whether the object is stored.
	Has(h Hash) (bool, error)
	// Put stores data (once: a second Put of the same bytes writes nothing)
	// and returns its hash. It is committed, not synced.
	Put(data []byte) (Hash, error)
}

// OnceGetter is a Store that can read an object its caller reads once
// and replaces: the live tree's read-modify-write of a chunk, whose old
// version no read asks for again (the tree keeps it as the new chunk's
// BaseData until the flush). GetOnce is Get (checked the same way; the
// caller must not modify the bytes) that does not keep what it read in
// the store's object cache: a random writer's chunks would otherwise
// fill it with versions already replaced, pushing out what is read
// again (inode objects, hot chunks) and holding it in memory.
type OnceGetter interface {
	GetOnce(h Hash) ([]byte, error)
}

// IntoGetter is a OnceGetter that can read into a buffer of the caller's:
// GetOnceInto is GetOnce that returns, with into set, bytes that alias
// dst (a prefix of it), which the caller owns and may modify and reuse;
// without it, bytes as GetOnce returns them (possibly shared with the
// store's cache: do not modify them). A read-modify-write that reads
// chunk after chunk then needs no fresh 64 KiB buffer for each
// (fs/tree's staging keeps a pool of them).
type IntoGetter interface {
	OnceGetter
	GetOnceInto(h Hash, dst []byte) (data []byte, into bool, err error)
}

// BatchPutter is a Store that writes many objects for less than one Put
// each (one commit for the batch instead of one per object). Import, which
// stores thousands of small files, uses it when the store has it.
type BatchPutter interface {
	// PutBatch stores every blob not already stored, committed, not
	// synced, like Put. Each blob's Hash must be Sum(Data): a wrong pair
	// is refused (ErrCorrupt) and nothing of the batch is stored. The
	// blobs' Data may be reused once PutBatch returns.
	PutBatch(blobs []Blob) error
}

// FreshPutter is a BatchPutter that can skip the work a first import does
// not need. A first import into an empty store hashes every chunk itself,
// just before storing it, and finds none of them stored: checking each
// pair again (Sum) and looking each hash up in the index (a miss that
// walks the memtables and every level's filters) were a third of its CPU
// at 100k small files.
type FreshPutter interface {
	BatchPutter
	// PutFresh stores the blobs, committed, not synced, like PutBatch,
	// without re-hashing them or looking them up: the caller has just
	// computed each Hash from its Data and knows that none is stored
	// (repeats within the batch are still written once). A blob that is
	// stored after all is written again: the index then names the new
	// copy and the old one is garbage the compactor drops, which costs
	// space, never data. A wrong pair is not refused here; Get reports it
	// as ErrCorrupt.
	PutFresh(blobs []Blob) error
}

// checkBlobs refuses a batch with a blob whose Hash is not Sum(Data).
func checkBlobs(blobs []Blob) error {
	for _, b := range blobs {
		if Sum(b.Data) != b.Hash {
			return fmt.Errorf("put batch: blob named %s: %w", b.Hash, ErrCorrupt)
		}
	}
	return nil
}
