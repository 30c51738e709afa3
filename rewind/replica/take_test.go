package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
)

// TestTakeoverOfStoppedPusher: a push stops dead (every request of it,
// renewal included, hangs: a stopped process) after taking the lease.
// Take waits for the lease to expire by the server's clock, and takes
// the workspace at the seq HEAD covers: the clone holds exactly that
// prefix. When the stopped push resumes, it is deposed and nothing it
// writes is reachable; its next push is refused as deposed, naming the
// seq after which its records are not on the remote. The taker's push
// continues the workspace in epoch 2, and a segment of epoch 1 past the
// takeover (what the deposed push may leave) is never read.
func TestTakeoverOfStoppedPusher(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := open(t)
			o := Options{TTL: 2 * time.Second}
			a := newSource(t)
			a.write(t, "a", pattern(1, 4000))
			a.cut(t, "one")
			if _, err := PushWith(ctx, a.j, b, "w", o); err != nil {
				t.Fatal(err)
			}
			s1, _ := readHead(t, b, "w")
			a.write(t, "later", pattern(2, 6000))
			a.cut(t, "two")
			g := newGate(b, isPackPut, nil) // from the first pack PUT on, everything hangs
			t.Cleanup(g.open)
			errc := pushAsync(a, g, "w", o)
			waitBlocked(t, g)

			dir := filepath.Join(t.TempDir(), "db")
			waits := 0
			res, err := Take(ctx, b, "w", dir, TakeOptions{Poll: 100 * time.Millisecond,
				Wait: func(h Holder, _ time.Duration) {
					if h.Pid == os.Getpid() {
						waits++
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			if waits == 0 || res.Epoch != 2 || res.Head != s1.Seq {
				t.Fatalf("take: %+v after %d waits; want it to wait for the lease, then epoch 2 at seq %d", res, waits, s1.Seq)
			}
			c := reopen(t, dir)
			if c.j.Head() != s1.Seq || stateRoot(t, c.j, s1.Seq) != stateRoot(t, a.j, s1.Seq) {
				t.Fatalf("the taker holds seqs through %d; want exactly the prefix through %d", c.j.Head(), s1.Seq)
			}
			taken, takenData := readHead(t, b, "w")
			if len(taken.Epochs) != 2 || taken.Epochs[1] != (Epoch{Epoch: 2, First: s1.Seq + 1}) {
				t.Fatalf("HEAD after the takeover: epochs %+v", taken.Epochs)
			}

			g.open() // SIGCONT
			err = waitErr(t, errc)
			if !errors.Is(err, ErrDeposed) {
				t.Fatalf("the resumed push = %v, want deposed", err)
			}
			if _, data := readHead(t, b, "w"); string(data) != string(takenData) {
				t.Fatalf("the deposed push changed HEAD: %s", data)
			}
			want := fmt.Sprintf("deposed: workspace w was taken over at epoch 2 by %s; your records after seq %d are not on the remote", taken.Holder.Host, s1.Seq)
			if _, err := PushWith(ctx, a.j, b, "w", o); !errors.Is(err, ErrDeposed) || !strings.Contains(err.Error(), want) {
				t.Fatalf("the deposed store's next push = %v, want %q", err, want)
			}
			// As the line says: push --ws NEW keeps its records.
			if res, err := PushWith(ctx, a.j, b, "kept", o); err != nil || res.Through != a.j.Durable() {
				t.Fatalf("the deposed store's push as a new workspace: %+v, %v", res, err)
			}

			c.write(t, "taker", pattern(3, 3000))
			c.cut(t, "three")
			pres, err := PushWith(ctx, c.j, b, "w", o)
			if err != nil {
				t.Fatal(err)
			}
			if pres.From != s1.Seq+1 || pres.Through != c.j.Durable() {
				t.Fatalf("the taker's push: %+v; want seqs %d-%d", pres, s1.Seq+1, c.j.Durable())
			}
			// What a deposed push may leave: a segment of epoch 1 past the
			// takeover, listed before epoch 2's. Readers never read it.
			if err := b.Put(ctx, SegmentKey("w", 1, s1.Seq+1, pres.Through), []byte("deposed")); err != nil {
				t.Fatal(err)
			}
			dir2 := filepath.Join(t.TempDir(), "db")
			if _, err := Clone(ctx, b, "w", dir2, ""); err != nil {
				t.Fatal(err)
			}
			d := openClone(t, dir2)
			if d.Head() != c.j.Head() || stateRoot(t, d, d.Head()) != stateRoot(t, c.j, c.j.Head()) {
				t.Fatalf("a clone after the takeover ends at %d, want the taker's %d and its state", d.Head(), c.j.Head())
			}
			if stateRoot(t, d, s1.Seq) != stateRoot(t, a.j, s1.Seq) {
				t.Fatal("a clone after the takeover differs from the deposed writer's history before it")
			}
		})
	}
}

// TestTakeLosesRace: if HEAD changes between the clone's read and the
// takeover (the holder came back and renewed), the takeover's
// PutIfMatch with the ETag the clone read fails: nothing is taken,
// HEAD is the holder's, and no store is left.
func TestTakeLosesRace(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("takerace")
	s := newSource(t)
	s.write(t, "a", []byte("a"))
	s.sync(t)
	if _, err := Push(ctx, s.j, fake, "w"); err != nil {
		t.Fatal(err)
	}
	var renewed []byte
	rec := &recorder{Backend: fake}
	rec.before = func(op, key string) {
		if op != "list" || key != "packs/" || renewed != nil { // after the clone read HEAD

			return
		}
		h, _ := readHead(t, fake, "w")
		_, info, err := fake.Get(ctx, HeadKey("w"))
		if err != nil {
			t.Error(err)
			return
		}
		h.Expires = time.Now().Add(time.Hour).UTC().Round(0)
		renewed = h.Encode()
		if _, err := fake.PutIfMatch(ctx, HeadKey("w"), renewed, info.ETag); err != nil {
			t.Error(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := Take(ctx, rec, "w", dir, TakeOptions{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("take that lost the race = %v, want ErrLocked", err)
	}
	if _, data := readHead(t, fake, "w"); string(data) != string(renewed) {
		t.Fatalf("HEAD after the lost takeover: %s; want the holder's", data)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a lost takeover left %s: %v", dir, err)
	}
}
