// Package replica ships a workspace's history to an object store
// (cas/objstore) and brings it back: push, clone, fork and, later,
// continuous replication. The remote is a replica of the journal, not of
// the local files that hold it: what it stores is defined by records and
// objects, so a local compaction, a format upgrade or a different
// machine's store changes nothing there.
//
// # Key layout (remote format 1)
//
// One prefix is one namespace that every workspace and fork shares, so
// an object is stored once however many workspaces reach it:
//
//	reynfs-remote.json              {"format":1}; created If-None-Match: *
//	packs/<id>.pack                 objects, immutable, id = BLAKE3 of the bytes
//	                                (which begin with a random salt: no
//	                                two packs share a name)
//	packs/<id>.idx                  the pack's index: hash, offset, length
//	ws/<name>/HEAD                  the workspace's head and lease (JSON)
//	ws/<name>/seg/<e>-<first>-<last>-<salt>.seg
//	                                records first..last, written in epoch e
//	                                (salt: 16 random hex digits, so no
//	                                two writes share a key; older keys
//	                                have none)
//	ws/<name>/names/<hex of N>      a branch name N given to a seq
//	                                (names.go); immutable, PutIfAbsent
//	pins/<store id>.json            a lazy clone's pin on the data packs it
//	                                reads from (pins.go)
//	gc/state                        {"format":1,"gen":N}: remote GC's generation
//	gc/condemned-<time>-<rand>.json what one GC run found dead (gc.go)
//
// A pack (pack.go) is a header ("RFSPACK2", kind: 't' inode objects, 'd'
// file chunks and agent states), then its objects, each compressed on
// its own (zstd where that saves an eighth, else raw) so that one ranged
// GET fetches one object, then the index: for each object its hash, kind
// of compression, offset, stored and raw length, sorted by hash, and a
// BLAKE3 of the whole file before it. packs/<id>.idx is a copy of that
// index, so a clone learns where every object is from the index files
// alone (restic's index files), and a lazy clone fetches an object with
// one ranged GET. Tree objects and chunks go to separate packs: a lazy
// clone downloads the tree packs whole and leaves the data packs where
// they are. Objects are whole: a store's deltas are its own business.
//
// A segment (segment.go) holds the encoded records first..last of one
// workspace (journal encoding, seq order, nothing missing between) and a
// checksum. Seqs are the workspace's own: a clone keeps them, so any
// target that names a seq names the same state on both sides.
//
// HEAD (head.go) is JSON: the workspace's seq shipped through (every
// record up to it is in a segment HEAD covers, and every object those
// records reach is in a pack whose index is written), the floor (the
// first retained seq), the epochs ([{epoch, first}]: segments of epoch
// e are valid for seqs from its first up to the next epoch's first - 1;
// a segment of epoch e outside that range, which a deposed writer may
// leave, is never read),
// the holder of the lease (host, pid, store id), the lease's expiry in
// the server's time, and, for a fork, the parent workspace and seq.
//
// # Ordering invariants (each has a test that fails if it breaks)
//
//  1. A pack is written before its index, and its index before any
//     segment whose records reach its objects.
//  2. A segment is written before the HEAD that covers its seqs; a
//     segment no HEAD covers is ignored by readers (and collected).
//  3. HEAD changes only by PutIfMatch with the ETag read; a new
//     workspace's HEAD is created by PutIfAbsent. A writer that loses the
//     race re-reads HEAD: a higher epoch means it was deposed.
//  4. Readers read HEAD first and then only what it covers.
//  5. Nothing a HEAD reaches is deleted: remote GC marks from every
//     workspace's HEAD, condemns in one run and deletes in a later one
//     after a grace period, re-marking first; a pushed object is never
//     counted as held while a condemned list names its pack ("Remote
//     GC" below; gc.go, gcmark.go, gcguard.go).
//
// # What the remote holds, known locally
//
// Push must not ask the server about every object. The store keeps, per
// remote (Badger keys under 'R'), the seq shipped through, the HEAD
// ETag last written, and the set of object hashes the remote is known to
// hold (written after the index that names them). Push sends the records
// after the shipped seq and, of the objects they reach, those not in that
// set: a record's chunks, and for a record with a Root (generation,
// import, restore, agent state) the Merkle diff of that tree against the
// set (a subtree whose inode object the remote holds is skipped whole).
//
// Two fields beyond the layout above: reynfs-remote.json also holds a
// random id ({"format":1,"id":"<32 hex>"}), and the store's record of
// what a remote holds is kept under that id, not the URL, so a remote
// emptied and made again under the same URL starts with nothing known;
// HEAD holds "dropped" ({gens, below}: the generations the writer's
// retention dropped), so that gN names the same generation in a clone of
// a collected store. Segments tile the seqs from 1 (the next starts at
// last+1) and hold every record the writer retained in their range: a
// seq without a record is one it had dropped below its floor. Every
// encoding has an exact decoder (fuzzed): a reader verifies each
// object's hash, each pack's and index's and segment's checksum, and
// reports damage as ErrCorrupt naming the key.
//
// # Push and clone (push.go, clone.go)
//
// Push reads HEAD, takes the lease (creating HEAD with PutIfAbsent on
// a first push), and sends the records after HEAD's seq a segment at a
// time: the objects the segment's records reach that the remote lacks
// go into tree and data packs, each pack written before its index; when
// every pack of the segment is written, the objects are recorded
// locally as held (an inode object as held with its subtree), then the
// segment is written, then HEAD advanced by PutIfMatch (renewing the
// lease), then the local shipped seq. At the end the lease is released
// (HEAD's expiry set to the server's now). A push cut off anywhere
// leaves HEAD at the last segment it covers; the next push resends
// only what no written index names. A conditional write whose reply was
// lost and whose retry failed is recognised by re-reading HEAD: it
// holds exactly the bytes this push wrote (holder and all).
//
// Clone reads the config, then HEAD, then lists the segments of HEAD's
// epochs and fetches a tiling of 1..HEAD's seq (a segment past it, left
// by a push cut off before HEAD, is never read), then every index file,
// then the objects the records reach, a whole pack at a time (trees
// level by level, then data), each verified. It writes them into a new
// store, then the records under their own seqs (journal.EnqueueAt),
// sets the floor and the dropped-generation count, indexes the
// generations, and makes the target live with a reset record (as an
// offline rewind does) unless it is head. For a fork (HEAD names a
// parent and seq), the tiling of 1..that seq comes from the parent's
// segments by the parent's HEAD (its last segment may run past the
// fork's seq: the records past it are dropped), then the fork's own.
//
// # Reading a remote (fsck.go, remotelog.go, fetch.go, lag.go)
//
// Fsck reads through the Backend only and keeps the order readers keep:
// each HEAD first, then every segment its epochs cover (each decoded:
// a damaged one is damage even where another covers its seqs; the
// sound ones must agree seq by seq, "Compaction" below) and a tiling
// of 1..HEAD from the sound ones, then every index file, then
// the packs: each read once, whole (its hash, its index against the
// .idx file byte for byte, every object re-hashed), the tree packs'
// inode objects keeping their children so that the trees of Root
// records are walked without a second read. Every object the records
// reach must be in some index. Each problem is one line naming a key.
// Workspaces and Generations are what log --remote shows. Fetch brings
// a clone up to date: Clone records under 'R' 'f' the remote seq it
// holds; a fetch takes the records after it (a segment may start
// before it) with the objects they reach that the store lacks, objects
// first, then the records under their own seqs. A store whose records
// past that seq are not the remote's, byte for byte, has diverged and
// is refused; one holding a prefix of them (a fetch cut off) continues.
//
// # The lease
//
// HEAD is also the single-writer lease: pushing (and continuous
// replication) holds it, renewing it by PutIfMatch before half its TTL
// has passed, timed by the server's clock (objstore.Backend.Now). Another
// writer takes over only after the lease expired, by writing HEAD with
// epoch+1 and its own holder; the deposed writer's next PutIfMatch fails,
// it re-reads HEAD, sees the newer epoch and stops: it refuses to push
// and offers to keep what it has as a new workspace (push --ws NEW).
//
// What is built (lease.go, take.go, fork.go): a push of an unmounted
// store holds the lease, renewed by a goroutine once a third of the TTL
// (Options.TTL, 60 s) has passed by the server's clock; a renewal that
// fails (HEAD changed, or no answer for half the TTL) cancels the
// push's requests, and it writes nothing more. A push refuses an
// unexpired lease of another writer (LockedError: "remote locked by
// ..."), a HEAD another store wrote (ErrNotOurs), and, for a store that
// pushed here before, a newer epoch (DeposedError: "deposed: ...",
// naming the last seq of its that the remote keeps). An unexpired lease
// held by this store from this host is a push that died (the store is
// locked by the process pushing now), and is taken back. Take (clone
// --take) waits for the lease to expire, clones head, then writes HEAD
// by PutIfMatch with the ETag the clone read: epoch+1 from HEAD's seq+1
// (replacing the last epoch if it shipped nothing), the clone's store as
// holder, expired. Fork writes a HEAD naming its parent and seq, held by
// no store (an expired placeholder holder): the first push of a clone
// of it claims it in epoch 2 (a later clone's push is deposed).
// A clone records every object the index files name as held (not their
// subtrees), so a push from a fork's clone sends only what is new.
// # Forget and the start of a workspace (forget.go)
//
// `forget --remote` keeps a workspace's history from a generation on: it
// writes HEAD once, by PutIfMatch with the ETag read, refused while a
// writer's lease is live (a push that takes it meanwhile makes the write
// fail, and forget reads HEAD again). The one writer that may forget
// under a live lease is the lease's holder: Shipper.Forget hands the
// write to the continuous sync's goroutine, which makes it between two
// ships with the session's HEAD and ETag (ordered with its renewals by
// the pusher's lock), so the sync never stops and every later ship
// advances the HEAD that carries the new floor. The daemon serves it
// for `forget --remote` on a mounted workspace that syncs to that
// remote (TestShipperForget; test/integration TestRemoteMountedFlow). It raises the floor to the
// generation's seq and sets "dropped" to every generation before it, so
// gN names the same generation in a later clone; holder and epochs stay,
// and a push keeps the higher floor and dropped count. Readers start at
// HEAD's Start (head.go): 1, or, once generations were dropped, the
// lower of the floor and the seq they were dropped below; below it a
// writer kept only reset records and generation records its store no
// longer counts, which no retained state needs. A fork reads its
// parent's segments from its own Start, whatever the parent's floor is
// now: forgetting a parent past a fork's point is allowed, and the
// parent's segments and packs the fork reads stay live in GC's mark
// (chosen over refusing the forget: no coordination between the two
// workspaces' writers, and a fork made just before the forget is safe).
//
// # Remote GC (gc.go, gcmark.go, gcguard.go)
//
// Two phases, like git's cruft packs and kopia's GC by time margins, with
// no exclusive lock. Every run first reads the condemned lists, then
// marks: each index file, then each workspace's HEAD and the segments a
// reader of it reads (segReader: the tiling from Start, a fork through
// its parent up to its seq); live are those segments, every object
// their records reach (chunks, agent states, the whole tree of each
// Root record, walked from the tree packs, each read once), and for
// each live object one pack holding it (one no pending list names, if
// any). A mark that cannot read something or finds damage is an error:
// nothing is deleted on a partial mark. Then, for each list older than
// the grace (24 h by default; time is the server's, Backend.Now, never
// the local clock): a pack or segment the fresh mark finds dead, and
// not written again since the list (its mtime, as git's cruft packs use
// it: a defence kept from before keys had salt; since, a push that sends
// a condemned pack's objects or a condemned segment's records again
// writes them under new keys, so no write can land between that check
// and the delete), is
// deleted, a pack's .idx before its .pack; what is live again (or
// named by a lazy clone's unexpired pin, pins.go) is left
// (un-condemned); the list is deleted last. Before a run deletes its
// first pack it bumps gc/state's generation (compare-and-swap). Last,
// what is dead and named by no pending list goes into a new list with
// the server's time. A pack at least half dead (by repackMinDead or
// more) is repacked: its live objects are copied into new packs, each
// written before its index, and it goes into the run's list with the
// dead ones; the next run's mark takes those objects from the new
// packs (it avoids packs a pending list names), so after the grace the
// old pack is dead and deleted (gcrepack.go). Other packs with some
// live objects stay: their dead bytes are reported.
//
// Crash order: a run cut off before the bump, or between any two
// deletions, leaves its list, and the next run finds the same things
// dead and finishes; a .pack whose .idx is gone names nothing a reader
// finds, and fsck --remote does not count one a list names as damage.
//
// Pushes and GC need both guards. (a) A push reads the condemned lists
// at its start (gcguard.go, called first thing in PushWith) and never
// counts an object of a condemned pack as held: it sends it again, in
// a new pack; and while any list is pending it walks every tree it
// sends whole (a tree root in a kept pack may have its subtree in a
// condemned one). Without (a), a push that started after a list and
// wrote HEAD after the deletion reaches deleted objects. (b) Deletion
// re-marks first: a push that started before the list (it saw none)
// and deduplicated against a pack the list then condemned wrote HEAD
// before the deletion, and the fresh mark sees its records. Without
// (b), that push's objects are deleted. What neither guard covers is a
// push that started before a list and is still running when the grace
// ends: the grace must exceed the longest push (24 h). The store's
// record of what a remote holds goes stale when packs are deleted: a
// push reads the lists first and then gc/state, and when the generation
// differs from the one the store saw last ('R' 'g', local.go) it drops
// that record and makes it again from the index files, less the
// condemned packs' (a run deleting a list's packs bumps gc/state before,
// so a push that finds the list gone finds the new generation).
// Continuous replication runs the same guard when a session starts and
// again every GuardEvery (10 min, far inside the grace) while it ships,
// so a condemned pack it deduplicated against is in a HEAD before the
// deletion's re-mark (b), and none after it reads the list (a).
//
// # Continuous replication (ship.go, shipstat.go, holds.go)
//
// A Shipper is a push that does not end: one pusher (push.go) per
// session, holding the lease (lease.go's renewal; the shipper's TTL is
// 15 s, so an idle session renews every 5 s) while it ships, every
// second, the durable records after HEAD's seq, with the same order of
// writes (packs, index, segment, HEAD per segment, then the local
// shipped seq), or at once when 8 MiB of records and the chunks they
// write are pending. It reads j.Durable() and committed records only:
// an fsync never waits for it. Each ship first drops what an earlier,
// failed ship left in the pusher's caches, so an object whose pack was
// never written is never counted as sent.
//
// Failures: an error that names another writer (LockedError, a HEAD
// changed under it), another store (ErrNotOurs), a diverged history
// or a newer epoch (DeposedError) stops the shipper with that reason
// (Status.Reason); it is never retried. Any other error (the remote
// down, a timeout, a renewal that got no answer: errUnrenewed) ends the
// session without releasing the lease and retries with backoff from
// 500 ms doubling to 30 s, one log line per change of state; the next
// session takes the lease back (same store, same host), reading HEAD
// afresh, so a HEAD write whose reply was lost is found there. Stop
// ships what is durable within its context, then releases the lease;
// cut short, it only stops the renewal and the lease expires.
//
// Status: shipped seq (HEAD's), the store's durable seq, the lag in
// seqs and in seconds (the age of the oldest unshipped record), the
// pending bytes (an estimate kept incrementally: encoded records plus
// the chunks they write, not deduplicated), the state (starting,
// shipping, idle, backing-off with the last error, stopped with the
// reason) and the requests and bytes sent. Wait(seq) is what sync and
// a mounted push use: it returns once HEAD covers seq, or at once when
// the shipper backs off (ErrRemoteDown) or stopped.
//
// Retention: FloorHolds lists, for each remote name whose URL has a
// shipped seq recorded ('R' 'u' id → URL ties the bookkeeping's remote
// id to the URL a name gives), the first seq it lacks. The daemon
// passes them to the collector as rewind.RecordHold (CollectOptions.
// Holds): the fine floor goes no higher than the generation that seq
// replays from, and the floor's "by" names the remote. Removing the
// remote's name releases the hold.
//
// The daemon starts and stops a Shipper at mount and unmount, and while
// mounted on `reynfs sync --continuous` / `--manual` (sync.mode).
//
// Tests: TestShipper* (objstorefake: shipping within the period, the
// 8 MiB trigger, backoff on a failing remote and the catch-up, fsync
// with a Paused remote, deposed by a takeover, a bounded Stop) and
// TestFloorHolds here; test/integration/sync_test.go on a real mount
// (kill -9 mid-stream leaves a prefix of acknowledged writes on the
// remote, retention while the remote is gone, the versity gateway).
//
// # Lazy clone (lazy.go, lazyfetch.go, prefetch.go)
//
// CloneLazy is Clone without the data packs: it reads the segments,
// every index file and the tree packs whole (so every inode object is
// local: stat, readdir, the tree walk of a rewind need nothing more),
// fetches the chunks of the files under a .git directory but pack files
// at once (git status reads the index and commit and tree objects, and
// a loose object's name does not tell a tree from a blob), in coalesced
// ranged GETs, and
// records where every other data object the records reach is, beside
// the store: <store>.lazy/index (entries hash, pack, compression,
// offset, stored and raw length; sorted by hash, binary-searched by
// pread, never loaded), order (the same by pack and offset, for the
// prefetcher) and origin.json (remote URL and id, pack ids, totals).
// OpenLazy (on every open of such a store: the daemon, offline
// commands, fsck) sets a cas.Fetcher on the store: cas's single lookup
// under Get, GetOnce, GetOnceInto and ReadRange asks it on a miss. It
// fetches one object with one GetRange of its bytes in its pack,
// verifies it (Object: damage is cas.ErrCorrupt naming the pack key),
// stores it and returns it; concurrent readers of one object share one
// request; a failure (cas.ErrFetch, never ErrNotFound, so the live
// tree's retry under its lock does not happen) is answered again from
// memory for FailFor. The prefetcher walks the order file in ranges of
// up to PrefetchBatch bytes of one pack, one request at a time, waiting
// before each until no demand fetch is in flight; a demand read for an
// object of the batch in flight issues its own GET. When every object
// is stored and the journal synced, the .lazy directory is removed and
// the store is whole. A push from a lazy clone sends none of those
// objects (the clone records them as held); a fetch into it leaves them
// on the remote, and the data objects its new records add as well
// (lazyextra.go: <store>.lazy/extra, written before the records); it
// fetches only the tree objects they add. Once the store is whole, a
// fetch fetches everything it adds.
//
// # Compaction (compact.go)
//
// A continuous sync writes a segment a second (86k a day), and every
// reader GETs each segment of its tiling. The lease holder (the pusher:
// push and each Shipper session) merges them, as Litestream's levels
// do, into segments of the same key form covering a longer range, which
// cover (clone.go) prefers: the longest segment at each seq.
//
// Levels are by size, so that they survive a restart and a takeover
// with nothing stored: level 0 is under 16 KiB, level L ≥ 1 holds
// 16 KiB·K^(L-1) up to 16 KiB·K^L, K = 16 (Options.CompactK; negative:
// off). A merge takes the first run, in the tiling a reader reads of
// HEAD (tile, from Start; for a fork from its seq+1: never a parent's
// range), of K consecutive segments of one epoch and one level, lowest
// level first, whose merge is at most 64 MiB; level 0 merges again
// into level 0 until it reaches 16 KiB. Nothing merges across an epoch
// (a run ends at one), past HEAD (only segments HEAD covers count) or
// past the size cap (segments of 4 MiB, a push's largest, never merge).
// Segments left before a higher-level one (a large ship amid small
// ones) stay as they are.
//
// The merged segment holds exactly the records of those it replaces
// (segments of one epoch hold the same records for a seq). Its source:
// the store's journal, the records the pusher encoded them from, when
// the range's first seq is at or above the store's floor (the journal
// still holds every record of the range); else, or when the result's
// size is not the sum of the replaced segments' sizes less their
// headers and checksums (exact: a merge concatenates their records),
// GETs of the replaced segments. A size that still differs is
// ErrCorrupt and nothing is written.
//
// Order: a merge runs after the HEAD covering its range was written
// (invariant 2 holds for it as for any segment), under the lease
// (p.check before the PUT). The pusher learns the segments from one
// List of the workspace's segments at the first merge of a session,
// then from its own writes. A push merges up to 64 times or 10 s after
// its last HEAD; a merge that fails fails the push (its records are
// shipped: HEAD was written) and the next push tries again. A Shipper
// merges after each ship that wrote a segment, up to 4 times and
// starting none after 200 ms (a large merge is then a step of its own
// between ships; none while Stop drains); a failure is logged and
// stops merging for that session, never the shipping.
//
// Readers need nothing new: cover takes the longest segment at each
// seq; a fork whose seq lies inside a merged segment reads it whole and
// drops the records past its seq (coverPast); a fetch from a seq inside
// one reads it too (tile tries the outermost segment across its first
// seq before a tiling starting there), so that every reader reads only
// segments of the tiling a reader from Start reads, the ones gc keeps.
//
// GC: the replaced segments are in no reader's tiling, so gc --remote
// condemns them and deletes them after the grace like any dead segment
// (a clone or fork reading them when the list was made has the grace
// to finish). fsck --remote reads every segment HEAD covers, replaced
// ones too: a damaged one is damage even when a merged one covers its
// seqs, and it checks that they agree with each other seq by seq (one
// record per seq, byte for byte, and no segment missing a seq another
// holds in its range), which is what makes a wrong merge visible.
//
// Tests (compact_test.go): TestCompactPushes (300 pushes tile in 15
// segments, a clone GETs fewer than 300/8 and is exact; file:// too),
// TestCompactOrder (a merge after the HEAD covering it), TestCompactPlan
// (epochs, HEAD, a fork's seq, levels, the cap), TestCompactTakeover,
// TestCompactCutOff and TestCompactShipRounds (a failed merge),
// TestCompactFromRemote, TestCompactGC, TestCompactFork and
// TestCompactFetchMid.
//
// Measured (TestMeasureShipRounds, REYNFS_MEASURE=3600, objstorefake
// with 1 ms per request, one run on a shared machine): 3600 one-write
// ship rounds leave 15 segments in the tiling (3600 before), and a
// clone makes 7222 requests in 9.2 s (10807 in 14.2 s before): the
// rest is one index file and pack per round, which compaction of
// segments does not merge (gc's repack copies only packs at least half
// dead; small live packs are not merged).
//
// # Follower (follow.go)
//
// A follower store (mount --follow URL#WS: a lazy clone of head, marked
// by SetFollow in the journal's meta) tracks a workspace written
// elsewhere and never writes to it: PushWith and the lease (so every
// push and continuous sync) refuse a follower store (FollowerError,
// "this store follows SRC: read-only") before their first request. A
// Follower reads HEAD every Every (1 s; one GET when nothing moved) and,
// when its seq is past what is served, runs FetchWith (the segments
// after the fetched seq, the tree objects their records add that the
// store lacks, the data objects too once the store is whole (while it
// is lazy they stay on the remote, fetched on first read: lazyextra.go),
// then the records under their own seqs; the index files already read
// are kept in an IndexCache, as an index never changes under its key),
// then Advance
// with the new head. HEAD first, then only what it covers, as every
// reader: a takeover (a new epoch continuing HEAD's seqs) and a raised
// floor are followed like any push.
//
// Moving the served tree: a rewind to the new head would append a reset
// record and a generation, records the remote does not have, and the
// next fetch would find the store diverged. Advance
// (rewind.Rewinder.Advance) appends nothing. The follower's journal is
// always the remote's prefix, byte for byte, so the state at the new
// head is what reconstruct(head) gives on the next open; Advance does
// that under the live lock (ReconstructFrom: the generation head replays
// from, copying the live tree's unchanged nodes, then the records after
// it on head's path, the writer's own resets included), swaps the result
// in, and, with the lock released, invalidates the kernel's caches of
// what changed (the rewind's own code: invariant 12 holds by
// construction). Readers see the tree before or after, never a mix.
// Built beside the served tree rather than grafted in place as a rewind
// does: a replay may read a chunk (a truncate inside one) that a lazy
// store fetches from the remote, and a failure midway must leave the
// served tree whole (the follower retries); the price is a copy of the
// tree's nodes per step that moves.
//
// State: following; backing-off (any error but the ones below: the
// remote down, a timeout; 500 ms doubling to 30 s, one log line per
// change of state; the mount serves what it has); stopped with the
// reason (ErrDiverged: the remote's history no longer continues the
// store's, HEAD behind what is served; ErrCloneAgain: the workspace
// made again or its seqs forgotten past what the store holds;
// ErrCorrupt). Status: local seq, HEAD's seq as last read, the lag in
// records and in seconds since HEAD was first seen past what is served.
// The daemon (cmd/reynfs/daemon follow.go) mounts a follower read-only,
// refuses the control methods that would append a record, and cuts no
// generation at unmount.
//
// Tests: TestFollower (objstorefake: writes, a writer's rewind, an
// outage and the catch-up, each index file read once, no record of its
// own, a refused push writes nothing); test/integration follow_test.go
// on real mounts.
package replica
