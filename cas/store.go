package cas

import "errors"

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
