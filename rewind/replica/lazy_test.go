package replica

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/journal"
)

// lazyFixture is a workspace pushed to a fake remote and cloned lazily.
type lazyFixture struct {
	fake  *objstorefake.Backend
	src   *source
	dir   string
	j     *journal.Journal
	files map[string][]byte
	res   *CloneResult
}

func newLazyFixture(t *testing.T) *lazyFixture {
	t.Helper()
	ctx := context.Background()
	f := &lazyFixture{fake: objstorefake.New(t.Name()), src: newSource(t), files: map[string][]byte{}}
	f.src.mkdir(t, "d")
	for i, name := range []string{"a", "b", "c", "d/e", "d/f"} {
		f.files[name] = pattern(byte(i+1), []int{3*cas.ChunkSize + 100, 10, cas.ChunkSize + 7, 5000, 2 * cas.ChunkSize}[i])
		f.src.write(t, name, f.files[name])
	}
	// A git directory: its files come with the clone, but pack files.
	f.src.mkdir(t, ".git")
	f.src.mkdir(t, ".git/objects")
	for i, name := range []string{".git/index", ".git/HEAD", ".git/objects/p.pack"} {
		f.files[name] = pattern(byte(40+i), 3000+i)
		f.src.write(t, name, f.files[name])
	}
	f.src.sync(t)
	f.src.cut(t, "g")
	if _, err := Push(ctx, f.src.j, f.fake, "w"); err != nil {
		t.Fatal(err)
	}
	var packGets []string
	f.fake.Reset()
	f.fake.SetHook(func(op objstorefake.Op, key string) error {
		if op == objstorefake.OpGet && strings.HasSuffix(key, ".pack") {
			packGets = append(packGets, key)
		}
		return nil
	})
	f.dir = filepath.Join(t.TempDir(), "clone")
	res, err := CloneLazy(ctx, f.fake, "w", f.dir, "")
	f.fake.SetHook(nil)
	if err != nil {
		t.Fatal(err)
	}
	f.res = res
	// No data pack was fetched whole; one ranged GET brought the .git
	// files (next to each other in their pack).
	if n := f.fake.Stats().Requests[objstorefake.OpGetRange]; n != 1 {
		t.Errorf("lazy clone made %d ranged GETs, want 1 (the .git files)", n)
	}
	for _, k := range packGets {
		id := strings.TrimSuffix(strings.TrimPrefix(k, "packs/"), ".pack")
		data, _, err := f.fake.Get(ctx, IndexKey(id))
		if err != nil {
			t.Fatal(err)
		}
		if x, err := DecodeIndex(k, data); err != nil || x.Kind != KindTree {
			t.Errorf("lazy clone fetched %s (kind %q, %v): not a tree pack", k, x.Kind, err)
		}
	}
	if !res.Lazy || res.RemoteObjects < 8 || !IsLazy(f.dir) {
		t.Fatalf("clone result %+v, lazy %v: want at least 8 objects left on the remote", res, IsLazy(f.dir))
	}
	f.j = openClone(t, f.dir)
	for name, local := range map[string]bool{".git/index": true, ".git/HEAD": true, ".git/objects/p.pack": false, "d/e": false} {
		if ok, err := f.j.Objects().Has(f.chunks(t, name)[0]); ok != local || err != nil {
			t.Errorf("%s: stored by the lazy clone: %v (%v), want %v", name, ok, err, local)
		}
	}
	return f
}

func (f *lazyFixture) open(t *testing.T) *Lazy {
	t.Helper()
	l, err := OpenLazy(context.Background(), f.j, f.dir, LazyOptions{Backend: f.fake, Log: zerolog.Nop()})
	if err != nil || l == nil {
		t.Fatalf("open lazy: %v, %v", l, err)
	}
	l.FailFor = 0
	t.Cleanup(func() { _ = l.Close() })
	f.fake.Reset()
	return l
}

// chunks returns the chunk hashes of the file at path in the clone's
// live tree (inode objects are local: reading them fetches nothing).
func (f *lazyFixture) chunks(t *testing.T, path string) []cas.Hash {
	t.Helper()
	h := stateRoot(t, f.j, f.j.Head())
	for _, name := range splitPath(path) {
		data, err := f.j.Objects().Get(h)
		if err != nil {
			t.Fatal(err)
		}
		in, err := cas.DecodeInode(data)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range in.Entries {
			if e.Name == name {
				h, found = e.Object, true
			}
		}
		if !found {
			t.Fatalf("%s: no %s", path, name)
		}
	}
	data, err := f.j.Objects().Get(h)
	if err != nil {
		t.Fatal(err)
	}
	in, err := cas.DecodeInode(data)
	if err != nil {
		t.Fatal(err)
	}
	return in.Chunks
}

// read reads the file at path through the store, chunk by chunk.
func (f *lazyFixture) read(t *testing.T, path string) ([]byte, error) {
	t.Helper()
	var out []byte
	for _, h := range f.chunks(t, path) {
		b, err := f.j.Objects().Get(h)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

func ranged(fake *objstorefake.Backend) int { return fake.Stats().Requests[objstorefake.OpGetRange] }

func TestLazyReadOnMiss(t *testing.T) {
	f := newLazyFixture(t)
	l := f.open(t)
	if n := f.fake.Stats().Requests; len(n) != 0 {
		// Stats counts every op; none may have run yet.
		for op, c := range n {
			if c != 0 {
				t.Errorf("open made %d %s requests", c, op)
			}
		}
	}
	// One file of one chunk: one ranged GET of that object.
	got, err := f.read(t, "d/e")
	if err != nil || !bytes.Equal(got, f.files["d/e"]) {
		t.Fatalf("read d/e: %v (equal %v)", err, bytes.Equal(got, f.files["d/e"]))
	}
	if n := ranged(f.fake); n != 1 || len(f.fake.Stats().Requests) != 1 {
		t.Fatalf("reading a one-chunk file made %v requests, want one ranged GET", f.fake.Stats().Requests)
	}
	if st := l.Stats(); st.DemandRequests != 1 || st.DemandObjects != 1 {
		t.Errorf("stats %+v: want one demand request and object", st)
	}
	// Again: local now, no request. Also after the cache is bypassed.
	if _, err := f.read(t, "d/e"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.j.Objects().GetOnce(f.chunks(t, "d/e")[0]); err != nil {
		t.Fatal(err)
	}
	if ok, _ := f.j.Objects().Has(f.chunks(t, "d/e")[0]); !ok {
		t.Error("a fetched object is not stored")
	}
	if n := ranged(f.fake); n != 1 {
		t.Errorf("a second read made %d more ranged GETs", n-1)
	}
	// A file of four chunks: four ranged GETs, one each.
	got, err = f.read(t, "a")
	if err != nil || !bytes.Equal(got, f.files["a"]) {
		t.Fatalf("read a: %v", err)
	}
	if n := ranged(f.fake); n != 5 {
		t.Errorf("reading a 4-chunk file made %d ranged GETs, want 4", n-1)
	}
	// An object no index names is still not found (damage, not a fetch).
	if _, err := f.j.Objects().Get(cas.Sum([]byte("nowhere"))); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("unknown object: %v, want ErrNotFound", err)
	}
}

func TestLazyConcurrentReadersShareOneGet(t *testing.T) {
	f := newLazyFixture(t)
	l := f.open(t)
	h := f.chunks(t, "b")[0]
	f.fake.Pause()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	datas := make([][]byte, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			datas[i], errs[i] = f.j.Objects().GetOnce(h)
		}()
		// Wait until the first holds the GET and the second has joined.
		for deadline := time.Now().Add(10 * time.Second); ; {
			if i == 0 && ranged(f.fake) == 1 || i == 1 && l.joined.Load() == 1 {
				break
			}
			if time.Now().After(deadline) {
				f.fake.Resume()
				t.Fatalf("reader %d never reached the fetch", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	f.fake.Resume()
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil || !bytes.Equal(datas[i], f.files["b"]) {
			t.Errorf("reader %d: %v", i, errs[i])
		}
	}
	if n := ranged(f.fake); n != 1 {
		t.Errorf("two concurrent readers made %d ranged GETs, want 1", n)
	}
}

func TestLazyDamagedObject(t *testing.T) {
	f := newLazyFixture(t)
	f.open(t)
	ctx := context.Background()
	h := f.chunks(t, "c")[1]
	// Flip a byte of that object in its pack on the remote.
	le, ok, err := mustLazyIndex(t, f.dir).find(h)
	if err != nil || !ok {
		t.Fatalf("lazy index: %v %v", ok, err)
	}
	meta, err := readLazyMeta(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	key := PackKey(meta.Packs[le.pack])
	pack, _, err := f.fake.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	pack[le.e.Off+uint64(le.e.Stored)/2] ^= 0x40
	if err := f.fake.Put(ctx, key, pack); err != nil {
		t.Fatal(err)
	}
	data, err := f.j.Objects().Get(h)
	if !errors.Is(err, cas.ErrCorrupt) || data != nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("damaged object: %d bytes, %v; want ErrCorrupt naming %s", len(data), err, key)
	}
	if errors.Is(err, cas.ErrNotFound) {
		t.Errorf("damage reported as not found (the live tree would retry under its lock): %v", err)
	}
	if ok, _ := f.j.Objects().Has(h); ok {
		t.Error("a damaged object was stored")
	}
}

func TestLazyRemoteDown(t *testing.T) {
	f := newLazyFixture(t)
	f.open(t)
	f.fake.FailNth(objstorefake.OpGetRange, 1, nil)
	_, err := f.read(t, "b")
	if err == nil || errors.Is(err, cas.ErrNotFound) || !errors.Is(err, cas.ErrFetch) || !strings.Contains(err.Error(), f.fake.String()) {
		t.Fatalf("remote down: %v; want ErrFetch naming %s, not ErrNotFound", err, f.fake.String())
	}
	if ok, _ := f.j.Objects().Has(f.chunks(t, "b")[0]); ok {
		t.Error("a failed fetch stored something")
	}
	got, err := f.read(t, "b")
	if err != nil || !bytes.Equal(got, f.files["b"]) {
		t.Fatalf("after the remote came back: %v", err)
	}
}

func TestLazyFailedFetchAnswersAtOnce(t *testing.T) {
	f := newLazyFixture(t)
	l := f.open(t)
	l.FailFor = time.Hour
	f.fake.FailNth(objstorefake.OpGetRange, 1, nil)
	if _, err := f.read(t, "b"); err == nil {
		t.Fatal("read with the remote down succeeded")
	}
	if _, err := f.read(t, "b"); err == nil {
		t.Fatal("second read succeeded")
	}
	if n := ranged(f.fake); n != 1 {
		t.Errorf("a retry within FailFor made %d requests, want none", n-1)
	}
}

func TestLazyPrefetchCompletes(t *testing.T) {
	f := newLazyFixture(t)
	l := f.open(t)
	if _, err := f.read(t, "d/e"); err != nil { // one fetched on demand first
		t.Fatal(err)
	}
	before := l.Stats()
	if err := l.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	if st.Lazy || st.RemoteObjects != 0 || IsLazy(f.dir) || f.j.Objects().Lazy() {
		t.Fatalf("after prefetch: stats %+v, lazy dir %v, fetcher %v", st, IsLazy(f.dir), f.j.Objects().Lazy())
	}
	if st.PrefetchObjs != before.RemoteObjects || st.PrefetchReqs < 1 || st.PrefetchReqs >= st.PrefetchObjs {
		t.Errorf("prefetch fetched %d objects in %d requests; %d were left (want them coalesced)", st.PrefetchObjs, st.PrefetchReqs, before.RemoteObjects)
	}
	// Everything is local: with the remote failing every request, every
	// file reads.
	f.fake.Reset()
	f.fake.Pause()
	defer f.fake.Resume()
	for name, want := range f.files {
		if got, err := f.read(t, name); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after prefetch: %v", name, err)
		}
	}
	if n := len(f.fake.Stats().Requests); n != 0 {
		t.Errorf("reads after prefetch made requests: %v", f.fake.Stats().Requests)
	}
	// A reopen finds nothing lazy.
	if l2, err := OpenLazy(context.Background(), f.j, f.dir, LazyOptions{Backend: f.fake}); l2 != nil || err != nil {
		t.Errorf("reopen after prefetch: %v, %v", l2, err)
	}
}

// A demand read while a prefetch batch is in flight (held at the
// server) does not wait for it: it issues its own GET and returns.
func TestLazyDemandNotBehindPrefetch(t *testing.T) {
	f := newLazyFixture(t)
	l := f.open(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	f.fake.SetHook(func(op objstorefake.Op, key string) error {
		if op == objstorefake.OpGetRange {
			first := false
			once.Do(func() { first = true })
			if first { // the prefetcher's batch
				close(entered)
				<-release
			}
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- l.Prefetch(context.Background()) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the prefetcher made no request")
	}
	type result struct {
		data []byte
		err  error
	}
	read := make(chan result, 1)
	chunks := f.chunks(t, "c")
	go func() { // while the batch is held
		var out []byte
		for _, h := range chunks {
			b, err := f.j.Objects().Get(h)
			if err != nil {
				read <- result{nil, err}
				return
			}
			out = append(out, b...)
		}
		read <- result{out, nil}
	}()
	select {
	case r := <-read:
		if r.err != nil || !bytes.Equal(r.data, f.files["c"]) {
			t.Errorf("demand read during a prefetch batch: %v", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the demand read waited behind the prefetch batch")
		close(release)
		<-read
		<-done
		return
	}
	if st := l.Stats(); st.DemandRequests != 2 || st.PrefetchObjs != 0 {
		t.Errorf("stats %+v: want the demand read's 2 requests done before the prefetch batch", st)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if IsLazy(f.dir) {
		t.Error("still lazy after the prefetch")
	}
}

// While a demand fetch is in flight the prefetcher sends nothing; it
// goes on once the demand fetch is done.
func TestLazyPrefetchYields(t *testing.T) {
	f := newLazyFixture(t)
	l := f.open(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	f.fake.SetHook(func(op objstorefake.Op, key string) error {
		if op == objstorefake.OpGetRange {
			first := false
			once.Do(func() { first = true })
			if first { // the demand read's
				close(entered)
				<-release
			}
		}
		return nil
	})
	read := make(chan error, 1)
	go func() {
		_, err := f.read(t, "b")
		read <- err
	}()
	<-entered
	done := make(chan error, 1)
	go func() { done <- l.Prefetch(context.Background()) }()
	for deadline := time.Now().Add(10 * time.Second); l.yielded.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("the prefetcher did not wait for the demand fetch")
		}
	}
	if n := ranged(f.fake); n != 1 {
		t.Errorf("%d ranged GETs while a demand fetch was in flight, want only its own", n)
	}
	close(release)
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if IsLazy(f.dir) {
		t.Error("still lazy after the prefetch")
	}
}

// A push from a lazy clone (as a new workspace of the same remote)
// sends no object and fetches none: the remote holds them.
func TestLazyPush(t *testing.T) {
	f := newLazyFixture(t)
	f.open(t)
	res, err := Push(context.Background(), f.j, f.fake, "w2")
	if err != nil {
		t.Fatal(err)
	}
	if res.Objects != 0 || ranged(f.fake) != 0 || !IsLazy(f.dir) {
		t.Errorf("push from a lazy clone: %+v, %d ranged GETs, lazy %v; want no object sent or fetched", res, ranged(f.fake), IsLazy(f.dir))
	}
}

func mustLazyIndex(t *testing.T, dir string) *entryFile {
	t.Helper()
	ef, err := openEntries(filepath.Join(LazyPath(dir), lazyIndex))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ef.f.Close() })
	return ef
}

var _ objstore.Backend = (*objstorefake.Backend)(nil)
