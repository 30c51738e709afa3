// Package journal is the write-ahead journal of a reynfs workspace: typed
// records with one global seq, their binary encoding, appends with group
// commit, reads from a seq, and the active path that reset records define.
//
// # Store
//
// A store is three siblings: the Badger directory dir, the segment log
// dir + ".log" (LogPath) and the manifest dir + ".manifest"
// (ManifestPath). The log is the journal: every commit appends one frame
// holding the blobs it introduces and every key write it makes (cas/doc.go
// has the frame format). Badger is the index of the log and of everything
// else, and may lag it: Open brings it up to date from the log's tail.
// Open hands the same *badger.DB to cas (Objects, over the log) and to
// packages that keep their own keys (DB). The key layout, by first byte:
//
//	key                     value                              owner
//	----------------------  ---------------------------------  -------------
//	'j' + seq (8 B, BE)     encoded Record                     journal
//	'r' + seq (8 B, BE)     encoded OpReset Record (index)     journal
//	"m/format"              store format version, decimal "6"  journal
//	"m/seq"                 highest seq committed (8 B, BE)    journal
//	"m/k/" + name           daemon bookkeeping (Get/SetMeta)   journal
//	"m/id"                  random store id (hex)              journal
//	"m/floor"               first retained seq (8 B, BE)       journal
//	"m/logpos"              log position the index covers      cas
//	'l' + hash (32 B)       object location in the log         cas
//	'o' + hash (32 B)       object bytes (format 1)            cas
//	'n' + name              seq + time (8 B + 8 B, BE)         rewind (branch names)
//	'p' + seq (8 B, BE)     empty (restore record index)       rewind
//	'R' + kind + ...        remotes: names, shipped seq, the   rewind/replica
//	                        objects a remote holds (replica's
//	                        doc: "What the remote holds")
//	"!badger!..."           Badger's own                       Badger
//
// Big-endian seqs make Badger's key order seq order, so Iter is one prefix
// iterator. The 'r' index is written in the same batch as its 'j' record,
// so Resets never scans the journal. "m/seq" is written with every batch
// and survives the truncation of old records: Open resumes at
// max("m/seq", last 'j' key) + 1, and a seq is never reissued. Every other
// prefix letter is free for other packages; claim it here first.
//
// Format 3 (this one) stores objects as deltas against their previous
// version (cas/doc.go, "Deltas"); format 2 has the log without deltas;
// format 1 kept objects inline under 'o' and had no log. A read-only open
// reads a format-1 or -2 store as it is; the first writable open upgrades
// it: for format 1 it makes the log and its first segment, then writes
// "m/format" 3 (a crash in between leaves the old format, upgraded again
// next time), and the old objects stay readable in place. The format-1
// and format-2 code refuse a format-3 store (ErrFormat).
//
// Open refuses a store of another format version (ErrFormat), a directory
// that is not a reynfs store or a damaged one (ErrCorrupt) and a store
// another process holds (ErrLocked, Badger's directory flock). Badger runs
// with small memory (32 MiB memtables x3, 32 MiB block cache, 16 MiB index
// cache, 128 MiB value-log files, 2 compactors) so the daemon stays under
// 300 MiB RSS, and with a 1 KiB value threshold: records and index entries
// live in the LSM tree.
//
// # Encoding
//
// A record is a version byte (1), the op, then Seq, Time, Pid and Comm,
// then each non-zero field as a tag byte and its value in increasing tag
// order: uvarints, zigzag varints for times, length-prefixed strings, raw
// 32-byte hashes. A typical unlink is under 30 bytes; a data record with one
// chunk about 80. Decode accepts exactly what Encode writes (it rejects
// unknown ops, truncation, trailing bytes, non-minimal varints, zero-valued
// fields and lengths the input cannot hold), so Encode(Decode(b)) == b;
// FuzzDecode checks that. Tags are never renumbered, only appended: Run and
// Agent (the `reynfs run` that made a record) came last, so a record
// written before them decodes with both empty.
// Enqueue checks Record.Validate: a field the op does not use is refused
// (ErrInvalid) rather than silently journalled.
//
// # Group commit
//
// Enqueue assigns the next seq under the journal's mutex, encodes the
// record and queues it with its blobs; it does not wait for I/O unless
// more than 32 MiB is queued (backpressure). One committer goroutine takes
// everything queued and writes it as one frame of the log: the blobs first
// (stored ones and duplicates within the batch are skipped, the rest
// compressed where it pays), then the records, the reset index and meta
// writes in queue order, then "m/seq" (commit.go, cas.Badger.Commit). The
// frame is checksummed whole, so after a crash it is there entirely or
// cut off: a record is never durable without the blobs ahead of it
// (invariant 1). Then the same writes, with each new blob's location and
// "m/logpos", go to Badger as one write batch, not synced. When that
// returns, every Pending of the batch is woken: concurrent writers share
// one commit. A Sync that finds records it waits for queued and the
// committer idle (no batch taken and not yet in the log) takes the batch
// and appends its frame itself, then leaves the index write to the
// committer (with the log's writer lock, cas.Unindexed) and runs the
// fdatasync meanwhile: an fsync does not wait for the committer to wake
// and then to wake it, two goroutine hand-offs (commit.go, syncFront).
// The fsync's own record is queued with EnqueueSyncing, which leaves the
// committer asleep (Enqueue wakes it, and a woken committer mostly only
// raced the Sync for the batch, a wake-up and a contended lock per
// fsync); the Sync wakes it when it cannot append the batch itself, and
// Pending.Wait and Close wake it too. A
// batch with a reset record is left to the committer, which keeps their
// count. Either way one batch is taken at a time and appended in queue
// order, and every waiter of a batch wakes only after its index, except
// Pending.WaitLogged, which returns once the batch's frame is in the log
// and, like Sync, appends the queued batch itself when the committer is
// idle (first writing the index of the previous frame if the committer
// has not taken it yet): a write that lent its request buffer to the frame (fs/tree's
// whole-chunk writes of 512 KiB or more) needs its bytes back, and its
// reply, only after the frame's pwritev, so the index is written while
// the next request arrives. cas.Put and PutBatch (import,
// rewind.StoreBlobs) append their own frames under the same writer lock. A commit or sync error
// fails the journal for good: every later Enqueue, Wait, Sync and SetMeta
// returns an error wrapping ErrFailed, which the file system answers with
// EIO.
//
// # Full disks
//
// Badger writes its value log and WAL through mappings of sparse files, so
// a store into a page without a block on a full disk is SIGBUS. The
// committer fallocates what each batch can reach in them before Badger
// sees it (the index entries), from where Badger's writing ends: rescanned
// forward from the last measurement, measured in full (backward from the
// allocated end) before each allocation and at least every 1024 commits. The log itself is written with pwrite and
// needs no preallocation: a full disk is a clean ENOSPC there, and the
// frame is cut back. The frame's bytes count in the committer's
// free-space check and, as queued bytes, in Admit, which refuses ordinary
// writes (ErrNoSpace, ENOSPC) while free space is below what is queued
// plus a reserve that generation cuts, rewinds, unmounts, gc and Badger's
// own table writes use. See space.go.
//
// # Durability
//
// A committed record (Pending.Wait has returned) is in the log, written
// with pwrite into the page cache, and survives kill -9 of the daemon; so
// does one whose Pending.WaitLogged has returned, whose index may still
// be unwritten (Open catches it up from the log; until Wait returns, the
// store may not find its blobs, and the live tree's staging answers reads
// of them by waiting for it).
// Sync runs one fdatasync of the segments written since the last sync
// (normally one file: one device flush, where Badger's SyncWrites=false
// logs cost two) once everything enqueued before it is in the log, while
// the committer writes the last batch's index (Sync returns after both);
// callers share syncs, and a sync that started after a frame was written
// covers it. The frame lands in pre-written segment space (cas/prefill.go:
// zeros written and synced ahead of the log's end), so the fdatasync
// flushes data only, not the file system's journal for a new file size;
// space.go lets the prefill take disk only well above the reserve, and
// counts its unused bytes as free for the log.
// Sync runs on every FUSE fsync/fdatasync, on every generation cut and
// after every reset record (rewind/ calls Sync), on SetMeta and on Close.
// A power loss keeps everything committed before the last completed Sync
// and may lose what came after.
//
// Badger, the index, is not synced on that path. A background checkpoint
// (checkpoint.go) runs db.Sync every second, after 64 MiB of log and at
// Close; what a power cut takes from Badger's unsynced writes is rebuilt
// from the log on the next open, so nothing may rely on the index being
// durable before a checkpoint that started after the index write. Keys
// other packages write straight into Badger (rewind's branch names and
// indexes) are durable against a power cut only after such a checkpoint
// (or their own db.Sync); kill -9 keeps them, as before.
//
// # Damage
//
// Badger alone cannot tell a torn tail from lost history, and opened
// writable it truncates every memtable WAL (*.mem) and its newest value
// log (*.vlog) at the first entry that fails to parse or match its CRC,
// destroying intact entries after it. Opened read-only it refuses any
// store a crash left unclosed (ErrTruncateNeeded: the preallocated WAL is
// longer than its entries), and a truncated table (.sst) makes it panic
// in a goroutine of its own, where no recover reaches. So Open does this:
//
//   - The store manifest, a small file beside the Badger directory
//     (ManifestPath: dir + ".manifest"), holds the format version, the
//     store id (also under "m/id" in Badger and in every segment header),
//     the highest synced seq and the seq of the newest synced generation,
//     in two checksummed slots (manifest.go). After every log sync a
//     writer goroutine writes the older slot in place and fdatasyncs it (a
//     torn slot fails its checksum and the other still holds the previous
//     marks; read with O_NOFOLLOW): at once, and before Sync returns, when
//     a generation became durable; at most every 100 ms when only the
//     durable seq moved, so FUSE fsyncs do not pay for its fsyncs (nor
//     for waking it: a sync wakes it only when its timer is not already
//     pending). It only
//     ever claims what a completed log fdatasync made durable, so a power
//     cut never makes it lie; it may lag by that interval, and a loss of
//     only the last such interval of synced records is not detected.
//   - Before Badger touches an existing store, scanLogs replays each WAL
//     and the newest value log as Badger would and refuses (ErrCorrupt,
//     naming the file and offset) when a whole entry lies past the point
//     where replay stops: a kill -9 leaves at most whole entries of an
//     unfinished transaction and one entry copied in part, never a whole
//     entry after a bad one. checkTables opens every table the Badger
//     MANIFEST lists, in this goroutine, with panics recovered.
//   - Then a read-only open through a shadow directory (readonly.go:
//     symlinks to the store's files, and copies of the replayable part of
//     each WAL, the store directory flocked shared) checks the format and
//     catches up with the log in memory: it scans the segments from
//     "m/logpos" to the end (zeros after the last frame are the log's
//     pre-written space: its clean end). A complete frame (both
//     checksums good) is applied to an in-memory tail. A bad frame
//     (incomplete, failing a checksum, or zeros where a frame should be)
//     that no sync covered, as the synced-through marks of the intact
//     frames after it show (cas/doc.go, "Power cuts"), is a torn tail (a
//     crash during the write, or a power cut before its sync): it and
//     what follows are left out, and a writable open cuts them (later
//     segments removed, ftruncate, fsync), as it removes a last segment
//     whose creation was torn. The index may know frames past such a cut
//     (Badger's mapped WAL written back by the kernel before the log's
//     unsynced frames: their records, resets, "m/seq", meta keys, object
//     entries, "m/logpos" past the cut); since no sync covered those
//     frames, nothing acknowledged refers to them, and the open catches
//     the index down to the cut: the reverts are kept in memory by the
//     read-only check and written, and Badger synced, by the writable
//     open before it cuts the log (cas/doc.go, "Power cuts";
//     TestIndexAheadOfLog). Meta keys are set only through frames and
//     each SetMeta is followed by a sync, so one a cut frame overwrote
//     never returned to its caller, and goes back to the value Badger
//     held before it. Every other key outside frames (rewind's 'g' and
//     'p' indexes, branch names, the floor, the collector's deletions)
//     is written after a sync that covered what it names, and the
//     manifest's marks only ever claim a completed log sync: neither can
//     be ahead of the log. A bad frame that a later frame's mark shows
//     synced, or that frames without marks (format 5) follow, a missing
//     segment, a segment of another store id, or a log shorter than a
//     "m/logpos" that no torn tail explains is damage: ErrCorrupt naming
//     the file and offset, never truncated. Then the manifest: a
//     journal (index plus tail) that ends before the durable seq, lacks
//     the durable generation record, or belongs to another store id is
//     refused with ErrCorrupt and a message naming what is missing. A
//     manifest with history beside an empty or missing Badger directory,
//     or a format-2 store without its log, is refused the same way, never
//     opened as a new store.
//   - Only a store that passed all of this is opened writable; it then
//     re-applies the tail to Badger in one batch with "m/logpos" last
//     (idempotent, so a crash during catch-up only means doing it again)
//     and syncs Badger. Badger panics during an open become ErrCorrupt.
//
// What a crash can leave, and what Open does with it:
//
//   - kill -9 between a frame and its index write: the frame is complete
//     in the page cache; catch-up indexes it (TestKillBetweenFrameAndIndex).
//   - kill -9 or a power cut during a frame write: a torn tail, cut
//     (TestTornTailCut); it was never acknowledged as synced.
//   - a power cut after the last log sync: unsynced frames may be torn,
//     zeros or missing, in any order (cut at the first bad one, or nothing
//     to do; cas's TestPowerCutOneSegment and TestPowerCutSegments);
//     Badger may have lost index writes
//     since its last checkpoint, and catch-up replays them from the log,
//     or kept index writes of the frames the cut drops, and the open
//     catches it down (cas's TestIndexAheadCaughtDown, TestIndexAheadOfLog).
//   - a power cut that lost synced log data (a lying disk): the journal
//     ends before the manifest's durable seq: refused as lost history.
//   - a power cut that wrote a later page of Badger's mapped WAL and not
//     an earlier one: refused as damage (scanLogs); `reynfs fsck --repair`
//     (Repair, repair.go) keeps a copy, cuts the newest WAL where replay
//     stops and catches the index up from the log (TestRepairTornWAL).
//
// # Retention and the collector
//
// History is kept in two windows (ADR D5, rewind/policy.go): every seq
// for a fine window (7 days by default, or a number of records), and
// generations for a coarse one (90 days, or a number of the generations
// a person cuts or sees: not auto or rewind). The journal keeps the
// first retained seq, the floor ("m/floor"): Truncate records it first
// and then drops the records below it, except reset records (they define
// the active path of what stays) and the generation records the coarse
// window keeps, so a crash midway leaves records below the floor refused,
// never half-used. A rewind, view, diff or export of a state below the
// floors is refused with an error naming the floor (rewind/retain.go, checkRetained).
//
// The collector (rewind/collect.go) runs every Policy.Every while mounted
// and on demand (`reynfs gc`, mounted or not). One collection starts a
// sweep in the store (from then on every object a writer writes or
// deduplicates is spared, cas/guard.go), moves the floors under the live
// lock for a moment (writers wait only for that), truncates the journal,
// marks from every retained root (generations' trees and agent states,
// the records from the fine floor on, the live tree, held states), and
// sweeps the rest in small locked batches; then cas Compact rewrites the
// segments that are now mostly garbage and unlinks them, and the disk
// space comes back (cas/doc.go, "Collection"). A crash at any step
// leaves garbage, never a retained state that names a missing object:
// floors go up before anything below them goes, index entries before
// segment bytes, and a segment is unlinked only after the index points
// past it (rewind TestCollectCrash, cas TestCompactCrash).
//
// Options.ReadOnly keeps the shadow open as the journal, with the tail
// read over Badger (records, resets, meta, and objects through cas):
// look-only commands read a store, crashed or not, without writing a byte
// of it. Options.Damaged (with ReadOnly) opens a store the checks refuse,
// for fsck and salvage, with the log read up to the damage; Damage lists
// what they found.
package journal
