// Package objstoretest is the conformance suite of objstore.Backend
// (restic's internal/backend/test): every backend runs the same body,
// file:// and the fake in unit tests, S3 against a real server.
package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
)

// Options tune the suite for a backend.
type Options struct {
	// Workers is how many goroutines race in the conditional-write tests
	// (default 8).
	Workers int
	// ClockSkew is how far Now may be from this machine's clock
	// (default one minute; the servers under test are local).
	ClockSkew time.Duration
}

// Run runs every contract test; newBackend returns an empty backend (a
// fresh namespace) each time it is called.
func Run(t *testing.T, newBackend func(t *testing.T) objstore.Backend) {
	RunWith(t, Options{}, newBackend)
}

// RunWith is Run with options.
func RunWith(t *testing.T, o Options, newBackend func(t *testing.T) objstore.Backend) {
	if o.Workers == 0 {
		o.Workers = 8
	}
	if o.ClockSkew == 0 {
		o.ClockSkew = time.Minute
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, ctx context.Context, b objstore.Backend, o Options)
	}{
		{"InvalidKeys", testInvalidKeys},
		{"Missing", testMissing},
		{"PutGet", testPutGet},
		{"GetRange", testGetRange},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfMatch", testPutIfMatch},
		{"PutIfAbsentRace", testPutIfAbsentRace},
		{"PutIfMatchRace", testPutIfMatchRace},
		{"CASCounter", testCASCounter},
		{"ListOrder", testListOrder},
		{"ListStops", testListStops},
		{"Delete", testDelete},
		{"NowAndString", testNowAndString},
		{"Canceled", testCanceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			tc.fn(t, ctx, newBackend(t), o)
		})
	}
}

func get(t *testing.T, ctx context.Context, b objstore.Backend, key string) ([]byte, objstore.Info) {
	t.Helper()
	data, in, err := b.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return data, in
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func testInvalidKeys(t *testing.T, ctx context.Context, b objstore.Backend, _ Options) {
	for _, key := range []string{"", "/a", "a/", "a//b", "./a", "a/../b", "..", "a b", "a\x00b", "ä", "#lock", "a/#tmp.1"} {
		_, _, err := b.Get(ctx, key)
		wantErr(t, fmt.Sprintf("Get(%q)", key), err, objstore.ErrInvalidKey)
		_, err = b.GetRange(ctx, key, 0, 1)
		wantErr(t, fmt.Sprintf("GetRange(%q)", key), err, objstore.ErrInvalidKey)
		_, err = b.Stat(ctx, key)
		wantErr(t, fmt.Sprintf("Stat(%q)", key), err, objstore.ErrInvalidKey)
		wantErr(t, fmt.Sprintf("Put(%q)", key), b.Put(ctx, key, []byte("x")), objstore.ErrInvalidKey)
		_, err = b.PutIfAbsent(ctx, key, []byte("x"))
		wantErr(t, fmt.Sprintf("PutIfAbsent(%q)", key), err, objstore.ErrInvalidKey)
		_, err = b.PutIfMatch(ctx, key, []byte("x"), "0")
		wantErr(t, fmt.Sprintf("PutIfMatch(%q)", key), err, objstore.ErrInvalidKey)
		wantErr(t, fmt.Sprintf("Delete(%q)", key), b.Delete(ctx, key), objstore.ErrInvalidKey)
	}
	for _, p := range []string{"/", "a//", "../", "a b"} {
		err := b.List(ctx, p, func(objstore.Info) error { return nil })
		wantErr(t, fmt.Sprintf("List(%q)", p), err, objstore.ErrInvalidKey)
	}
	mustList(t, ctx, b, "", nil)
}

func testMissing(t *testing.T, ctx context.Context, b objstore.Backend, _ Options) {
	_, _, err := b.Get(ctx, "no/such")
	wantErr(t, "Get(missing)", err, objstore.ErrNotExist)
	_, err = b.GetRange(ctx, "no/such", 0, 10)
	wantErr(t, "GetRange(missing)", err, objstore.ErrNotExist)
	_, err = b.Stat(ctx, "no/such")
	wantErr(t, "Stat(missing)", err, objstore.ErrNotExist)
	// A key that is a "directory" of other keys is not an object.
	if err := b.Put(ctx, "dir/child", []byte("c")); err != nil {
		t.Fatal(err)
	}
	_, _, err = b.Get(ctx, "dir")
	wantErr(t, "Get(prefix of a key)", err, objstore.ErrNotExist)
	_, err = b.Stat(ctx, "dir")
	wantErr(t, "Stat(prefix of a key)", err, objstore.ErrNotExist)
	_, _, err = b.Get(ctx, "dir/child/x")
	wantErr(t, "Get(below an object)", err, objstore.ErrNotExist)
}

func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(r.Uint32())
	}
	return out
}

func testPutGet(t *testing.T, ctx context.Context, b objstore.Backend, _ Options) {
	for i, data := range [][]byte{{}, []byte("hello"), payload(1, 1<<20+7)} {
		key := "pg/obj" + strconv.Itoa(i)
		if err := b.Put(ctx, key, data); err != nil {
			t.Fatalf("Put(%s): %v", key, err)
		}
		got, in := get(t, ctx, b, key)
		if !bytes.Equal(got, data) {
			t.Fatalf("Get(%s): %d bytes differ from the %d put", key, len(got), len(data))
		}
		if in.Key != key || in.Size != int64(len(data)) || in.ETag == "" {
			t.Fatalf("Get(%s) info = %+v, want key, size %d and an ETag", key, in, len(data))
		}
		st, err := b.Stat(ctx, key)
		if err != nil {
			t.Fatalf("Stat(%s): %v", key, err)
		}
		if st.Key != key || st.Size != in.Size || st.ETag != in.ETag {
			t.Fatalf("Stat(%s) = %+v, Get said %+v", key, st, in)
		}
	}
	// Overwrite: new bytes, new ETag.
	_, before := get(t, ctx, b, "pg/obj1")
	if err := b.Put(ctx, "pg/obj1", []byte("hello, again")); err != nil {
		t.Fatal(err)
	}
	got, after := get(t, ctx, b, "pg/obj1")
	if string(got) != "hello, again" || after.ETag == before.ETag {
		t.Fatalf("overwrite: got %q, ETag %s (was %s)", got, after.ETag, before.ETag)
	}
	// Writers of an immutable object race with the same bytes: all win.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- b.Put(ctx, "pg/same", []byte("same bytes")) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Put of the same bytes: %v", err)
		}
	}
	if got, _ := get(t, ctx, b, "pg/same"); string(got) != "same bytes" {
		t.Fatalf("after concurrent Put: %q", got)
	}
}

func testGetRange(t *testing.T, ctx context.Context, b objstore.Backend, _ Options) {
	data := payload(2, 100_003)
	if err := b.Put(ctx, "r/obj", data); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ off, n int64 }{
		{0, 1}, {0, 100_003}, {17, 4096}, {99_999, 4}, {99_999, 100}, {100_002, 1}, {0, 1 << 30},
	} {
		got, err := b.GetRange(ctx, "r/obj", c.off, c.n)
		if err != nil {
			t.Fatalf("GetRange(%d, %d): %v", c.off, c.n, err)
		}
		want := data[c.off:min(c.off+c.n, int64(len(data)))]
		if !bytes.Equal(got, want) {
			t.Fatalf("GetRange(%d, %d): %d bytes, want %d (or content differs)", c.off, c.n, len(got), len(want))
		}
	}
	for _, c := range []struct{ off, n int64 }{{100_003, 10}, {200_000, 10}, {5, 0}} {
		got, err := b.GetRange(ctx, "r/obj", c.off, c.n)
		if err != nil || len(got) != 0 {
			t.Fatalf("GetRange(%d, %d) = %d bytes, %v; want none, no error", c.off, c.n, len(got), err)
		}
	}
	if _, err := b.GetRange(ctx, "r/obj", -1, 10); err == nil {
		t.Fatal("GetRange with a negative offset: no error")
	}
	if _, err := b.GetRange(ctx, "r/obj", 0, -1); err == nil {
		t.Fatal("GetRange with a negative length: no error")
	}
}

func testPutIfAbsent(t *testing.T, ctx context.Context, b objstore.Backend, _ Options) {
	in, err := b.PutIfAbsent(ctx, "c/HEAD", []byte("one"))
	if err != nil {
		t.Fatalf("PutIfAbsent(new): %v", err)
	}
	_, st := get(t, ctx, b, "c/HEAD")
	if in.ETag == "" || in.ETag != st.ETag || in.Size != 3 {
		t.Fatalf("PutIfAbsent returned %+v, Get says %+v", in, st)
	}
	_, err = b.PutIfAbsent(ctx, "c/HEAD", []byte("two"))
	wantErr(t, "PutIfAbsent(existing)", err, objstore.ErrPrecondition)
	if got, _ := get(t, ctx, b, "c/HEAD"); string(got) != "one" {
		t.Fatalf("a failed PutIfAbsent changed the object to %q", got)
	}
}

func testPutIfMatch(t *testing.T, ctx context.Context, b objstore.Backend, _ Options) {
	_, err := b.PutIfMatch(ctx, "m/HEAD", []byte("x"), objstore.ETagOf([]byte("x")))
	wantErr(t, "PutIfMatch(missing)", err, objstore.ErrPrecondition)
	if _, err := b.Stat(ctx, "m/HEAD"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("a failed PutIfMatch on a missing key created it (Stat: %v)", err)
	}
	v1, err := b.PutIfAbsent(ctx, "m/HEAD", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, stale := range []string{"", "*", "0123456789abcdef0123456789abcdef", v1.ETag + "0"} {
		_, err = b.PutIfMatch(ctx, "m/HEAD", []byte("bad"), stale)
		wantErr(t, fmt.Sprintf("PutIfMatch(etag %q)", stale), err, objstore.ErrPrecondition)
	}
	v2, err := b.PutIfMatch(ctx, "m/HEAD", []byte("v2"), v1.ETag)
	if err != nil {
		t.Fatalf("PutIfMatch(current ETag): %v", err)
	}
	got, st := get(t, ctx, b, "m/HEAD")
	if string(got) != "v2" || st.ETag != v2.ETag || v2.ETag == v1.ETag {
		t.Fatalf("after PutIfMatch: %q, ETag %s; it returned %s (old %s)", got, st.ETag, v2.ETag, v1.ETag)
	}
	_, err = b.PutIfMatch(ctx, "m/HEAD", []byte("v3"), v1.ETag)
	wantErr(t, "PutIfMatch(stale ETag)", err, objstore.ErrPrecondition)
	if got, _ := get(t, ctx, b, "m/HEAD"); string(got) != "v2" {
		t.Fatalf("a failed PutIfMatch changed the object to %q", got)
	}
}

// race runs fn from o.Workers goroutines released together and returns
// how many won; a loser must fail with ErrPrecondition.
func race(t *testing.T, o Options, fn func(i int) error) (winners []int) {
	t.Helper()
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range o.Workers {
		wg.Go(func() {
			<-start
			err := fn(i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, i)
			case !errors.Is(err, objstore.ErrPrecondition):
				t.Errorf("worker %d: %v (want success or ErrPrecondition)", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return winners
}

func testPutIfAbsentRace(t *testing.T, ctx context.Context, b objstore.Backend, o Options) {
	for round := range 3 {
		key := fmt.Sprintf("race/a%d", round)
		winners := race(t, o, func(i int) error {
			_, err := b.PutIfAbsent(ctx, key, []byte("writer "+strconv.Itoa(i)))
			return err
		})
		if len(winners) != 1 {
			t.Fatalf("round %d: %d of %d PutIfAbsent won (%v), want exactly 1", round, len(winners), o.Workers, winners)
		}
		if got, _ := get(t, ctx, b, key); string(got) != "writer "+strconv.Itoa(winners[0]) {
			t.Fatalf("round %d: object holds %q, winner was %d", round, got, winners[0])
		}
	}
}

func testPutIfMatchRace(t *testing.T, ctx context.Context, b objstore.Backend, o Options) {
	base, err := b.PutIfAbsent(ctx, "race/m", []byte("base"))
	if err != nil {
		t.Fatal(err)
	}
	winners := race(t, o, func(i int) error {
		_, err := b.PutIfMatch(ctx, "race/m", []byte("writer "+strconv.Itoa(i)), base.ETag)
		return err
	})
	if len(winners) != 1 {
		t.Fatalf("%d of %d PutIfMatch with the same ETag won (%v), want exactly 1", len(winners), o.Workers, winners)
	}
	if got, _ := get(t, ctx, b, "race/m"); string(got) != "writer "+strconv.Itoa(winners[0]) {
		t.Fatalf("object holds %q, winner was %d", got, winners[0])
	}
}

// testCASCounter: read-modify-write loops by PutIfMatch lose no update.
func testCASCounter(t *testing.T, ctx context.Context, b objstore.Backend, o Options) {
	if _, err := b.PutIfAbsent(ctx, "cas/n", []byte("0")); err != nil {
		t.Fatal(err)
	}
	const incs = 5
	workers := min(o.Workers, 4)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for done := 0; done < incs; {
				data, in, err := b.Get(ctx, "cas/n")
				if err != nil {
					t.Error(err)
					return
				}
				n, _ := strconv.Atoi(string(data))
				_, err = b.PutIfMatch(ctx, "cas/n", []byte(strconv.Itoa(n+1)), in.ETag)
				if err == nil {
					done++
				} else if !errors.Is(err, objstore.ErrPrecondition) {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got, _ := get(t, ctx, b, "cas/n"); string(got) != strconv.Itoa(workers*incs) {
		t.Fatalf("counter = %s after %d×%d compare-and-swap increments", got, workers, incs)
	}
}

// listKeys: no key is also the "directory" of another (file:// cannot
// hold both a and a/b; the remote's layout never needs it).
var listKeys = []string{
	"A", "_x", "a-b", "a.b", "a/b", "a/b-c", "a/b.d/c", "a/b0", "a/c/d", "a0", "b/x/y/z", "ba",
	"packs/00ff.idx", "packs/00ff.pack", "packs/0a.pack", "ws/w/HEAD", "ws/w/seg/1-1-9.seg", "ws/w2/HEAD",
}

func mustList(t *testing.T, ctx context.Context, b objstore.Backend, prefix string, want []string) []objstore.Info {
	t.Helper()
	var got []string
	var infos []objstore.Info
	err := b.List(ctx, prefix, func(in objstore.Info) error {
		got = append(got, in.Key)
		infos = append(infos, in)
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List(%q) =\n  %q\nwant\n  %q", prefix, got, want)
	}
	return infos
}

func testListOrder(t *testing.T, ctx context.Context, b objstore.Backend, _ Options) {
	shuffled := slices.Clone(listKeys)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, k := range shuffled {
		if err := b.Put(ctx, k, []byte(k+" content")); err != nil {
			t.Fatalf("Put(%s): %v", k, err)
		}
	}
	sorted := slices.Sorted(slices.Values(listKeys))
	infos := mustList(t, ctx, b, "", sorted)
	for _, in := range infos {
		if in.Size != int64(len(in.Key+" content")) {
			t.Fatalf("List: %s has size %d, want %d", in.Key, in.Size, len(in.Key+" content"))
		}
	}
	filter := func(p string) []string {
		var out []string
		for _, k := range sorted {
			if len(k) >= len(p) && k[:len(p)] == p {
				out = append(out, k)
			}
		}
		return out
	}
	for _, p := range []string{"a", "a/", "a/b", "a/b.", "a/b.d/", "b", "packs/", "packs/00", "ws/w/", "ws/w", "ws/w/seg/1-", "zz", "zz/"} {
		mustList(t, ctx, b, p, filter(p))
	}
}

func testListStops(t *testing.T, ctx context.Context, b objstore.Backend, _ Options) {
	for _, k := range []string{"s/1", "s/2", "s/3"} {
		if err := b.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("enough")
	var seen []string
	err := b.List(ctx, "s/", func(in objstore.Info) error {
		seen = append(seen, in.Key)
		if len(seen) == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || len(seen) != 2 {
		t.Fatalf("List with fn failing at the 2nd key: err %v, saw %q", err, seen)
	}
}

func testDelete(t *testing.T, ctx context.Context, b objstore.Backend, _ Options) {
	if err := b.Put(ctx, "d/x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "d/y", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "d/x"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := b.Stat(ctx, "d/x")
	wantErr(t, "Stat after Delete", err, objstore.ErrNotExist)
	mustList(t, ctx, b, "d/", []string{"d/y"})
	for _, k := range []string{"d/x", "never/was", "d"} {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatalf("Delete(missing %s): %v", k, err)
		}
	}
	// A deleted key can be created again, conditionally.
	if _, err := b.PutIfAbsent(ctx, "d/x", []byte("again")); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
	mustList(t, ctx, b, "d/", []string{"d/x", "d/y"})
}

func testNowAndString(t *testing.T, ctx context.Context, b objstore.Backend, o Options) {
	now, err := b.Now(ctx)
	if err != nil {
		t.Fatalf("Now: %v", err)
	}
	if d := time.Since(now); d > o.ClockSkew || d < -o.ClockSkew {
		t.Fatalf("Now() = %v, %v from this machine's clock", now, d)
	}
	if b.String() == "" {
		t.Fatal("String() is empty")
	}
}

func testCanceled(t *testing.T, ctx context.Context, b objstore.Backend, _ Options) {
	if err := b.Put(ctx, "x/y", []byte("x")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := b.Get(cctx, "x/y"); err == nil {
		t.Fatal("Get with a canceled context: no error")
	}
	if err := b.Put(cctx, "x/z", []byte("z")); err == nil {
		t.Fatal("Put with a canceled context: no error")
	}
	if _, err := b.PutIfAbsent(cctx, "x/w", []byte("w")); err == nil {
		t.Fatal("PutIfAbsent with a canceled context: no error")
	}
}
