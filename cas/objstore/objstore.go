// Package objstore is the object-storage seam of a reynfs remote: a flat
// namespace of keys under one prefix, with the few operations a replica
// needs (rewind/replica has the layout and the ordering it keeps).
//
// Open takes the remote's URL. Two backends implement the interface:
//
//   - file:///abs/dir (dir.go): a directory, maybe shared with other
//     users. Opened beneath a root fd, never through a symlink; writes are
//     a synced O_EXCL temp file committed under an flock (rename, link(2)
//     for PutIfAbsent, re-hash and rename for PutIfMatch), the directory
//     fsynced before the write returns. ETag: hex BLAKE3 of the content.
//     A key cannot also be the "directory" of others (a and a/b).
//   - s3://host[:port]/bucket[/prefix] and s3+http:// (s3.go): minio-go,
//     conditional PUTs with If-None-Match: * and If-Match, the server's
//     clock from its Date header. Credentials come from the AWS variables
//     or profile, never from the URL.
//
// SelfTest is what `reynfs remote add` runs: a server that ignores a
// conditional write cannot hold a lease and is refused (ErrUnsupported).
// objstoretest is the conformance suite every backend passes (and
// StartS3, the S3 server the tests use); objstorefake is an
// in-memory backend with a fault injector for other packages' tests.
//
// Every method is safe for concurrent use. Errors wrap ErrNotExist,
// ErrPrecondition, ErrUnsupported or ErrInvalidKey where those apply;
// anything else is the backend's failure (network, permission, disk),
// named with the key. A conditional write whose reply was lost may be
// retried by the client library and then report ErrPrecondition although
// it was applied: after a lost race, re-read the object and compare.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

var (
	// ErrNotExist: no object has that key.
	ErrNotExist = errors.New("object does not exist")
	// ErrPrecondition: a conditional write lost (PutIfAbsent found the
	// key, PutIfMatch found another ETag or none).
	ErrPrecondition = errors.New("precondition failed")
	// ErrUnsupported: the server ignored or refused a conditional write
	// (SelfTest): a remote that cannot compare-and-swap cannot hold a
	// lease.
	ErrUnsupported = errors.New("server does not support conditional writes")
	// ErrInvalidKey: a key that Valid refuses; no request is made.
	ErrInvalidKey = errors.New("invalid object key")
)

// Info describes a stored object.
type Info struct {
	Key  string // relative to the backend's prefix
	Size int64
	ETag string // opaque; compare only for equality
	Mod  time.Time
}

// Backend is one prefix of an object store. Keys are slash-separated,
// relative to the prefix, made of [A-Za-z0-9._/-] only (Valid).
type Backend interface {
	// Get returns the object's bytes and its ETag.
	Get(ctx context.Context, key string) ([]byte, Info, error)
	// GetRange returns n bytes from off (fewer at the object's end).
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Stat returns what Get would, without the bytes.
	Stat(ctx context.Context, key string) (Info, error)
	// Put writes data under key unconditionally (immutable, content-named
	// objects: a second writer writes the same bytes).
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent writes data only if key does not exist (If-None-Match:
	// *), else ErrPrecondition. It returns the new ETag.
	PutIfAbsent(ctx context.Context, key string, data []byte) (Info, error)
	// PutIfMatch replaces key only if its ETag is etag (If-Match), else
	// ErrPrecondition (also when key does not exist). It returns the new
	// ETag.
	PutIfMatch(ctx context.Context, key string, data []byte, etag string) (Info, error)
	// List calls fn for every key under prefix (a string prefix, not
	// necessarily a directory), in byte order of the keys. An error from
	// fn stops the listing and is returned. Info.ETag may be empty in a
	// listing (file:// would have to hash every object); Stat has it.
	List(ctx context.Context, prefix string, fn func(Info) error) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Now is the server's clock (S3: the Date header of a request; a
	// directory: this machine's). Leases are timed by it, never by the
	// client's clock.
	Now(ctx context.Context) (time.Time, error)
	// String is the URL without credentials, for messages.
	String() string
}

// Valid reports whether key may name an object: non-empty, relative,
// no empty, "." or ".." element, and only [A-Za-z0-9._-] and '/'.
func Valid(key string) bool {
	if key == "" || key[0] == '/' || key[len(key)-1] == '/' {
		return false
	}
	elem := 0
	for i := 0; i <= len(key); i++ {
		if i == len(key) || key[i] == '/' {
			switch key[i-elem : i] {
			case "", ".", "..":
				return false
			}
			elem = 0
			continue
		}
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
		elem++
	}
	return true
}

// ValidPrefix reports whether p may be given to List: empty, or a
// valid key, or a valid key followed by '/'.
func ValidPrefix(p string) bool {
	return p == "" || Valid(p) || p[len(p)-1] == '/' && Valid(p[:len(p)-1])
}

// CheckKey returns nil for a valid key, else the one-line error (wrapping
// ErrInvalidKey) every backend returns for it.
func CheckKey(key string) error {
	if !Valid(key) {
		return fmt.Errorf("%w %q (want [A-Za-z0-9._-] elements joined by '/')", ErrInvalidKey, key)
	}
	return nil
}

// CheckPrefix is CheckKey for List's prefix.
func CheckPrefix(p string) error {
	if !ValidPrefix(p) {
		return fmt.Errorf("%w: list prefix %q", ErrInvalidKey, p)
	}
	return nil
}
