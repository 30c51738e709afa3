package replica

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/rewind"
)

// TestFollower: a follower of a clone tracks what its source pushes
// (writes, a rewind of the writer's, a new generation): each time the
// live tree's root becomes the source's state at the remote's head, and
// the follower's journal holds exactly the remote's seqs (nothing of
// its own, so a plain Fetch afterwards finds it up to date). With the
// remote failing it backs off and says so, and catches up after. A
// follower store refuses to push, writing nothing to the remote.
func TestFollower(t *testing.T) {
	for name, mk := range backends(t) {
		if name == "dir" {
			continue // the fake stands for it: same code, and it injects faults
		}
		t.Run(name, func(t *testing.T) {
			b := mk(t)
			fake, _ := b.(*objstorefake.Backend)
			testFollower(t, b, fake)
		})
	}
}

// testFollower is TestFollower on b; with fake (b itself) also the
// outage and the count of index reads.
func testFollower(t *testing.T, b objstore.Backend, fake *objstorefake.Backend) {
	ctx := context.Background()
	s := newSource(t)
	s.write(t, "a.txt", pattern(1, 70000))
	s.mkdir(t, "d")
	s.write(t, "d/b.txt", []byte("bee\n"))
	s.cut(t, "one")
	if _, err := Push(ctx, s.j, b, "w"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := CloneLazy(ctx, b, "w", dir, ""); err != nil {
		t.Fatal(err)
	}
	cj := openClone(t, dir)
	lz, err := OpenLazy(ctx, cj, dir, LazyOptions{Backend: b, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lz.Close() })
	cfg := FollowConfig{Source: "origin#w", URL: b.String(), WS: "w"}
	if err := SetFollow(cj, cfg); err != nil {
		t.Fatal(err)
	}
	tr, err := rewind.Reconstruct(cj, cj.Head())
	if err != nil {
		t.Fatal(err)
	}
	live := tree.NewLive(tr, cj, 1<<30, 1<<30, func(uint64) error { return nil })
	rw := &rewind.Rewinder{J: cj, Live: live, Agents: agents.NewRegistry(nil)}
	// Every request the follower makes from here, by key; the remote
	// fails while down is set.
	var down atomic.Bool
	var reqMu sync.Mutex
	idxGets := map[string]int{}
	errDown := errors.New("connection refused (test)")
	if fake != nil {
		fake.SetHook(func(op objstorefake.Op, key string) error {
			if down.Load() {
				return errDown
			}
			if op == objstorefake.OpGet && strings.HasSuffix(key, ".idx") {
				reqMu.Lock()
				idxGets[key]++
				reqMu.Unlock()
			}
			return nil
		})
	}
	var advances atomic.Int64
	f, err := StartFollower(cj, b, cfg, FollowOptions{Every: 10 * time.Millisecond, MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond, Served: cj.Head(), Log: zerolog.Nop(),
		Advance: func(head uint64) error {
			advances.Add(1)
			_, err := rw.Advance(head)
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)

	// caughtUp waits until the follower serves the source's head and
	// checks the live tree against the source's state there.
	caughtUp := func(what string) {
		t.Helper()
		want := s.j.Head()
		deadline := time.Now().Add(20 * time.Second)
		for f.Status().Local < want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the follower never served seq %d: %+v", what, want, f.Status())
			}
			time.Sleep(5 * time.Millisecond)
		}
		st := f.Status()
		if st.Local != want || st.Remote != want || st.LagRecords != 0 || st.State != FollowFollowing {
			t.Fatalf("%s: status %+v, want following at seq %d", what, st, want)
		}
		if cj.Head() != want {
			t.Fatalf("%s: the follower's journal is at seq %d, the remote's HEAD at %d", what, cj.Head(), want)
		}
		live.Lock()
		root, _, err := live.Tree().Root()
		live.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if w := stateRoot(t, s.j, want); root != w {
			t.Fatalf("%s: the follower serves root %s, the source's state at seq %d is %s", what, root.Short(), want, w.Short())
		}
	}

	remote0 := lz.Stats().RemoteObjects
	s.write(t, "a.txt", pattern(2, 90000))
	s.unlink(t, "d/b.txt")
	s.mkdir(t, "e")
	s.write(t, "e/c.txt", []byte("sea\n"))
	s.sync(t)
	if _, err := Push(ctx, s.j, b, "w"); err != nil {
		t.Fatal(err)
	}
	caughtUp("writes")
	if advances.Load() == 0 {
		t.Fatal("the follower never advanced")
	}
	// The new data stayed on the remote (lazy, as the clone's): a read
	// fetches it on demand.
	if st := lz.Stats(); st.RemoteObjects <= remote0 || st.DemandObjects != 0 {
		t.Fatalf("after the follow: %d objects on the remote (%d before), %d fetched on demand", st.RemoteObjects, remote0, st.DemandObjects)
	}
	sameTree(t, export(t, s.j, s.j.Head()), export(t, cj, cj.Head()))
	if st := lz.Stats(); st.DemandObjects == 0 {
		t.Fatalf("reading the followed state fetched nothing on demand: %+v", st)
	}

	// The writer rewinds (a reset record of its own) and cuts.
	at := s.j.Head()
	s.write(t, "gone.txt", []byte("abandoned\n"))
	s.sync(t)
	if _, err := s.rw.Rewind(at, false); err != nil {
		t.Fatal(err)
	}
	s.cut(t, "two")
	if _, err := Push(ctx, s.j, b, "w"); err != nil {
		t.Fatal(err)
	}
	caughtUp("a rewind on the writer")

	// The remote fails: backing off, with the error; then it catches up.
	if fake != nil {
		down.Store(true)
		deadline := time.Now().Add(10 * time.Second)
		for st := f.Status(); st.State != FollowDown || st.LastError == ""; st = f.Status() {
			if time.Now().After(deadline) {
				t.Fatalf("the follower never backed off: %+v", st)
			}
			time.Sleep(5 * time.Millisecond)
		}
		down.Store(false)
	}
	s.write(t, "later.txt", []byte("after the outage\n"))
	s.sync(t)
	if _, err := Push(ctx, s.j, b, "w"); err != nil {
		t.Fatal(err)
	}
	caughtUp("after the outage")

	// Nothing of its own: the follower's store is a prefix of the remote.
	f.Stop()
	// The objects left on the remote are known to a new open, and the
	// prefetcher fetches them all: the store becomes whole.
	left := lz.Stats().RemoteObjects
	if err := lz.Close(); err != nil {
		t.Fatal(err)
	}
	if lz, err = OpenLazy(ctx, cj, dir, LazyOptions{Backend: b, Log: zerolog.Nop()}); err != nil {
		t.Fatal(err)
	}
	if got := lz.Stats().RemoteObjects; got != left || left == 0 {
		t.Fatalf("reopened: %d objects on the remote, %d before", got, left)
	}
	if err := lz.Prefetch(ctx); err != nil || !lz.Complete() || IsLazy(dir) {
		t.Fatalf("prefetch: %v; complete %v, lazy %v", err, lz.Complete(), IsLazy(dir))
	}
	sameTree(t, export(t, s.j, s.j.Head()), export(t, cj, cj.Head()))
	reqMu.Lock()
	for k, n := range idxGets { // the source's pushes read none
		if n > 1 {
			t.Errorf("the follower read %s %d times (an index file never changes)", k, n)
		}
	}
	reqMu.Unlock()
	if res, err := Fetch(ctx, cj, b, "w"); err != nil || res.From != 0 {
		t.Fatalf("fetch after following: %+v, %v (want nothing new)", res, err)
	}
	keys := remoteKeys(t, b)
	if _, err := PushWith(ctx, cj, b, "w", Options{}); !errors.Is(err, ErrFollower) {
		t.Fatalf("push from a follower store: %v, want ErrFollower", err)
	}
	if _, err := PushWith(ctx, cj, b, "other", Options{}); !errors.Is(err, ErrFollower) {
		t.Fatalf("push --ws other from a follower store: %v, want ErrFollower", err)
	}
	if got := remoteKeys(t, b); !slices.Equal(got, keys) {
		t.Fatalf("a refused push wrote to the remote: %d keys, was %d", len(got), len(keys))
	}
}

func remoteKeys(t *testing.T, b objstore.Backend) []string {
	t.Helper()
	var keys []string
	err := b.List(context.Background(), "", func(i objstore.Info) error {
		keys = append(keys, i.Key+" "+i.ETag)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// TestFollowerStops: when the remote workspace is made again (emptied and
// pushed to by another store: another history under the same name), the
// follower stops with the reason, writes nothing to its store and keeps
// serving what it served.
func TestFollowerStops(t *testing.T) {
	ctx := context.Background()
	b := objstorefake.New(t.Name())
	s := newSource(t)
	s.write(t, "a.txt", []byte("first history\n"))
	s.cut(t, "one")
	if _, err := Push(ctx, s.j, b, "w"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := Clone(ctx, b, "w", dir, ""); err != nil {
		t.Fatal(err)
	}
	cj := openClone(t, dir)
	cfg := FollowConfig{Source: "origin#w", URL: b.String(), WS: "w"}
	if err := SetFollow(cj, cfg); err != nil {
		t.Fatal(err)
	}
	held := cj.Head()
	var advanced atomic.Int64
	f, err := StartFollower(cj, b, cfg, FollowOptions{Every: 10 * time.Millisecond, MinBackoff: 10 * time.Millisecond,
		Served: held, Log: zerolog.Nop(), Advance: func(uint64) error { advanced.Add(1); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	for _, k := range b.Keys() {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	o := newSource(t)
	o.write(t, "b.txt", []byte("another history\n"))
	for range 5 {
		o.cut(t, "more")
	}
	if _, err := Push(ctx, o.j, b, "w"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	st := f.Status()
	for ; st.State != FollowStopped; st = f.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("the follower never stopped: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st.Reason == "" || st.Local != held || cj.Head() != held || advanced.Load() != 0 {
		t.Fatalf("stopped: %+v; store head %d (held %d), %d advances", st, cj.Head(), held, advanced.Load())
	}
	t.Logf("stopped: %s", st.Reason)
}
