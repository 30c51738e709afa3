package replica

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/rewind"
)

// TestLazyBackends: a lazy clone read on demand and then prefetched
// whole, on every backend (the s3 one a real server: minio-go's ranged
// GET against versitygw).
func TestLazyBackends(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := mk(t)
			src := newSource(t)
			files := map[string][]byte{"a": pattern(7, 2*cas.ChunkSize+3), "b": pattern(8, 100)}
			for n, data := range files {
				src.write(t, n, data)
			}
			src.sync(t)
			src.cut(t, "g")
			if _, err := Push(ctx, src.j, b, "w"); err != nil {
				t.Fatal(err)
			}
			f := &lazyFixture{dir: filepath.Join(t.TempDir(), "clone"), files: files}
			if _, err := CloneLazy(ctx, b, "w", f.dir, ""); err != nil {
				t.Fatal(err)
			}
			f.j = openClone(t, f.dir)
			l, err := OpenLazy(ctx, f.j, f.dir, LazyOptions{Backend: b, Log: zerolog.Nop()})
			if err != nil || l == nil {
				t.Fatalf("open lazy: %v %v", l, err)
			}
			t.Cleanup(func() { _ = l.Close() })
			if got, err := f.read(t, "a"); err != nil || !bytes.Equal(got, files["a"]) {
				t.Fatalf("read a: %v", err)
			}
			if st := l.Stats(); st.DemandRequests != 3 || st.DemandObjects != 3 {
				t.Errorf("reading 3 chunks: %+v", st)
			}
			if err := l.Prefetch(ctx); err != nil {
				t.Fatal(err)
			}
			if IsLazy(f.dir) || l.Stats().PrefetchObjs < 1 {
				t.Errorf("after prefetch: lazy %v, %+v", IsLazy(f.dir), l.Stats())
			}
			if got, err := f.read(t, "b"); err != nil || !bytes.Equal(got, files["b"]) {
				t.Fatalf("read b: %v", err)
			}
		})
	}
}

// TestLazyFsck: fsck of a lazy store counts the chunks on the remote as
// such, not as damage; without the origin (no index naming them) the
// same missing chunks are damage.
func TestLazyFsck(t *testing.T) {
	f := newLazyFixture(t)
	l := f.open(t)
	r, err := rewind.Fsck(f.j)
	if err != nil {
		t.Fatal(err)
	}
	if r.Damaged() || r.OnRemote < 8 {
		t.Errorf("fsck of a lazy store: damaged %v, %d on the remote; want clean with the chunks on the remote", r.Damaged(), r.OnRemote)
	}
	if n := ranged(f.fake); n != 0 {
		t.Errorf("fsck fetched %d objects", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err = rewind.Fsck(f.j); err != nil || !r.Damaged() || r.OnRemote != 0 {
		t.Errorf("fsck without the lazy origin: %v, damaged %v; want the missing chunks reported", err, r != nil && r.Damaged())
	}
}

// TestLazyCloneTargets: a lazy clone at every kind of target (a
// generation, a seq between generations, one on an abandoned branch,
// head) reads, through its origin, the same states as the source, every
// retained seq named alike, fsck clean (chunks on the remote are not
// damage).
func TestLazyCloneTargets(t *testing.T) {
	ctx := context.Background()
	s := newSource(t)
	at := history(t, s)
	b := objstorefake.New(t.Name())
	if _, err := Push(ctx, s.j, b, "proj"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target string
		want   uint64
	}{
		{"g3", at["g-second"]},
		{strconv.FormatUint(at["mid"], 10), at["mid"]},
		{strconv.FormatUint(at["abandoned"], 10), at["abandoned"]},
		{"", at["head"]},
	} {
		t.Run("at="+c.target, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			res, err := CloneLazy(ctx, b, "proj", dir, c.target)
			if err != nil {
				t.Fatal(err)
			}
			if res.Target != c.want || !res.Lazy || res.RemoteObjects == 0 {
				t.Fatalf("lazy clone: %+v; want target %d with objects on the remote", res, c.want)
			}
			cj := openClone(t, dir)
			l, err := OpenLazy(ctx, cj, dir, LazyOptions{Backend: b, Log: zerolog.Nop()})
			if err != nil || l == nil {
				t.Fatalf("open lazy: %v %v", l, err)
			}
			t.Cleanup(func() { _ = l.Close() })
			checkClone(t, s.j, at, cj, c.want)
		})
	}
}

// TestLazyFetch: fetch into a lazy clone brings the new records and
// leaves the data objects they add on the remote too (lazyextra.go), as
// well as those still there (the store stays lazy); reads fetch both.
func TestLazyFetch(t *testing.T) {
	f := newLazyFixture(t)
	l := f.open(t)
	before := l.Stats().RemoteObjects
	// The clone's count (from origin.json, no pass: LazyOptions.Fresh)
	// is what a counting open finds.
	if st := l.Stats(); st.RemoteObjects != f.res.RemoteObjects || st.RemoteBytes != f.res.RemoteBytes {
		t.Fatalf("clone said %d objects (%d bytes) on the remote, an open counts %d (%d)", f.res.RemoteObjects, f.res.RemoteBytes, st.RemoteObjects, st.RemoteBytes)
	}
	f.files["new"] = pattern(99, cas.ChunkSize+5)
	f.src.write(t, "new", f.files["new"])
	f.src.sync(t)
	f.src.cut(t, "g2")
	ctx := context.Background()
	if _, err := Push(ctx, f.src.j, f.fake, "w"); err != nil {
		t.Fatal(err)
	}
	f.fake.Reset()
	if _, err := Fetch(ctx, f.j, f.fake, "w"); err != nil {
		t.Fatal(err)
	}
	if n := ranged(f.fake); n != 0 || l.Stats().RemoteObjects != before+2 || !IsLazy(f.dir) {
		t.Errorf("fetch into a lazy clone: %d ranged GETs, %d objects on the remote (was %d, and the new file's 2 chunks), lazy %v; want them left there",
			n, l.Stats().RemoteObjects, before, IsLazy(f.dir))
	}
	if ok, _ := f.j.Objects().Has(f.chunks(t, "d/e")[0]); ok {
		t.Error("fetch brought an object the lazy clone left on the remote")
	}
	// The pack of the new file's chunks is pinned with the others.
	pins, err := readPins(ctx, f.fake)
	if err != nil || len(pins) != 1 {
		t.Fatalf("pins: %+v, %v", pins, err)
	}
	for _, ch := range f.chunks(t, "new") {
		le, ok, err := l.find(ch)
		if err != nil || !ok {
			t.Fatalf("new's chunk %s: not in the lazy store's entries (%v)", ch, err)
		}
		pk, _ := l.packKey(le.pack)
		if id := strings.TrimSuffix(strings.TrimPrefix(pk, "packs/"), ".pack"); !slices.Contains(pins[0].Packs, id) {
			t.Errorf("%s (new's chunk) is not pinned: pin %v", pk, pins[0].Packs)
		}
	}
	for _, name := range []string{"new", "a"} {
		if got, err := f.read(t, name); err != nil || !bytes.Equal(got, f.files[name]) {
			t.Errorf("%s after the fetch: %v", name, err)
		}
	}
}
