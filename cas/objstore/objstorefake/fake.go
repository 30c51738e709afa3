// Package objstorefake is an in-memory objstore.Backend with a fault
// injector, for the tests of packages that use a remote (rewind/replica):
// it counts requests by kind (and bytes, and ranged GETs), fails the Nth
// request of a kind, applies a write and then reports a dropped
// connection, adds latency, pauses every request until resumed, and can
// play a server that ignores a conditional write (for SelfTest). With no
// fault set it passes objstoretest.Run, like the real backends.
//
// The ETag is objstore.ETagOf the content, as on file://; the clock is
// time.Now unless SetClock replaces it (lease tests move it by hand).
package objstorefake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
)

// Op names a kind of request.
type Op string

const (
	OpGet         Op = "get"
	OpGetRange    Op = "getrange"
	OpStat        Op = "stat"
	OpPut         Op = "put"
	OpPutIfAbsent Op = "putifabsent"
	OpPutIfMatch  Op = "putifmatch"
	OpList        Op = "list"
	OpDelete      Op = "delete"
	OpNow         Op = "now"
)

// ErrInjected is the error of a request failed by FailNth.
var ErrInjected = errors.New("objstorefake: injected failure")

// ErrDropped is the error of a write applied and then "lost" by
// DropAfterWrite: the caller cannot tell that the write happened.
var ErrDropped = errors.New("objstorefake: connection dropped after the write")

type object struct {
	data []byte
	etag string
	mod  time.Time
}

// Stats is what the fake counted since New or the last Reset.
type Stats struct {
	Requests map[Op]int // every request, failed ones included
	BytesIn  int64      // bytes written (Put, PutIfAbsent, PutIfMatch) that were applied
	BytesOut int64      // bytes returned by Get and GetRange
}

type fault struct {
	n    int // the nth request of op from now (1 is the next one)
	err  error
	drop bool // apply the write, then return err
}

// Backend is the fake. The zero value is not usable: call New.
type Backend struct {
	name string

	mu      sync.Mutex
	objs    map[string]object
	stats   Stats
	faults  map[Op][]*fault
	latency time.Duration
	paused  chan struct{} // closed when resumed; nil when not paused
	clock   func() time.Time
	ignore  map[Op]bool // conditions ignored: OpPutIfAbsent, OpPutIfMatch
	ignoreM bool        // PutIfMatch on a missing key writes
	hook    func(op Op, key string) error
}

var _ objstore.Backend = (*Backend)(nil)

// New returns an empty fake; name appears in String ("fake://name").
func New(name string) *Backend {
	return &Backend{
		name:   name,
		objs:   map[string]object{},
		stats:  Stats{Requests: map[Op]int{}},
		faults: map[Op][]*fault{},
		clock:  time.Now,
	}
}

// FailNth makes the nth request of op from now (1: the next) fail with
// err (ErrInjected if nil) before it does anything.
func (b *Backend) FailNth(op Op, n int, err error) {
	if err == nil {
		err = ErrInjected
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults[op] = append(b.faults[op], &fault{n: n, err: err})
}

// DropAfterWrite makes the nth write of op from now (1: the next) apply
// and then return ErrDropped, as a connection lost before the reply.
func (b *Backend) DropAfterWrite(op Op, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults[op] = append(b.faults[op], &fault{n: n, err: ErrDropped, drop: true})
}

// SetHook calls fn before every request (after latency and a pause);
// an error from it fails the request before it does anything. It picks
// requests by key, e.g. the first segment PUT; nil removes it.
func (b *Backend) SetHook(fn func(op Op, key string) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hook = fn
}

// SetLatency delays every request by d (0: none).
func (b *Backend) SetLatency(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.latency = d
}

// Pause makes every request wait (or fail with its context's error)
// until Resume.
func (b *Backend) Pause() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused == nil {
		b.paused = make(chan struct{})
	}
}

// Resume lets paused and later requests through.
func (b *Backend) Resume() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused != nil {
		close(b.paused)
		b.paused = nil
	}
}

// SetClock replaces the server clock that Now reports.
func (b *Backend) SetClock(now func() time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clock = now
}

// IgnoreCondition makes op (OpPutIfAbsent or OpPutIfMatch) write as a
// plain Put would, like a server that ignores If-None-Match or If-Match.
func (b *Backend) IgnoreCondition(op Op) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ignore == nil {
		b.ignore = map[Op]bool{}
	}
	b.ignore[op] = true
}

// IgnoreMatchOnMissing makes PutIfMatch on a missing key write it (some
// servers do; versitygw 1.8.0 does not, it answers 404); an existing key
// is still compared.
func (b *Backend) IgnoreMatchOnMissing() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ignoreM = true
}

// Stats returns a copy of the counters.
func (b *Backend) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stats
	s.Requests = maps.Clone(b.stats.Requests)
	return s
}

// Count is Stats().Requests[op].
func (b *Backend) Count(op Op) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats.Requests[op]
}

// Reset zeroes the counters (objects, faults and settings stay).
func (b *Backend) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats = Stats{Requests: map[Op]int{}}
}

// Keys returns every stored key, sorted (no request is counted).
func (b *Backend) Keys() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.objs))
}

func (b *Backend) String() string { return "fake://" + b.name }

// enter counts a request of op, waits out latency and a pause, and
// returns the fault due for it, if any. It returns with b.mu held when
// err is nil.
func (b *Backend) enter(ctx context.Context, op Op, key string) (drop error, err error) {
	b.mu.Lock()
	b.stats.Requests[op]++
	lat, paused, hook := b.latency, b.paused, b.hook
	var due *fault
	fs := b.faults[op]
	for i := 0; i < len(fs); i++ {
		fs[i].n--
		if fs[i].n <= 0 && due == nil {
			due = fs[i]
			fs = slices.Delete(fs, i, i+1)
			i--
		}
	}
	b.faults[op] = fs
	b.mu.Unlock()
	if op == OpList {
		if err := objstore.CheckPrefix(key); err != nil {
			return nil, err
		}
	} else if op != OpNow {
		if err := objstore.CheckKey(key); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if lat > 0 {
		t := time.NewTimer(lat)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	if paused != nil {
		select {
		case <-paused:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if hook != nil {
		if err := hook(op, key); err != nil {
			return nil, fmt.Errorf("%s %s: %w", op, key, err)
		}
	}
	if due != nil && !due.drop {
		return nil, fmt.Errorf("%s %s: %w", op, key, due.err)
	}
	b.mu.Lock()
	if due != nil {
		return fmt.Errorf("%s %s: %w", op, key, due.err), nil
	}
	return nil, nil
}

func (b *Backend) Get(ctx context.Context, key string) ([]byte, objstore.Info, error) {
	if _, err := b.enter(ctx, OpGet, key); err != nil {
		return nil, objstore.Info{}, err
	}
	defer b.mu.Unlock()
	o, ok := b.objs[key]
	if !ok {
		return nil, objstore.Info{}, fmt.Errorf("get %s: %w", key, objstore.ErrNotExist)
	}
	b.stats.BytesOut += int64(len(o.data))
	return slices.Clone(o.data), info(key, o), nil
}

func info(key string, o object) objstore.Info {
	return objstore.Info{Key: key, Size: int64(len(o.data)), ETag: o.etag, Mod: o.mod}
}

func (b *Backend) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if _, err := b.enter(ctx, OpGetRange, key); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("get range %s: negative offset %d or length %d", key, off, n)
	}
	o, ok := b.objs[key]
	if !ok {
		return nil, fmt.Errorf("get range %s: %w", key, objstore.ErrNotExist)
	}
	size := int64(len(o.data))
	if off >= size {
		return []byte{}, nil
	}
	out := slices.Clone(o.data[off : off+min(n, size-off)])
	b.stats.BytesOut += int64(len(out))
	return out, nil
}

func (b *Backend) Stat(ctx context.Context, key string) (objstore.Info, error) {
	if _, err := b.enter(ctx, OpStat, key); err != nil {
		return objstore.Info{}, err
	}
	defer b.mu.Unlock()
	o, ok := b.objs[key]
	if !ok {
		return objstore.Info{}, fmt.Errorf("stat %s: %w", key, objstore.ErrNotExist)
	}
	return info(key, o), nil
}

// store writes key (b.mu held).
func (b *Backend) store(key string, data []byte) objstore.Info {
	o := object{data: slices.Clone(data), etag: objstore.ETagOf(data), mod: b.clock()}
	b.objs[key] = o
	b.stats.BytesIn += int64(len(data))
	return info(key, o)
}

func (b *Backend) Put(ctx context.Context, key string, data []byte) error {
	drop, err := b.enter(ctx, OpPut, key)
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	b.store(key, data)
	return drop
}

func (b *Backend) PutIfAbsent(ctx context.Context, key string, data []byte) (objstore.Info, error) {
	drop, err := b.enter(ctx, OpPutIfAbsent, key)
	if err != nil {
		return objstore.Info{}, err
	}
	defer b.mu.Unlock()
	if _, ok := b.objs[key]; ok && !b.ignore[OpPutIfAbsent] {
		return objstore.Info{}, fmt.Errorf("put if absent %s: %w", key, objstore.ErrPrecondition)
	}
	in := b.store(key, data)
	if drop != nil {
		return objstore.Info{}, drop
	}
	return in, nil
}

func (b *Backend) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (objstore.Info, error) {
	drop, err := b.enter(ctx, OpPutIfMatch, key)
	if err != nil {
		return objstore.Info{}, err
	}
	defer b.mu.Unlock()
	o, ok := b.objs[key]
	switch {
	case b.ignore[OpPutIfMatch]:
	case !ok && b.ignoreM:
	case !ok:
		return objstore.Info{}, fmt.Errorf("put if match %s: %w (no object)", key, objstore.ErrPrecondition)
	case o.etag != etag:
		return objstore.Info{}, fmt.Errorf("put if match %s: %w", key, objstore.ErrPrecondition)
	}
	in := b.store(key, data)
	if drop != nil {
		return objstore.Info{}, drop
	}
	return in, nil
}

func (b *Backend) Delete(ctx context.Context, key string) error {
	drop, err := b.enter(ctx, OpDelete, key)
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	delete(b.objs, key)
	return drop
}

// List takes a snapshot under the lock and calls fn without it, so fn
// may use the backend.
func (b *Backend) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	if _, err := b.enter(ctx, OpList, prefix); err != nil {
		return err
	}
	var infos []objstore.Info
	for k, o := range b.objs {
		if strings.HasPrefix(k, prefix) {
			infos = append(infos, info(k, o))
		}
	}
	b.mu.Unlock()
	slices.SortFunc(infos, func(a, c objstore.Info) int { return strings.Compare(a.Key, c.Key) })
	for _, in := range infos {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(in); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) Now(ctx context.Context) (time.Time, error) {
	if _, err := b.enter(ctx, OpNow, ""); err != nil {
		return time.Time{}, err
	}
	defer b.mu.Unlock()
	return b.clock(), nil
}
