package replica

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// gate passes requests to a real backend until a request that trip
// matches arrives; from then on the requests that hold matches (all of
// them when hold is nil) wait until open, or fail with their context's
// error, as a process stopped or a connection hung would. blocked is
// closed when the first request is held. Writes are logged by key.
type gate struct {
	objstore.Backend
	trip, hold func(op, key string) bool

	mu      sync.Mutex
	tripped bool
	opened  chan struct{}
	blocked chan struct{}
	once    sync.Once
	writes  []string
}

func newGate(b objstore.Backend, trip, hold func(op, key string) bool) *gate {
	return &gate{Backend: b, trip: trip, hold: hold, opened: make(chan struct{}), blocked: make(chan struct{})}
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.opened:
	default:
		close(g.opened)
	}
}

func (g *gate) wait(ctx context.Context, op, key string) error {
	g.mu.Lock()
	if !g.tripped && g.trip(op, key) {
		g.tripped = true
	}
	held := g.tripped && (g.hold == nil || g.hold(op, key))
	g.mu.Unlock()
	if held {
		g.once.Do(func() { close(g.blocked) })
		select {
		case <-g.opened:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if op == "put" || op == "putifabsent" || op == "putifmatch" || op == "delete" {
		g.mu.Lock()
		g.writes = append(g.writes, op+" "+key)
		g.mu.Unlock()
	}
	return nil
}

func (g *gate) written() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.writes...)
}

func (g *gate) Get(ctx context.Context, key string) ([]byte, objstore.Info, error) {
	if err := g.wait(ctx, "get", key); err != nil {
		return nil, objstore.Info{}, err
	}
	return g.Backend.Get(ctx, key)
}

func (g *gate) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := g.wait(ctx, "getrange", key); err != nil {
		return nil, err
	}
	return g.Backend.GetRange(ctx, key, off, n)
}

func (g *gate) Stat(ctx context.Context, key string) (objstore.Info, error) {
	if err := g.wait(ctx, "stat", key); err != nil {
		return objstore.Info{}, err
	}
	return g.Backend.Stat(ctx, key)
}

func (g *gate) Put(ctx context.Context, key string, data []byte) error {
	if err := g.wait(ctx, "put", key); err != nil {
		return err
	}
	return g.Backend.Put(ctx, key, data)
}

func (g *gate) PutIfAbsent(ctx context.Context, key string, data []byte) (objstore.Info, error) {
	if err := g.wait(ctx, "putifabsent", key); err != nil {
		return objstore.Info{}, err
	}
	return g.Backend.PutIfAbsent(ctx, key, data)
}

func (g *gate) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (objstore.Info, error) {
	if err := g.wait(ctx, "putifmatch", key); err != nil {
		return objstore.Info{}, err
	}
	return g.Backend.PutIfMatch(ctx, key, data, etag)
}

func (g *gate) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	if err := g.wait(ctx, "list", prefix); err != nil {
		return err
	}
	return g.Backend.List(ctx, prefix, fn)
}

func (g *gate) Delete(ctx context.Context, key string) error {
	if err := g.wait(ctx, "delete", key); err != nil {
		return err
	}
	return g.Backend.Delete(ctx, key)
}

func (g *gate) Now(ctx context.Context) (time.Time, error) {
	if err := g.wait(ctx, "now", ""); err != nil {
		return time.Time{}, err
	}
	return g.Backend.Now(ctx)
}

// isPackPut matches the PUT of a pack.
func isPackPut(op, key string) bool {
	return op == "put" && filepath.Ext(key) == ".pack"
}

// reopen makes a source of an existing store (a clone): its live tree
// is the state at head, with inode numbers above those newSource uses.
func reopen(t *testing.T, dir string) *source {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	tr, err := rewind.Reconstruct(j, j.Head())
	if err != nil {
		t.Fatal(err)
	}
	next := uint64(1 << 24)
	live := tree.NewLive(tr, j, next, next+1<<20, func(uint64) error { return nil })
	return &source{dir: dir, j: j, live: live, rw: &rewind.Rewinder{J: j, Live: live, Agents: agents.NewRegistry(nil)}}
}
