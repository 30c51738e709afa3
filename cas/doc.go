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
// Summer is Sum over bytes that arrive in pieces: BLAKE3's state after a
// prefix is the chaining values of its finished 1 KiB chunks and the bytes
// of the unfinished one, so the live tree keeps that state for a file's
// last, partial chunk after each flush and hashes only what the next
// flush appended (an fsync'd 4 KiB append: 4 KiB hashed instead of up to
// 64 KiB), after checking that the chunk still starts with the bytes it
// summed (fs/tree, grownSum; TestSummerMatchesSum pins Summer to Sum).
//
// ChunkSums.SumChunk is Sum of a whole chunk rewritten in place (a random
// writer's read-modify-write): BLAKE3's chaining value of each 8 KiB
// subtree of a 64 KiB chunk depends on those bytes and their place only,
// so SumChunk remembers the 8 for the version it hashes (under the hash
// they produce, bounded, some 300 bytes a chunk) and hashes the next
// version's units that differ from it, byte for byte, taking the others'
// from there: a 4 KiB write's new hash costs 8 KiB and 14 parent nodes,
// not 64 KiB (go test -bench BenchmarkSumChunk ./cas: 16-19 us against
// Sum's 37-68 us on a loaded machine). zeebo/blake3's tree functions
// (HashF, HashP, Compress) are internal to it and reached by
// go:linkname; TestSumChunkMatchesSum pins SumChunk to Sum, so a module
// upgrade that changes them fails it, and NewChunkSums checks the same
// once at run time (a whole chunk, and one page changed from it), giving
// nil, whose SumChunk is Sum, if SumChunk disagrees.
//
// # Segment log and index (store formats 2 and 3)
//
// Objects live in the workspace's segment log, a directory beside the
// Badger directory (journal.LogPath: dir + ".log"), and Badger is their
// index (see journal/doc.go for the other prefixes):
//
//	key                          value
//	'l' (LogPrefix) + 32-byte h  Loc: compression, segment, offset, stored
//	                             length, raw length; for a delta also its base
//	                             (32 B) and the chain's depth; for an object in
//	                             a pack its offset in the pack and the pack's
//	                             raw length. Uvarints after a tag byte since
//	                             format 6 (loc.go); fixed-width before
//	'o' (KeyPrefix) + 32-byte h  the object's bytes (format 1, read in place)
//	"m/logpos"                   segment + end offset the index covers
//
// A segment (%016x.seg, opened relative to the directory fd with O_NOFOLLOW)
// is a 64-byte header (magic "reynfsSG", format 2, segment number, store
// id, CRC-32C) and then frames. A frame is what one commit writes: a
// 48-byte header (magic "RFM3", payload length, first and last seq,
// CRC-32C of the payload, the synced-through mark: segment and offset,
// CRC-32C of the header; store format 5 and older wrote 32-byte "RFM2"
// headers without the mark, still read) and a payload of entries: blobs
// ('b', hash, compression, raw length, stored length, bytes; or 'D',
// hash, base, depth, raw length, stored length, delta), then key writes
// ('s' key value, 'd' key) in the order of the commit. Blobs are
// zstd-compressed (klauspost/compress, SpeedFastest, one shared encoder)
// when that saves at least an eighth, else stored raw; a chunk whose
// first 4 KiB look random (entropy.go: an LZ parse and the entropy of the
// rest estimate a saving under a tenth) is stored raw without a zstd
// attempt, and a big one is judged by zstd on that sample (the live tree
// judges a write's later whole chunks on 1 KiB once its first one looked
// random: IncompressibleQuick, passed on as Blob.Raw). The writer
// appends with pwritev (the blobs' bytes from their own buffers, never
// copied into the frame), never through a mapping, so a full disk is ENOSPC;
// a failed or short write is cut back to the frame's start. It rolls to a
// new segment (created O_EXCL, header fdatasynced, directory fsynced)
// when a frame would take the active one past SegmentSize (128 MiB).
//
// The log's end is not the active segment's size: the segment is
// pre-written (prefill.go). A background step keeps it written with real
// zeros (pwrite, not fallocate, whose unwritten extents need a metadata
// change when first written) and fdatasynced, 16 MiB past the end in
// 8 MiB steps (a round writes only a whole step, never the few KiB the
// last frames took: that would grow the file at every fsync), in a round
// after each sync a caller waited for (an fsync, a generation cut; the
// index checkpoint's syncs do not start one, so a bulk writer that never
// syncs appends instead of writing its log twice; a sync wakes the
// prefill goroutine only when a whole step is missing, not at every
// fsync), so a
// commit's frame overwrites blocks that exist within a
// size that is already durable, and its fdatasync flushes data only: one
// device flush, where an append also commits the file system's journal
// for the new size (RocksDB's recycled logs, PostgreSQL's zero-filled WAL
// segments and SQLite's pre-sized WAL do the same). A frame past the
// pre-written space (the prefill behind, or refused for lack of room:
// the journal lets it take disk only while free space stays well above
// its reserve) appends as before. Zeros are written only at or past the
// file's size and a frame past the pre-written space is written under
// the same lock, so zeros never cover a frame. A roll and a close truncate
// the unused prefill (not synced), so a sealed segment or a closed store
// holds no zero tail, and a mounted store is at most the prefill larger
// on disk. The scan therefore takes zeros after the last frame, to the
// end of a segment, for its clean end (a crash may leave them in the
// last segment or, its truncation lost, the one before); a torn frame
// followed by zeros is still a torn tail (cut). Everything that needs the
// log's end takes it from the scan (catch-up, resume, salvage, fsck) or
// from the writer (compaction of the active segment), never from the
// file's size, and a read past the active segment's end is refused.
//
// Commit (the journal's committer, and Put and PutBatch outside it, all
// under the one writer lock) appends the frame, then writes the index
// (each new blob's Loc, the frame's key writes, "m/logpos") as one
// unsynced Badger write batch. Blobs already stored or repeated in the
// frame are not written again. SyncLog is one fdatasync of the segments
// written since the last one, and may run while a commit writes its index
// (Frame.Appended tells the journal the frame is written); Badger is synced
// by the journal's background checkpoint. Commit is Append (the frame)
// and then Unindexed.Index (the index): the writer lock is held from the
// one to the other, so index writes, "m/logpos" among them, follow the log
// in order, and Index may run on another goroutine (the journal's
// committer indexes a frame a Sync appended while that Sync runs the
// fdatasync). CatchUp, on open, scans the
// log from "m/logpos" and re-applies every complete frame (idempotent),
// cuts a torn tail, and reports damage (ErrDamaged): see journal/doc.go,
// "Damage".
//
// # Power cuts and the synced-through mark (store format 6)
//
// A power cut keeps what the last completed fdatasync covered; of the
// blocks written after it, any may have reached the disk and in any
// order, so a frame no sync covered can be zeros (its pre-written space)
// or torn while a later frame, also unsynced, is whole. Nothing
// acknowledged is lost then, and calling it damage would refuse a
// healthy store. So each frame's header carries a mark, set under the
// writer's lock as the frame goes into the log: the log position the last
// completed sync made durable (every sync takes the end of the frames
// written into the segments it flushes; a reopen fdatasyncs the active
// segment and starts from its end). At a bad frame (bad header or
// checksum, incomplete, or zeros where a frame should be) the scan looks
// for intact frames after it by their magic (its length cannot be
// trusted), in its segment and in the later ones, since a roll does not
// sync the old segment: if one's mark lies past the bad frame, a sync had
// covered it, and that is damage, refused as before; if every one's mark
// is at or before it, nothing from there on was ever synced: a torn tail,
// cut there with every later segment (the last first, so that a crash
// during the cut leaves the same tail). The index, which may lag, is
// caught up to the cut. It may also be ahead of it: Badger's memtable
// WAL is a mapped file written without a sync, and the kernel may write
// its pages back before the log's unsynced frames reach the disk, so
// after the cut Badger replays the index writes ("m/logpos", 'l' entries,
// the frames' key writes) of frames the scan cuts. The marks prove no
// sync covered those frames, so no fsync or checkpoint acknowledged
// them, and the open catches the index down to the cut (catchdown.go)
// instead of refusing the store: an 'l' entry pointing at the cut or past
// it goes back to its older version (a compaction's switch: the old
// location) or is deleted, and every key a frame's ops write (records,
// resets, "m/seq", meta keys: LogOptions.FrameKeys) that Badger wrote
// after the last "m/logpos" at or before the cut goes back to its value
// then; Badger keeps that older version while the newer one is only in
// its memtable, which every write since the last flush is. Where the
// index's "m/logpos" lies past the cut (the usual case: it is in the same
// batch), the scan would start past it, so the open first walks the log
// up to "m/logpos" from one claimed position before the newest mark it
// finds at the claimed positions (Badger's older versions of "m/logpos"
// are frame boundaries, a mark a synced position) and judges a bad frame
// on the way by the same rule: a mark past it is damage, refused (a sync
// covered it), else it is the cut. The reverts and the index's new
// position are written and Badger synced before the log is cut, so a
// crash during the catch-down finds the same torn tail again
// (TestIndexAheadKillDuringCatchDown). Finding the reverts reads every
// version of every index key once, only when the scan cuts a torn tail
// or the walk finds one (some 0.4 s of CPU for a 52,000-record store
// with 2,000 commits to undo). Keys written into Badger outside
// frames (rewind's generation and restore indexes, branch names, the
// collector's deletions, the journal's floor) are written only after a
// log sync covered what they name, so they are never ahead. A sealed segment's
// zero tail (its truncation at the roll lost, so no sync followed the
// roll) is cut the same way when the later frames' marks stop before it,
// damage when one in that segment lies past it, and its clean end
// otherwise. A frame without a mark (format 5) proves nothing, so before
// one the old rule holds: a bad frame is damage. What the rule cannot
// see: a synced last frame damaged with no later frame (cut as a torn
// tail, as before; the journal's manifest catches lost synced records),
// damage the index's position already covers before the walk's start
// (fsck re-hashes), a catch-down whose older versions a Badger compaction
// already dropped (the newer ones flushed to a table and compacted before
// the cut: the entry is then deleted, or a key keeps the newer value),
// and, in a store whose index never held "m/logpos" (no frame indexed
// yet), only 'l' entries are caught down.
//
// Get answers from the cache, else from a remembered location (see
// "Verification on read"), else looks up 'o' (inline bytes win, so a
// format-1 object, or one a test corrupts in place, is read from Badger)
// and then 'l', preads the stored bytes from a kept-open segment file,
// decompresses, verifies the hash once and caches the result. Each and
// Stats list both prefixes (sizes as stored on disk), in hash order.
// Delete drops the index entries; the segment bytes stay until a
// compactor rewrites the segment.
//
// # Deltas (store format 3)
//
// A directory object is three quarters 32-byte child hashes, which no
// compressor shrinks, and a checkpoint rewrites every directory on the
// paths it changed: before deltas those rewrites were two thirds of what a
// generation cost (docs/storage.md). So a Blob may name a Base, the
// previous version of the same inode (fs/tree's Root sets it), and Commit
// stores it as a Delta (delta.go: copy and insert ops against the base,
// some 50 bytes for a 4 KB directory with one child changed) when the
// base is in the index, its chain is at most MaxChain-1 deltas deep, and
// the delta with the base's name is at most half the whole stored form.
// The frame entry ('D') and the index entry name the base and the chain's
// depth (1 for a delta on a whole object). The base is noted with the
// sweep guard before it is looked up, as a deduplication is. Commit caches
// what it wrote with a Base, the likely base of the next version.
//
// File chunks take the same path (store format 3 already reads them):
// the live tree names the chunk a read-modify-write started from as the
// new chunk's Base and hands its bytes in (Blob.BaseData), so a 4 KiB
// write into a 64 KiB chunk, or an fsync'd 4 KiB append to a partial
// one, logs a delta of some 4 KiB instead of the chunk again (16x less
// log and device writes for fio's random 4k writes; 42.6 to under 8 KiB
// per 4 KiB write + fsync, TestSmallWritesStoreDeltas). Commit tries the
// delta first and skips the compression attempt when the delta is under
// a quarter of the chunk. Such a delta is usually in-place, which Delta
// finds by an aligned compare instead of indexing the base. The tree
// also names the 4 KiB pages its writes touched since it read the base
// (Blob.Pages); when the other pages' CRC-32C (computed for the
// remembered location anyway) match those remembered for the base, the
// delta compares the touched pages only (DeltaPages), not the whole
// chunk; a page the tracking missed fails that check and the chunk gets
// an ordinary Delta. The price is
// the read of a cold chunk: it walks the chain, which for file chunks is
// bounded tighter (MaxDataChain, 8: a link costs a copy of the chunk).
//
// A file rewritten whole takes that path too: open(2) with O_TRUNC
// truncates it to 0 (its own record) before the new bytes arrive, so
// there is no read-modify-write, but the tree remembers the chunk the
// truncation cut from each slot and names it as Base of the slot's next
// chunk of at most 16 KiB (Blob.Chunk: the committer reads the base
// itself, and MaxDataChain bounds the chain). A source file an editor,
// a formatter or a generator writes again is then a delta of a few
// dozen bytes instead of the file: the store-size benchmark's 1,000
// rewritten files took 224 KB of log as whole chunks and take 77 KB as
// deltas, most of it their entries' two names (docs/storage.md).
//
// GetOnceInto (IntoGetter) is GetOnce into the caller's buffer: the whole
// bottom of the chain, or the object, uncompressed, is read into it and
// in-place links applied there, so the live tree's read-modify-write
// reads a chunk into a pooled buffer that its base note owns and hands
// back once the commit that read it as BaseData is done, instead of a
// fresh 64 KiB per write.
//
// Get walks a delta's chain down to a cached or whole object (a lookup
// and a pread per link, no hashing), applies the deltas upward and checks
// the result's hash once, as for any object (a link that edits in place,
// as a file chunk's does, is applied to the buffer below it: its inserts
// overwrite, its copies are no-ops, so a link costs its inserted bytes
// and not a copy of the chunk); a missing base or a delta
// that does not apply is ErrCorrupt for the objects above it. Catch-up
// and salvage rebuild delta index entries from the 'D' entries like any
// other; the compactor copies a delta forward as it is, after checking it
// against its base (which the sweep keeps live).
//
// Sweep keeps the closure: a condemned object on the chain of a delta it
// does not delete (or that a writer touched while it ran) stays, and it
// deletes deltas before their bases, so the index holds the whole chain of
// every object in it at every moment (guard.go). A base outlives the last
// generation that reached it while a kept delta needs it: at most a whole
// object and MaxChain-1 deltas per directory line.
//
// Format 3 is format 2 plus delta entries. A format-2 reader would refuse
// a 'D' frame entry or a longer index entry as damage and, worse, its
// collector would sweep bases it does not know are needed, so the store
// format went up: the format-2 code refuses a format-3 store (ErrFormat),
// and a writable open of this code upgrades a format-2 store by writing
// the new version (nothing else changes).
//
// # Names off the log, small objects in packs (store formats 4 and 5)
//
// From format 4 a whole blob's frame entry ('c') leaves out its 32-byte
// name: the index has it, and a replay of the log (CatchUp, salvage, a
// read-only open's tail) computes it by decompressing and hashing the
// bytes, which a checksum-valid frame holds exactly as written. A format-3
// entry ('b', with the name) still reads. This costs a replay a
// decompression and a hash per object of the tail, and saves 36 of a
// small object's ~38 bytes of entry header (0.7 MB of the benchmark's
// store, docs/storage.md).
//
// From format 5 a commit packs small objects (pack.go): two or more whole
// objects of at most 16 KiB in one frame go, in frame order, into zstd
// packs of up to 64 KiB ('P' entry), which compress a small file's chunk
// and its inode object against their neighbours (the benchmark's 11,000
// small-file chunks and 11,000 file inode objects: 3.9 to 3.0 MB). Each
// object has its own index entry pointing at the pack; a read
// decompresses the pack once (a cache holds the last 8) and checks the
// object's hash. A damaged pack fails every object in it (as a damaged
// chunk fails every file that shares it); the compactor copies a retired
// pack's live objects out one by one.
//
// # Collection: sweep and compaction
//
// The collector (rewind/collect.go) marks what retained history reaches
// and deletes the rest with Sweep, in locked batches. While it runs, the
// store notes every hash a writer writes or deduplicates (Put, Commit,
// AddToBatch) and Sweep spares those (guard.go): a commit that
// deduplicates against an object the mark did not see never loses it.
//
// Compact (compact.go) then gives the bytes back, like restic's prune: a
// segment whose live bytes (what 'l' entries still point at; the index,
// not the segment, says what is live) are under half its size is
// rewritten. The active segment qualifies once it is 8 MiB or more: it is
// sealed first (a new active segment is started). For each such segment,
// the live blobs are read, checked against their hash, and appended to
// the active segment as blob-only frames through Commit's writer lock,
// the 'l' entries still pointing at the old location switched to the
// copies and "m/logpos" moved past the frame in the same index write
// (under the guard's lock, so no sweep batch interleaves). Then the log
// and the index are synced (a checkpoint), "m/logpos" made to lie past
// the segment (a marker frame if no copy moved it), and the segment is
// unlinked and the log directory synced; its open file is closed a moment
// later, for a reader that looked up an old location just before the
// switch. A crash before the unlink leaves every object readable at its
// old or its new location, in the index once; a missing segment before
// "m/logpos" is normal after a compaction, one at or after it is damage.
//
// # Verification on read
//
// Get re-hashes every object it reads from disk and returns an error
// wrapping ErrCorrupt (naming the full hash) instead of bytes that do not
// match, so damage in a segment never reaches a file. Verified objects are
// kept in a byte-bounded LRU cache (DefaultCacheBytes), so a hot object
// costs one hash, not one per read; Has answers from that cache before
// asking Badger. Deleting evicts, and a read racing a delete cannot
// re-cache the deleted object.
//
// A file bigger than the cache would still pay a lookup and a hash per
// chunk on every read, so the store also remembers, for up to 32k objects
// read and verified from the log, their location and the CRC-32C of each
// 4 KiB page of their bytes as verified (readcache.go, loccache.go). A
// later read of such an object needs no index lookup and checks the CRCs
// of the pages it reads instead of the hash: damage after the first read
// is still caught (a mismatch falls back to a fresh lookup and the full
// hash check, hence ErrCorrupt), at CRC speed. ReadRange (RangeReader)
// reads just the pages a FUSE read wants of an uncompressed chunk into
// the reply buffer, without caching them: the kernel's page cache keeps
// what the file system reads; the daemon's cache is for what it reads
// again itself (inodes, the chunks a small write rewrites, partial and
// compressed reads). Delete and the compactor's switch forget the
// locations they change, fenced by an epoch like the cache; a stale one
// only fails over to a fresh lookup, since a segment stays readable until
// it is retired and segment numbers are never reused.
//
// A commit remembers the same for each delta it writes of a blob that
// came with its BaseData (the live tree's read-modify-write of a chunk,
// whose Flush has just hashed exactly those bytes), and a delta chain's
// read takes its links' locations from there before the index: a random
// writer's next write into that chunk, long after the cache dropped it,
// walks the chain without index lookups and checks CRCs instead of
// hashing 64 KiB (fio random 4 KiB writes: some 50 us less daemon CPU per
// write). Damage in any link still fails the CRCs and then the full
// check. Whole objects a commit writes are not remembered, so ReadRange
// and splice serve only bytes once read back and verified.
//
// The committer takes a delta's base depth from the remembered location
// too (baseLoc: the live tree has just read that base), not from the
// index. And when a file chunk's new version is stored whole, cutting
// the chain it would have extended (MaxDataChain, or a delta not worth
// it), the commit drops that chain's remembered locations (dropChain):
// the live tree reads them no more, and in a long random-write run they
// would otherwise fill the bounded map and push out live chains' links,
// each miss an index lookup and a 64 KiB hash. A base that a newly
// remembered delta extends is demoted to a link: a compact location
// without CRCs in a second map (twice as many entries, about a third of
// the memory each), which is all a chain's walk needs of it; the CRCs
// are only ever checked for the version read.
//
// # A second backend
//
// fs/ and rewind/ see only the Store interface (Get, Has, Put). Objects are
// immutable and named by content, which is what object storage (S3 and
// compatible) is good at: a second backend maps Key(h) to an object name and
// needs no coordination beyond "upload the blobs before appending the record
// that references them", which replaces the frame's blobs-first order. The
// conformance suite in cas/castest is what such a backend must pass; the
// Badger and Memory stores run it too.
package cas
