package replica

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// TestFetch: a clone fetches what its source pushed since, and ends with
// the same history and state (every seq of interest, byte for byte);
// a second fetch finds nothing new.
func TestFetch(t *testing.T) {
	ctx := context.Background()
	for name, mk := range backends(t) {
		if name == "s3" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			b := mk(t)
			s := newSource(t)
			s.write(t, "first.txt", pattern(1, 70000))
			s.cut(t, "one")
			if _, err := Push(ctx, s.j, b, "w"); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "db")
			if _, err := Clone(ctx, b, "w", dir, ""); err != nil {
				t.Fatal(err)
			}
			cj := openClone(t, dir)
			at := history(t, s)
			if _, err := PushWith(ctx, s.j, b, "w", Options{SegmentSize: 500}); err != nil {
				t.Fatal(err)
			}
			before := cj.Head()
			res, err := Fetch(ctx, cj, b, "w")
			if err != nil {
				t.Fatal(err)
			}
			if res.From != before+1 || res.Through != s.j.Head() || cj.Head() != s.j.Head() || res.Objects == 0 {
				t.Fatalf("fetch %+v: clone head %d, source head %d", res, cj.Head(), s.j.Head())
			}
			checkClone(t, s.j, at, cj, s.j.Head())
			if got, want := genCount(t, cj), genCount(t, s.j); got != want {
				t.Errorf("clone indexes %d generations after the fetch, the source %d", got, want)
			}
			res, err = Fetch(ctx, cj, b, "w")
			if err != nil || res.From != 0 {
				t.Fatalf("second fetch: %+v, %v", res, err)
			}
		})
	}
}

func genCount(t *testing.T, j *journal.Journal) int {
	t.Helper()
	gens, err := rewind.Generations(j)
	if err != nil {
		t.Fatal(err)
	}
	return len(gens)
}

// TestFetchRefuses: a store not cloned from the workspace, and a clone
// with records of its own (a clone --at makes a reset record), are
// refused with one line saying why.
func TestFetchRefuses(t *testing.T) {
	ctx := context.Background()
	b := backends(t)["fake"](t)
	s := newSource(t)
	s.write(t, "a", []byte("a"))
	g := s.cut(t, "one")
	s.write(t, "a", []byte("b"))
	s.sync(t)
	if _, err := Push(ctx, s.j, b, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := Fetch(ctx, s.j, b, "w"); err == nil || !strings.Contains(err.Error(), "not cloned") {
		t.Errorf("fetch into the source = %v; want 'not cloned'", err)
	}
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := Clone(ctx, b, "w", dir, strconv.FormatUint(g, 10)); err != nil {
		t.Fatal(err)
	}
	cj := openClone(t, dir)
	_, err := Fetch(ctx, cj, b, "w")
	if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), "reynfs fork") || strings.Contains(err.Error(), "\n") {
		t.Errorf("fetch into a diverged clone = %v; want ErrDiverged naming reynfs fork", err)
	}
}

// TestWorkspaces: log --remote's view: every workspace with its seq,
// epoch, lease, and its generations as the writer numbers them.
func TestWorkspaces(t *testing.T) {
	ctx := context.Background()
	b := backends(t)["fake"](t)
	s := newSource(t)
	history(t, s)
	if _, err := Push(ctx, s.j, b, "w"); err != nil {
		t.Fatal(err)
	}
	s2 := newSource(t)
	s2.write(t, "x", []byte("x"))
	s2.sync(t)
	if _, err := Push(ctx, s2.j, b, "w2"); err != nil {
		t.Fatal(err)
	}
	ws, err := Workspaces(ctx, b, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].Name != "w" || ws[1].Name != "w2" {
		t.Fatalf("workspaces %+v", ws)
	}
	gens, err := rewind.Generations(s.j)
	if err != nil {
		t.Fatal(err)
	}
	w := ws[0]
	if w.Seq != s.j.Head() || w.Epoch != 1 || w.Locked || w.Generations != len(gens) || w.Newest == nil ||
		w.Newest.Seq != gens[len(gens)-1] || w.Newest.Label != "after" || w.Newest.ID != len(gens) {
		t.Errorf("w: %+v (newest %+v); want seq %d, %d generations, newest at %d labelled after", w, w.Newest, s.j.Head(), len(gens), gens[len(gens)-1])
	}
	if ws[1].Generations != genCount(t, s2.j) || ws[1].Newest == nil || ws[1].Newest.Kind != "import" || ws[1].Seq != s2.j.Head() {
		t.Errorf("w2: %+v", ws[1])
	}
	heads, err := Workspaces(ctx, b, true)
	if err != nil || len(heads) != 2 || heads[0].Generations != 0 || heads[0].Seq != w.Seq {
		t.Errorf("heads only: %+v, %v", heads, err)
	}
}

// TestFetchResumes: a fetch cut off after writing some of its records
// (simulated by appending the remote's first new records into the clone
// by hand) is continued by the next fetch, not refused as diverged.
func TestFetchResumes(t *testing.T) {
	ctx := context.Background()
	b := backends(t)["fake"](t)
	s := newSource(t)
	s.write(t, "a", pattern(1, 5000))
	s.cut(t, "one")
	if _, err := Push(ctx, s.j, b, "w"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := Clone(ctx, b, "w", dir, ""); err != nil {
		t.Fatal(err)
	}
	cj := openClone(t, dir)
	s.write(t, "b", pattern(2, 5000))
	s.cut(t, "two")
	s.write(t, "c", pattern(3, 5000))
	s.cut(t, "three")
	if _, err := Push(ctx, s.j, b, "w"); err != nil {
		t.Fatal(err)
	}
	h, _, err := ReadHead(ctx, b, "w")
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := segmentRecords(ctx, b, "w", h, cj.Head()+1)
	if err != nil || len(recs) < 4 {
		t.Fatalf("remote records: %d, %v", len(recs), err)
	}
	// The records of "b" (its data and create), not the generation: the
	// objects a fetch stores come before its records.
	c := &cloner{ctx: ctx, b: b, ws: "w", j: cj, head: h, res: &CloneResult{}}
	cfg, _ := remoteConfig(ctx, b, false)
	if c.loc, err = newLocal(cj, cfg); err != nil {
		t.Fatal(err)
	}
	if err := c.indexes(); err != nil {
		t.Fatal(err)
	}
	if err := c.objects(recs[:2]); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs[:2] {
		if err := cj.EnqueueAt(r, nil).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Fetch(ctx, cj, b, "w")
	if err != nil {
		t.Fatalf("fetch after a cut-off fetch: %v", err)
	}
	if res.From != recs[2].Seq || cj.Head() != s.j.Head() {
		t.Fatalf("fetch %+v; clone head %d, source %d", res, cj.Head(), s.j.Head())
	}
	sameTree(t, export(t, s.j, s.j.Head()), export(t, cj, cj.Head()))
}
