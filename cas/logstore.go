package cas

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/klauspost/compress/zstd"
)

// LogPrefix is the first byte of an object's index key in a store with a
// segment log: LogPrefix + hash -> Loc (segment, offset, lengths,
// compression). Objects of a format-1 store stay inline under KeyPrefix.
const LogPrefix = 'l'

func logKey(h Hash) []byte {
	k := make([]byte, keyLen)
	k[0] = LogPrefix
	copy(k[1:], h[:])
	return k
}

// minCompress is the smallest object worth trying to compress.
const minCompress = 128

var (
	zstdOnce sync.Once
	zenc     *zstd.Encoder
	zdec     *zstd.Decoder
	zerr     error
)

// codecs returns the encoder and decoder every store shares: EncodeAll and
// DecodeAll are safe for concurrent use.
func codecs() (*zstd.Encoder, *zstd.Decoder, error) {
	zstdOnce.Do(func() {
		zenc, zerr = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(2), zstd.WithLowerEncoderMem(true))
		if zerr == nil {
			zdec, zerr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(2),
				zstd.WithDecoderMaxMemory(1<<30), zstd.WithDecoderLowmem(true))
		}
	})
	return zenc, zdec, zerr
}

// LogOptions configure OpenLogged.
type LogOptions struct {
	// ID is the store id every segment header must carry.
	ID string
	// ReadOnly opens the log without writing a byte of it.
	ReadOnly bool
	// Create makes the log directory and its first segment if missing.
	Create bool
	// FrameKeys are the prefixes of every key the frames' ops write
	// (besides the store's own): a catch-down (catchdown.go) sets back
	// those a cut frame wrote.
	FrameKeys [][]byte
}

// Tail is what a scan found in the log past the index's position.
type Tail struct {
	Frames int
	Bytes  int64
	End    Pos  // end of the last complete frame
	Torn   bool // a torn frame or segment followed End (cut by a writable open)
	// EndFile is the segment file End is in, for messages.
	EndFile string
	// Damage is set when the log is damaged (it wraps ErrDamaged); the
	// frames before the damage are still in Frames and the overlay.
	Damage error
	// KV is the newest value of each key the tail's ops write (nil for a
	// deleted key), for read-only opens that cannot write the index; it
	// also holds what a catch-down sets back (catchdown.go).
	KV map[string][]byte
	// Reverted counts the index keys a catch-down set back: written
	// from Badger's WAL for frames a power cut tore off the log.
	Reverted int
}

// OpenLogged returns the object store over db (the index) and the segment
// log in logDir. The caller then calls CatchUp before using it.
func OpenLogged(db *badger.DB, logDir string, o LogOptions) (*Badger, error) {
	if _, _, err := codecs(); err != nil {
		return nil, fmt.Errorf("open log: zstd: %w", err)
	}
	l, err := openSegLog(logDir, o.ID, o.ReadOnly, o.Create)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	b := NewBadger(db)
	b.log = l
	b.frameKeys = o.FrameKeys
	b.inline = true // unless the index holds no inline object at all
	_ = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{KeyPrefix}})
		defer it.Close()
		it.Rewind()
		b.inline = it.Valid()
		return nil
	})
	return b, nil
}

func posLess(a, b Pos) bool { return a.Seg < b.Seg || a.Seg == b.Seg && a.Off < b.Off }

// applyFrame adds a frame's index writes to wb: a Loc per blob, then its
// ops in order.
func applyFrame(wb *badger.WriteBatch, blobs []blobEntry, ops []Op) error {
	for _, e := range blobs {
		if err := wb.Set(logKey(e.h), e.loc.encode()); err != nil {
			return err
		}
	}
	for _, o := range ops {
		var err error
		if o.Del {
			err = wb.Delete(o.Key)
		} else {
			err = wb.Set(o.Key, o.Val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Logged reports whether the store has a segment log (format 2).
func (b *Badger) Logged() bool { return b.log != nil }

// Commit appends f as one frame and then writes its index (a Loc per new
// blob, f.Ops, the log position) as one Badger write batch, not synced:
// SyncLog makes the frame durable, Checkpoint the index. Blobs already
// stored (not looked up for a Fresh frame), and repeats within f, are not
// written again. A frame whose write fails is cut off again and the error
// returned. Commit is Append and then Unindexed.Index.
func (b *Badger) Commit(f *Frame) (written, deduped int, err error) {
	u, deduped, err := b.Append(f)
	if err != nil || u == nil {
		return 0, deduped, err
	}
	written, err = u.Index()
	return written, deduped, err
}

// Unindexed is a frame Append wrote to the log whose index is not written
// yet. It holds the log's writer lock, so no other frame is appended (nor
// indexed) before its index: the index, and "m/logpos" with it, follows
// the log in order. Index writes the index and releases the lock; it must
// be called exactly once, and may be called from another goroutine than
// Append (the journal's committer indexes a frame its Sync appended, while
// that Sync runs the log's fdatasync).
type Unindexed struct {
	b             *Badger
	f             *Frame
	at            Pos
	frameLen      int64
	offs          []int64
	blobs         []stored
	bases         bool
	crcs          map[Hash][]uint32
	epoch, lepoch uint64
}

// Append writes f as one frame of the log (Commit's first half) and
// returns it unindexed, with the log's writer lock held until its Index;
// nil (and no lock held) when f had nothing to write, every blob stored.
// On an error nothing is held and the frame is cut off again.
func (b *Badger) Append(f *Frame) (u *Unindexed, deduped int, err error) {
	if b.log == nil {
		return nil, 0, errors.New("commit: store has no log")
	}
	enc, _, _ := codecs()
	epoch, lepoch := b.cache.currentEpoch(), b.locs.currentEpoch()
	var blobs []stored
	var small []bool // candidates for a pack (pack.go)
	var bases bool
	var crcs map[Hash][]uint32 // page CRCs of the deltas to remember
	packing := packable(f.Blobs)
	has, err := b.hasAll(f.Blobs, f.Fresh)
	if err != nil {
		return nil, 0, fmt.Errorf("commit: %w", err)
	}
	seen := make(map[Hash]struct{}, len(f.Blobs))
	for _, bl := range f.Blobs {
		if _, dup := seen[bl.Hash]; dup {
			deduped++
			continue
		}
		seen[bl.Hash] = struct{}{}
		if has[bl.Hash] {
			deduped++
			continue
		}
		s := stored{h: bl.Hash, raw: len(bl.Data), comp: compRaw, data: bl.Data}
		// A delta first: a chunk a small write changed is a few KiB
		// against its 64 KiB, and then not worth a compression attempt.
		var d stored
		var delta bool
		var pcrcs []uint32 // bl.Data's page CRCs, when computed for asDelta
		if !bl.Base.IsZero() {
			bases = true
			if bl.BaseData != nil && bl.Pages != 0 {
				pcrcs = pageCRCs(bl.Data)
			}
			d, delta = b.asDelta(bl, len(bl.Data), pcrcs)
		}
		isSmall := packing && len(bl.Data) <= packObjectMax
		if delta && 4*(len(d.data)+deltaOverhead) <= len(bl.Data) {
			s, isSmall = d, false
			if bl.BaseData != nil {
				// Before the writer's lock (see rememberWritten).
				if crcs == nil {
					crcs = map[Hash][]uint32{}
				}
				if pcrcs == nil {
					pcrcs = pageCRCs(bl.Data)
				}
				crcs[bl.Hash] = pcrcs
			}
		} else {
			if !isSmall && !bl.Raw && len(bl.Data) >= minCompress && compressible(enc, bl.Data) {
				c := enc.EncodeAll(bl.Data, make([]byte, 0, len(bl.Data)))
				if len(c) <= len(bl.Data)-len(bl.Data)/8 {
					s.comp, s.data = compZstd, c
				}
			}
			if delta && 2*(len(d.data)+deltaOverhead) <= len(s.data) {
				s = d
			}
		}
		if s.comp != compDelta && (bl.BaseData != nil || bl.Chunk) {
			// A file chunk's new version stored whole cuts the chain
			// it would have extended (MaxDataChain, or a delta not
			// worth it): the live tree reads that chain no more.
			b.locs.dropChain(bl.Base)
		}
		blobs = append(blobs, s)
		small = append(small, isSmall && s.comp == compRaw)
	}
	if len(blobs) == 0 && len(f.Ops) == 0 {
		return nil, deduped, nil
	}
	if packing {
		blobs = packSmall(enc, blobs, small)
	}
	frame, offs := encodeFrame(f.First, f.Last, blobs, f.Ops)

	l := b.log
	l.mu.Lock()
	at, err := l.append(frame)
	if err != nil {
		l.mu.Unlock()
		return nil, 0, fmt.Errorf("commit: %w", err)
	}
	if f.Appended != nil {
		f.Appended()
	}
	return &Unindexed{b: b, f: f, at: at, frameLen: int64(frame.len()), offs: offs, blobs: blobs,
		bases: bases, crcs: crcs, epoch: epoch, lepoch: lepoch}, deduped, nil
}

// hasAll notes every blob with the sweep guard (before the lookup a
// dedup relies on, guard.go) and, unless fresh, reports which ones are
// stored: Has, with the index lookups of all of them in one read
// transaction. A sequential writer's 1 MiB frame holds 16 chunks, and a
// transaction each cost a Badger read timestamp each, which waits for
// the index write in flight (the previous frame's) every time.
func (b *Badger) hasAll(blobs []Blob, fresh bool) (map[Hash]bool, error) {
	for _, bl := range blobs {
		b.guard.note(bl.Hash)
	}
	if fresh {
		return nil, nil
	}
	has := make(map[Hash]bool, len(blobs))
	var ask []Hash
	for _, bl := range blobs {
		if _, done := has[bl.Hash]; done {
			continue
		}
		in := b.cache.contains(bl.Hash)
		has[bl.Hash] = in
		if !in {
			ask = append(ask, bl.Hash)
		}
	}
	if len(ask) == 0 {
		return has, nil
	}
	err := b.db.View(func(txn *badger.Txn) error {
		for _, h := range ask {
			_, _, found, _, err := b.lookupTxn(txn, h, false)
			if err != nil {
				return fmt.Errorf("has %s: %w", h.Short(), err)
			}
			has[h] = found
		}
		return nil
	})
	return has, err
}

// Index writes u's index (Commit's second half) and releases the log's
// writer lock. It returns how many objects the frame stored.
func (u *Unindexed) Index() (written int, err error) {
	b, f, at, blobs, offs := u.b, u.f, u.at, u.blobs, u.offs
	defer b.log.mu.Unlock()
	if b.fault != nil {
		if err := b.fault("index"); err != nil {
			return 0, fmt.Errorf("commit: injected fault: %w", err)
		}
	}
	wb := b.db.NewWriteBatch()
	defer wb.Cancel()
	entries := make([]blobEntry, 0, len(blobs))
	for i, s := range blobs {
		loc := Loc{Seg: at.Seg, Off: at.Off + offs[i], Stored: uint32(len(s.data)), Raw: uint32(s.raw), Comp: s.comp, Base: s.base, Depth: s.depth}
		if s.comp != compPack {
			entries = append(entries, blobEntry{h: s.h, loc: loc})
			continue
		}
		for _, m := range s.members {
			ml := loc
			ml.Raw, ml.In, ml.PackRaw = uint32(m.n), uint32(m.off), uint32(s.raw)
			entries = append(entries, blobEntry{h: m.h, loc: ml})
		}
	}
	objects := len(entries)
	if err := applyFrame(wb, entries, f.Ops); err != nil {
		return 0, fmt.Errorf("commit: index: %w", err)
	}
	if err := wb.Set(KeyLogPos, Pos{at.Seg, at.Off + u.frameLen}.encode()); err != nil {
		return 0, fmt.Errorf("commit: index: %w", err)
	}
	if err := wb.Flush(); err != nil {
		return 0, fmt.Errorf("commit: index: %w", err)
	}
	b.logged.Add(u.frameLen)
	if u.bases {
		written := make(map[Hash]bool, len(entries))
		for _, e := range entries {
			written[e.h] = true
		}
		b.cacheWritten(f.Blobs, written, u.epoch)
	}
	b.rememberWritten(u.crcs, entries, u.lepoch)
	return objects, nil
}

// SetFault sets a hook called at named points: "frame" (half a frame
// written), "index" (the frame written, its index not yet), "catchup"
// (the tail cut, its index not yet written); a non-nil result fails the
// operation there. For crash and fault tests only.
func (b *Badger) SetFault(f func(op string) error) {
	b.fault = f
	if b.log != nil {
		b.log.fault = f
	}
}

// sampleSize is the prefix compressible tries first.
const sampleSize = 4 << 10

// compressible reports whether data looks worth compressing: a big object
// is judged by compressing a sample first, so incompressible chunks
// (media, archives, random data) cost a 4 KiB attempt, not a whole one.
func compressible(enc *zstd.Encoder, data []byte) bool {
	if len(data) >= sampleSize && looksRandom(data[:sampleSize]) {
		return false // entropy.go
	}
	if len(data) < 4*sampleSize {
		return true
	}
	var buf [2 * sampleSize]byte
	c := enc.EncodeAll(data[:sampleSize], buf[:0])
	return len(c) <= sampleSize-sampleSize/8
}

// LogBytes is how many bytes commits have appended since the store was
// opened (the journal's index checkpoint uses it).
func (b *Badger) LogBytes() int64 { return b.logged.Load() }

// SyncLog makes every frame appended so far durable: one fdatasync of the
// active segment (and of a segment the writer left since the last sync).
func (b *Badger) SyncLog() error {
	if b.log == nil {
		return nil
	}
	return b.log.sync(true)
}

// SyncLogBackground is SyncLog for a sync nobody waits on (the journal's
// index checkpoint, every second and every 64 MiB of log): it does not
// let the prefill run a round (prefill.go), which for a bulk writer that
// never fsyncs would pre-write zeros it then overwrites.
func (b *Badger) SyncLogBackground() error {
	if b.log == nil {
		return nil
	}
	return b.log.sync(false)
}

// CloseLog closes the segment files. The caller closes the database.
func (b *Badger) CloseLog() error {
	if b.log == nil {
		return nil
	}
	return b.log.close()
}

// getLogged reads the object at loc: decompressed, or rebuilt from its
// delta chain. Get checks its hash.
func (b *Badger) getLogged(h Hash, loc Loc) ([]byte, error) {
	return b.getLoggedInto(h, loc, nil)
}

// getLoggedInto is getLogged that reads an uncompressed object stored
// whole, or the whole bottom of a delta chain, into dst when it fits
// (readWhole); the result may then alias dst.
func (b *Badger) getLoggedInto(h Hash, loc Loc, dst []byte) ([]byte, error) {
	if loc.Comp == compDelta {
		return b.undelta(loc, dst)
	}
	return b.readWhole(h, loc, dst)
}

// readWhole reads and decompresses the object stored whole at loc; an
// uncompressed one goes into dst when it fits (fitsInto), else into a
// buffer of its own.
func (b *Badger) readWhole(h Hash, loc Loc, dst []byte) ([]byte, error) {
	if loc.Comp == compPack {
		return b.readPacked(h, loc)
	}
	var raw []byte
	var err error
	if fitsInto(loc, dst) {
		raw = dst[:loc.Raw]
		err = b.log.readAtInto(loc.Seg, loc.Off, raw)
	} else {
		raw, err = b.log.readAt(loc.Seg, loc.Off, int(loc.Stored))
	}
	if err != nil {
		return nil, err
	}
	switch loc.Comp {
	case compRaw:
	case compZstd:
		_, dec, _ := codecs()
		out, err := dec.DecodeAll(raw, make([]byte, 0, loc.Raw))
		if err != nil || len(out) != int(loc.Raw) {
			return nil, fmt.Errorf("%s: %w", h, ErrCorrupt)
		}
		raw = out
	default:
		return nil, fmt.Errorf("%s: compression %d: %w", h, loc.Comp, ErrCorrupt)
	}
	return raw, nil
}

// lookup finds h in the index: inline bytes (format 1, or written there
// by hand) win over a log location; the read-only tail comes last.
func (b *Badger) lookup(h Hash, wantValue bool) (data []byte, loc Loc, found, inLog bool, err error) {
	err = b.db.View(func(txn *badger.Txn) error {
		data, loc, found, inLog, err = b.lookupTxn(txn, h, wantValue)
		return err
	})
	return data, loc, found, inLog, err
}

// lookupTxn is lookup in txn.
func (b *Badger) lookupTxn(txn *badger.Txn, h Hash, wantValue bool) (data []byte, loc Loc, found, inLog bool, err error) {
	err = badger.ErrKeyNotFound
	var item *badger.Item
	if b.inline || b.log == nil {
		item, err = txn.Get(Key(h))
	}
	if err == nil {
		if wantValue {
			data, err = item.ValueCopy(nil)
		}
		return data, loc, err == nil, false, err
	}
	if l, ok := b.tail[h]; ok {
		// Read-only: the log past the index (or all of it, when
		// salvaging a store whose index may fail to read).
		return nil, l, true, true, nil
	}
	if b.hidden[h] {
		return nil, Loc{}, false, false, nil // a catch-down drops its entry
	}
	if errors.Is(err, badger.ErrKeyNotFound) && b.log != nil {
		item, err = txn.Get(logKey(h))
		if err == nil {
			err = item.Value(func(v []byte) error {
				var derr error
				loc, derr = decodeLoc(v)
				return derr
			})
			return nil, loc, err == nil, err == nil, err
		}
	}
	if errors.Is(err, badger.ErrKeyNotFound) {
		err = nil
	}
	return nil, Loc{}, false, false, err
}

// eachLogged is Each over both prefixes (and the read-only tail), in hash
// order, sizes as stored.
func (b *Badger) eachLogged(fn func(h Hash, size int64) error) error {
	type ent struct {
		h    Hash
		size int64
	}
	var all []ent
	seen := map[Hash]bool{}
	err := b.db.View(func(txn *badger.Txn) error {
		for _, p := range []byte{KeyPrefix, LogPrefix} {
			opts := badger.DefaultIteratorOptions
			opts.PrefetchValues = false
			opts.Prefix = []byte{p}
			it := txn.NewIterator(opts)
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				k := item.Key()
				if len(k) != keyLen {
					continue
				}
				var h Hash
				copy(h[:], k[1:])
				if seen[h] || b.hidden[h] {
					continue
				}
				seen[h] = true
				size := item.ValueSize()
				if p == LogPrefix {
					if v, err := item.ValueCopy(nil); err == nil {
						if l, err := decodeLoc(v); err == nil {
							size = l.share()
						}
					}
				}
				all = append(all, ent{h, size})
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return err
	}
	for h, l := range b.tail {
		if !seen[h] {
			all = append(all, ent{h, l.share()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return string(all[i].h[:]) < string(all[j].h[:]) })
	for _, e := range all {
		if err := fn(e.h, e.size); err != nil {
			return err
		}
	}
	return nil
}
