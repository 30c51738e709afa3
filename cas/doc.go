// Package cas stores content-addressed objects: every object is named by the
// hash of its bytes (Sum), stored once, and checked against its name whenever
// it is read back.
//
// # Object kinds
//
// There are two kinds, and the bytes do not say which one an object is; the
// reference that leads to it does:
//
//   - A chunk is raw file data: the bytes of one ChunkSize (64 KiB) slice of a
//     regular file at a fixed offset, the last one shorter. Fixed offsets keep
//     an in-place edit of a large file to the chunks it touched.
//   - An inode object is an encoded Inode (EncodeInode; first byte 0xA1, the
//     format version). It holds what stat(2) reports (mode, owner, rdev, size,
//     times), the xattrs, and by type: the chunk list of a regular file (Zero
//     for a hole), the target of a symlink, or the sorted entries of a
//     directory. The encoding is canonical (DecodeInode accepts exactly what
//     EncodeInode writes from a valid Inode), so one inode has one name.
//
// # The Merkle tree
//
// A directory entry carries the hash of its child's inode object, so the
// hash of the root directory's object names the whole tree: a generation is
// one root hash. A change rewrites the changed inode's object and those of
// its ancestors, nothing else; every unchanged subtree and chunk is shared
// between generations and branches. Walk enumerates what a set of roots
// reaches (for GC marking); Verify re-reads all of it (for fsck).
//
// An entry also carries the child's inode number, and an inode object its own.
// Inode numbers are part of the state, not derived from it: a rewind or a
// checkout brings back the same numbers, so kernel caches, open handles and
// tools that remember st_ino (git's index, rsync, find -inum) see the same
// files. A hard link is two entries with the same Ino (and so the same
// object); the link count is not stored but counted, so it cannot disagree
// with the entries. The Ino in the entry lets readdir answer d_ino without
// loading the child.
//
// # The hash
//
// Sum is BLAKE3-256 (github.com/zeebo/blake3, assembly for AVX2/AVX-512),
// chosen by measurement on the development machine (2 vCPUs, AMD Turin-like,
// SHA-NI and AVX-512):
//
//	go test -run='^$' -bench=BenchmarkSum -benchtime=2s -count=3 ./cas
//
//	                        4 KiB        64 KiB
//	crypto/sha256 (SHA-NI)  1530 MB/s    1510-1560 MB/s
//	zeebo/blake3            1260-1320    2870-3110 MB/s
//	lukechampine/blake3     150-175      1000-1110 MB/s  (scratch module)
//
// File data, the bulk of what is hashed, comes in 64 KiB chunks, where
// BLAKE3 is twice as fast as SHA-256 (about 21 µs against 42 µs per chunk).
// On 4 KiB SHA-256 is some 15% faster, but that is 3 µs either way, a
// fraction of one FUSE round trip (40-65 µs). lukechampine.com/blake3 v1.4.1
// starts goroutines per call and allocates, which is slow below a few hundred
// KiB. Changing Sum renames every object; TestSumKnownAnswers pins it.
//
// # Badger layout
//
// Objects share the workspace's Badger database with the journal (see
// journal/doc.go for the other prefixes):
//
//	key                          value
//	'o' (KeyPrefix) + 32-byte h  the object's bytes; Sum(value) == h
//
// The journal opens Badger with a small ValueThreshold, so chunks live in the
// value log and the LSM tree stays small. Put writes an object only if its key
// is absent; AddToBatch does the same inside the journal's WriteBatch, so that
// a record and the blobs it references become durable together. Stats and Each
// list objects by a key-only iteration; Delete is for the garbage collector.
//
// # Verification on read
//
// Get re-hashes every object it reads from the backend and returns an error
// wrapping ErrCorrupt (naming the full hash) instead of bytes that do not
// match, so damage in the value log never reaches a file. Verified objects are
// kept in a byte-bounded LRU cache (DefaultCacheBytes), so a hot object costs
// one hash, not one per read; Has answers from that cache before asking
// Badger. Deleting evicts, and a read racing a delete cannot re-cache the
// deleted object.
//
// # A second backend
//
// fs/ and rewind/ see only the Store interface (Get, Has, Put). Objects are
// immutable and named by content, which is what object storage (S3 and
// compatible) is good at: a second backend maps Key(h) to an object name and
// needs no coordination beyond "upload the blobs before appending the record
// that references them", which replaces AddToBatch's single batch. The
// conformance suite in cas/castest is what such a backend must pass; the
// Badger and Memory stores run it too.
package cas
