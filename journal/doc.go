// Package journal is the write-ahead journal of a reynfs workspace: typed
// records with one global seq, their binary encoding, appends with group
// commit, reads from a seq, and the active path that reset records define.
//
// # Store
//
// One Badger v4 database per workspace holds everything; Open opens it and
// hands the same *badger.DB to cas (Objects) and to packages that keep
// their own keys (DB). The key layout, by first byte:
//
//	key                     value                              owner
//	----------------------  ---------------------------------  -------------
//	'j' + seq (8 B, BE)     encoded Record                     journal
//	'r' + seq (8 B, BE)     encoded OpReset Record (index)     journal
//	"m/format"              store format version, decimal "1"  journal
//	"m/seq"                 highest seq committed (8 B, BE)    journal
//	"m/k/" + name           daemon bookkeeping (Get/SetMeta)   journal
//	"m/id"                  random store id (hex)              journal
//	'o' + hash (32 B)       object bytes                       cas
//	'n' + name              seq + time (8 B + 8 B, BE)         rewind (branch names)
//	'p' + seq (8 B, BE)     empty (restore record index)       rewind
//	"!badger!..."           Badger's own                       Badger
//
// Big-endian seqs make Badger's key order seq order, so Iter is one prefix
// iterator. The 'r' index is written in the same batch as its 'j' record,
// so Resets never scans the journal. "m/seq" is written with every batch
// and survives the truncation of old records: Open resumes at
// max("m/seq", last 'j' key) + 1, and a seq is never reissued. Every other
// prefix letter is free for other packages; claim it here first.
//
// Open refuses a store of another format version (ErrFormat), a directory
// that is not a reynfs store or a damaged one (ErrCorrupt) and a store
// another process holds (ErrLocked, Badger's directory flock). Badger runs
// with small memory (32 MiB memtables x3, 32 MiB block cache, 16 MiB index
// cache, 128 MiB value-log files, 2 compactors) so the daemon stays under
// 300 MiB RSS, and with a 1 KiB value threshold: records and small objects
// live in the LSM tree, file chunks in the value log.
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
// everything queued and writes it as one Badger WriteBatch: the blobs first
// (through cas, which skips stored ones; duplicates within the batch are
// dropped), then the records, the reset index and meta writes in queue
// order, then "m/seq". When Flush returns, every Pending of the batch is
// woken: concurrent writers share one commit. Badger splits a batch too
// big for one transaction into several committed in order, and replays its
// write-ahead log as a prefix after a crash, so a record is never durable
// before the blobs ahead of it (invariant 1). A commit or sync error fails
// the journal for good: every later Enqueue, Wait, Sync and SetMeta returns
// an error wrapping ErrFailed, which the file system answers with EIO.
//
// # Full disks
//
// Badger writes its value log and WAL through mappings of sparse files, so
// a store into a page without a block on a full disk is SIGBUS. The
// committer fallocates what each batch can reach before Badger sees it,
// and Admit refuses ordinary writes (ErrNoSpace, ENOSPC) while free space
// is below what is queued plus a reserve that generation cuts, rewinds,
// unmounts, gc and Badger's own table writes use. See space.go.
//
// # Durability
//
// Badger runs with SyncWrites=false. A committed record (Pending.Wait has
// returned) is in Badger's memory-mapped logs and survives kill -9 of the
// daemon. Sync runs db.Sync() after everything enqueued before it has
// committed; callers share db.Sync calls, and a sync that started after a
// commit covers it. db.Sync runs on every FUSE fsync/fdatasync (through
// Sync), on every generation cut and after every reset record (rewind/
// calls Sync), on SetMeta and on Close. A power loss keeps everything
// committed before the last completed Sync and may lose what came after.
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
//     store id (also under "m/id" in Badger), the highest synced seq and
//     the seq of the newest synced generation, in two checksummed slots
//     (manifest.go). After every db.Sync a writer goroutine writes the
//     older slot in place and fdatasyncs it (a torn slot fails its
//     checksum and the other still holds the previous marks; read with
//     O_NOFOLLOW): at once, and before
//     Sync returns, when a generation became durable; at most every
//     100 ms when only the durable seq moved, so FUSE fsyncs do not pay
//     for its fsyncs. It only ever claims what a completed sync made
//     durable, so a power cut never makes it lie; it may lag by that
//     interval, and a loss of only the last such interval of synced
//     records is not detected.
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
//     the manifest: a journal that ends before the durable seq, lacks the
//     durable generation record, or belongs to another store id is
//     refused with ErrCorrupt and a message naming what is missing. A
//     manifest with history beside an empty or missing Badger directory
//     is refused the same way, never opened as a new store.
//   - Only a store that passed all of this is opened writable. Badger
//     panics during an open become ErrCorrupt.
//
// Options.ReadOnly keeps the shadow open as the journal: look-only
// commands read a store, crashed or not, without writing a byte of it.
// Options.Damaged (with ReadOnly) opens a store the checks refuse, for
// fsck and salvage, and Damage lists what they found.
package journal
