package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

var (
	// ErrLocked: another writer holds the workspace's lease.
	ErrLocked = errors.New("remote workspace locked")
	// ErrNotOurs: the remote workspace was written by another store.
	ErrNotOurs = errors.New("remote workspace belongs to another store")
	// ErrDiverged: the remote and the store disagree on the history
	// (the remote lost what this store shipped, or holds more).
	ErrDiverged = errors.New("remote and store histories diverge")
	// ErrDeposed: a newer epoch took the workspace over.
	ErrDeposed = errors.New("deposed by a newer epoch")
)

// Options tune a push; the zero value means the defaults.
type Options struct {
	PackSize    int           // bytes of objects per pack (8 MiB)
	SegmentSize int           // encoded bytes of records per segment (4 MiB)
	TTL         time.Duration // the lease (60 s)
	// CompactK: segments of one level merged into one (compact.go;
	// DefaultCompactK); negative: never compact.
	CompactK int
}

func (o Options) withDefaults() Options {
	if o.PackSize <= 0 {
		o.PackSize = 8 << 20
	}
	if o.SegmentSize <= 0 {
		o.SegmentSize = 4 << 20
	}
	if o.TTL <= 0 {
		o.TTL = time.Minute
	}
	if o.CompactK == 0 || o.CompactK == 1 {
		o.CompactK = DefaultCompactK
	}
	return o
}

// PushResult says what a push sent.
type PushResult struct {
	Remote   string `json:"remote"`
	WS       string `json:"ws"`
	From     uint64 `json:"from"`    // first seq sent (0: nothing to send)
	Through  uint64 `json:"through"` // the remote's seq after the push
	Records  int    `json:"records"`
	Segments int    `json:"segments"`
	Packs    int    `json:"packs"`
	Objects  int    `json:"objects"`
	Bytes    int64  `json:"bytes"`
	Names    int    `json:"names,omitempty"` // branch names sent (names.go)
	// Compacted: merged segments written (compact.go); CompactError:
	// why merging stopped short (the records are shipped all the same,
	// and the next push merges again).
	Compacted    int    `json:"compacted,omitempty"`
	CompactError string `json:"compact_error,omitempty"`
}

// Push sends workspace ws's records that the remote lacks, with the
// objects they reach that it lacks, and advances its HEAD (creating it,
// with epoch 1, on the first push). It holds the workspace's lease while
// it runs. See the package doc for the order it keeps.
func Push(ctx context.Context, j *journal.Journal, b objstore.Backend, ws string) (*PushResult, error) {
	return PushWith(ctx, j, b, ws, Options{})
}

// PushWith is Push with options.
func PushWith(ctx context.Context, j *journal.Journal, b objstore.Backend, ws string, o Options) (*PushResult, error) {
	if err := CheckName(ws); err != nil {
		return nil, fmt.Errorf("push: workspace %w", err)
	}
	if err := refuseFollower(j); err != nil { // before anything is written (follow.go)
		return nil, fmt.Errorf("push: %w", err)
	}
	p := &pusher{ctx: ctx, base: ctx, j: j, b: b, ws: ws, o: o.withDefaults(),
		res:  &PushResult{Remote: b.String(), WS: ws},
		sent: map[cas.Hash]byte{}, unmarked: map[cas.Hash]byte{}}
	cfg, err := remoteConfig(ctx, b, true)
	if err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	if p.loc, err = newLocal(j, cfg); err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	if p.gc, err = readGCGuard(ctx, b, p.loc); err != nil { // remote GC (gcguard.go)
		return nil, fmt.Errorf("push: %w", err)
	}
	if err := p.loc.setURL(b.String()); err != nil { // the floor's holder (holds.go)
		return nil, fmt.Errorf("push: %w", err)
	}
	if err := p.lease(); err != nil {
		return nil, fmt.Errorf("push to %s#%s: %w", b, ws, err)
	}
	err = p.run()
	if err == nil { // names after the HEAD that covers their seqs
		p.res.Names, err = pushNames(p.ctx, j, b, p.loc, ws, p.res.Through)
	}
	if err == nil && p.res.Segments > 0 { // after HEAD advanced (compact.go)
		if _, cerr := p.compact(pushCompactMax, pushCompactFor); cerr != nil {
			p.res.CompactError = cerr.Error() // shipped: not a failed push
		}
	}
	if lost := p.check(); lost != nil {
		err = lost // the push stopped because the lease was lost
	}
	if rerr := p.release(); err == nil && rerr != nil {
		err = rerr
	}
	if err != nil {
		return nil, fmt.Errorf("push to %s#%s: %w", b, ws, err)
	}
	return p.res, nil
}

// remoteConfig reads reynfs-remote.json; create: make it when missing.
func remoteConfig(ctx context.Context, b objstore.Backend, create bool) (*Config, error) {
	for range 2 {
		data, _, err := b.Get(ctx, ConfigKey)
		if err == nil {
			return DecodeConfig(data)
		}
		if !errors.Is(err, objstore.ErrNotExist) {
			return nil, err
		}
		if !create {
			return nil, fmt.Errorf("%s holds no reynfs remote (no %s)", b, ConfigKey)
		}
		c, err := newConfig()
		if err != nil {
			return nil, err
		}
		if _, err := b.PutIfAbsent(ctx, ConfigKey, c.Encode()); err == nil {
			return c, nil
		} else if !errors.Is(err, objstore.ErrPrecondition) {
			return nil, err
		}
		// Another writer made it first: read theirs.
	}
	return nil, fmt.Errorf("%s: %s keeps changing", b, ConfigKey)
}

type pusher struct {
	// ctx is cancelled when the lease is lost (base is the caller's).
	ctx    context.Context
	base   context.Context
	j      *journal.Journal
	b      objstore.Backend
	ws     string
	o      Options
	loc    local
	gc     gcGuard
	res    *PushResult
	holder Holder
	head   *Head
	etag   string
	leased bool

	// mu orders HEAD writes of the push and of the renewal goroutine,
	// and guards head, etag, leased, renewed (the local time of the
	// last HEAD written) and lost (why the lease was lost).
	mu         sync.Mutex
	renewed    time.Time
	lost       error
	stop, done chan struct{}
	held       bool // the fault hold ran (hold)

	// sent: objects put in a pack during this push (bits as in local);
	// unmarked: those not yet recorded locally.
	sent, unmarked map[cas.Hash]byte
	packs          [2]packer // tree, data

	cmp       *compactor // the segments known (compact.go); nil until listed
	noCompact bool       // a merge failed this session (ship.go)
}

// A push merges at most this many times, for at most this long, after
// its last HEAD write (compact.go); the next push goes on.
const (
	pushCompactMax = 64
	pushCompactFor = 10 * time.Second
)

type packer struct {
	kind  byte
	blobs []cas.Blob
	size  int
}

// run sends the records after HEAD's seq, one segment at a time.
func (p *pusher) run() error {
	limit := p.j.Durable()
	from := p.current().Seq + 1
	if from > limit {
		p.res.Through = from - 1
		return nil
	}
	p.res.From = from
	p.packs = [2]packer{{kind: KindTree}, {kind: KindData}}
	errFull := errors.New("segment full")
	for from <= limit {
		var recs []*journal.Record
		size := 0
		last := limit
		err := p.j.Iter(from, func(r *journal.Record) error {
			if r.Seq > limit {
				return errFull
			}
			recs = append(recs, r)
			size += r.EncodedLen()
			if size >= p.o.SegmentSize {
				last = r.Seq
				return errFull
			}
			return nil
		})
		if err != nil && !errors.Is(err, errFull) {
			return err
		}
		for _, r := range recs {
			if err := p.addRecord(r); err != nil {
				return err
			}
		}
		if err := p.segment(from, last, recs); err != nil {
			return err
		}
		from = last + 1
	}
	return nil
}

// segment writes the packs of what recs reach, then the segment, then
// HEAD covering it (invariants 1 and 2), then the local record.
func (p *pusher) segment(first, last uint64, recs []*journal.Record) error {
	for i := range p.packs {
		if err := p.flush(&p.packs[i]); err != nil {
			return err
		}
	}
	if err := p.loc.markHeld(p.unmarked); err != nil {
		return err
	}
	clear(p.unmarked)
	seg, err := EncodeSegment(first, last, recs)
	if err != nil {
		return err
	}
	if err := p.check(); err != nil {
		return err
	}
	cur := p.current()
	key, err := saltedSegmentKey(p.ws, cur.EpochOf(first), first, last)
	if err != nil {
		return err
	}
	if err := p.b.Put(p.ctx, key, seg); err != nil {
		return err
	}
	p.noteSegment(key, cur.EpochOf(first), first, last, len(seg))
	p.res.Segments++
	p.res.Records += len(recs)
	p.res.Bytes += int64(len(seg))
	now, err := p.b.Now(p.ctx)
	if err != nil {
		return err
	}
	floor, err := p.j.Floor()
	if err != nil {
		return err
	}
	next := p.current()
	// A forget (forget.go) may have raised the remote's floor and
	// dropped count past the store's: they never go down.
	next.Seq, next.Floor, next.Expires = last, max(next.Floor, min(floor, last+1)), expiry(now, p.o.TTL)
	if n, below, err := rewind.DroppedGenerations(p.j); err != nil {
		return err
	} else if n > 0 && (next.Dropped == nil || n > next.Dropped.Gens) {
		next.Dropped = &Dropped{Gens: n, Below: min(below, last+1)}
	}
	if err := p.writeHead(p.ctx, &next); err != nil {
		return err
	}
	p.res.Through = last
	return p.loc.setShipped(p.ws, p.shippedNow(last))
}

// addRecord queues the objects r reaches that the remote lacks.
func (p *pusher) addRecord(r *journal.Record) error {
	var err error
	switch r.Op {
	case journal.OpData:
		for _, c := range r.Chunks {
			if err == nil && !c.Hash.IsZero() {
				err = p.addData(c.Hash)
			}
		}
	case journal.OpGeneration:
		err = p.addTree(r.Root)
		for _, a := range r.Agents {
			if err == nil && !a.State.IsZero() {
				err = p.addData(a.State)
			}
		}
	case journal.OpImport, journal.OpRestore:
		err = p.addTree(r.Root)
	case journal.OpAgentState:
		if !r.Root.IsZero() {
			err = p.addData(r.Root)
		}
	}
	if err != nil {
		return fmt.Errorf("seq %d (%s): %w", r.Seq, r.Op, err)
	}
	return nil
}

// has reports whether the remote holds h, or this push sent it, with
// the bits want.
func (p *pusher) has(h cas.Hash, want byte) (bool, error) {
	if p.sent[h]&want != 0 {
		return true, nil
	}
	if p.gc.skip(h, want) {
		return false, nil
	}
	bits, err := p.loc.holds(h)
	return bits&want != 0, err
}

func (p *pusher) addData(h cas.Hash) error {
	if ok, err := p.has(h, holdsData|holdsTree); ok || err != nil {
		return err
	}
	data, err := p.j.Objects().Get(h)
	if err != nil {
		return fmt.Errorf("object %s: %w", h, err)
	}
	return p.add(&p.packs[1], h, data, holdsData)
}

// addTree queues the Merkle diff of the tree under root against what the
// remote holds: a subtree whose inode object it holds is skipped whole.
func (p *pusher) addTree(root cas.Hash) error {
	if root.IsZero() {
		return nil
	}
	stack := []cas.Hash{root}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if ok, err := p.has(h, holdsTree); ok || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		data, err := p.j.Objects().Get(h)
		if err != nil {
			return fmt.Errorf("inode object %s: %w", h, err)
		}
		in, err := cas.DecodeInode(data)
		if err != nil {
			return fmt.Errorf("inode object %s: %w", h, err)
		}
		// An object the remote holds whose subtree it may lack (known
		// from an index file a clone read): not sent again, its
		// children are looked at.
		if ok, err := p.has(h, holdsData); err != nil {
			return err
		} else if ok {
			p.sent[h] |= holdsTree
			p.unmarked[h] |= holdsTree
		} else if err := p.add(&p.packs[0], h, data, holdsTree|holdsData); err != nil {
			return err
		}
		for _, e := range in.Entries {
			stack = append(stack, e.Object)
		}
		for _, c := range in.Chunks {
			if !c.IsZero() {
				if err := p.addData(c); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (p *pusher) add(pk *packer, h cas.Hash, data []byte, bits byte) error {
	p.sent[h] |= bits
	p.unmarked[h] |= bits
	pk.blobs = append(pk.blobs, cas.Blob{Hash: h, Data: data})
	pk.size += len(data)
	if pk.size >= p.o.PackSize {
		return p.flush(pk)
	}
	return nil
}

// flush writes a pack, then its index (invariant 1).
func (p *pusher) flush(pk *packer) error {
	if len(pk.blobs) == 0 {
		return nil
	}
	pack, idx, id, err := BuildPack(pk.kind, pk.blobs)
	if err != nil {
		return err
	}
	if err := p.check(); err != nil {
		return err
	}
	if !p.held {
		p.held = true
		if err := hold(p.ctx); err != nil {
			return err
		}
	}
	if err := p.b.Put(p.ctx, PackKey(id), pack); err != nil {
		return err
	}
	if err := p.b.Put(p.ctx, IndexKey(id), idx); err != nil {
		return err
	}
	// The remote holds these objects now: a push cut off before its
	// segment is written does not send them again. Only as objects: an
	// inode object is recorded as held with its subtree (holdsTree) with
	// the segment, once every pack of it is written.
	objs := make(map[cas.Hash]byte, len(pk.blobs))
	for _, b := range pk.blobs {
		objs[b.Hash] = holdsData
	}
	if err := p.loc.markHeld(objs); err != nil {
		return err
	}
	p.res.Packs++
	p.res.Objects += len(pk.blobs)
	p.res.Bytes += int64(len(pack) + len(idx))
	pk.blobs, pk.size = nil, 0
	return nil
}

// current returns a copy of the HEAD last written.
func (p *pusher) current() Head {
	p.mu.Lock()
	defer p.mu.Unlock()
	return *p.head
}

func (p *pusher) shippedNow(seq uint64) shipped {
	p.mu.Lock()
	defer p.mu.Unlock()
	return shipped{Seq: seq, ETag: p.etag, Epoch: p.head.Epoch()}
}

// HoldEnv, set to a duration (REYNFS_PUSH_HOLD=2s), makes a push print
// "push: holding" on stderr before it writes its first pack and wait
// that long (tests stop or kill the process there).
const HoldEnv = "REYNFS_PUSH_HOLD"

func hold(ctx context.Context) error {
	v := os.Getenv(HoldEnv)
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", HoldEnv, v, err)
	}
	fmt.Fprintln(os.Stderr, "push: holding")
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
