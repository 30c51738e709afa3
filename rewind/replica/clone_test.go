package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/cas/objstore/objstoretest"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

func backends(t *testing.T) map[string]func(t *testing.T) objstore.Backend {
	return map[string]func(t *testing.T) objstore.Backend{
		"dir": func(t *testing.T) objstore.Backend {
			b, err := objstore.OpenDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		"fake": func(t *testing.T) objstore.Backend { return objstorefake.New(t.Name()) },
		// A real S3 server (skipped without versitygw, failed under CI=true).
		"s3": func(t *testing.T) objstore.Backend {
			g := objstoretest.StartS3(t)
			g.SetEnv(t)
			b, err := objstore.Open(context.Background(), g.NewBucket(t))
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
}

func openClone(t *testing.T, dir string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}

// checkClone: the clone's live state is the source's state at want,
// byte for byte once exported; every seq of interest names the same
// state in both stores; fsck finds nothing wrong.
func checkClone(t *testing.T, src *journal.Journal, at map[string]uint64, cj *journal.Journal, want uint64) {
	t.Helper()
	if got, exp := stateRoot(t, cj, cj.Head()), stateRoot(t, src, want); got != exp {
		t.Errorf("clone's live root %s, source's at %d is %s", got.Short(), want, exp.Short())
	}
	sameTree(t, export(t, src, want), export(t, cj, cj.Head()))
	for name, seq := range at {
		if seq > src.Head() {
			continue
		}
		if a, b := stateRoot(t, src, seq), stateRoot(t, cj, seq); a != b {
			t.Errorf("%s (seq %d) names %s in the source, %s in the clone", name, seq, a.Short(), b.Short())
		}
		a, aerr := rewind.AgentStates(src, seq)
		b, berr := rewind.AgentStates(cj, seq)
		if aerr != nil || berr != nil || fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s (seq %d): agent states %v (%v) in the source, %v (%v) in the clone", name, seq, a, aerr, b, berr)
		}
		for agent, h := range b {
			if _, err := cj.Objects().Get(h); err != nil {
				t.Errorf("%s (seq %d): agent %s's state %s: %v", name, seq, agent, h.Short(), err)
			}
		}
	}
	rep, err := rewind.Fsck(cj)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Damaged() {
		t.Errorf("fsck of the clone: %+v", rep)
	}
}

// TestCloneTargets: push a history, then clone it at a generation id, a
// seq between generations, a seq on a branch a rewind abandoned, a label
// and head, on the directory backend and on the fake.
func TestCloneTargets(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := newSource(t)
			at := history(t, s)
			b := mk(t)
			if _, err := Push(ctx, s.j, b, "proj"); err != nil {
				t.Fatal(err)
			}
			if st, err := rewind.AgentStates(s.j, at["head"]); err != nil || st["claude"].IsZero() {
				t.Fatalf("the history saved no agent state: %v, %v", st, err)
			}
			gen, err := rewind.Resolve(s.j, "g3")
			if err != nil || gen != at["g-second"] {
				t.Fatalf("g3 = %d, %v; want the second generation %d", gen, err, at["g-second"])
			}
			for _, c := range []struct {
				target string
				want   uint64
			}{
				{"g3", at["g-second"]},
				{strconv.FormatUint(at["mid"], 10), at["mid"]},
				{strconv.FormatUint(at["abandoned"], 10), at["abandoned"]},
				{"after", at["g-after"]},
				{"", at["head"]},
			} {
				t.Run("at="+c.target, func(t *testing.T) {
					dir := filepath.Join(t.TempDir(), "db")
					res, err := Clone(ctx, b, "proj", dir, c.target)
					if err != nil {
						t.Fatal(err)
					}
					if res.Target != c.want || res.Head != at["head"] {
						t.Fatalf("clone target %d head %d, want %d and %d", res.Target, res.Head, c.want, at["head"])
					}
					if (res.Reset != 0) != (c.want != at["head"]) {
						t.Errorf("reset record %d for target %d (head %d)", res.Reset, c.want, at["head"])
					}
					checkClone(t, s.j, at, openClone(t, dir), c.want)
				})
			}
		})
	}
}

// TestCloneAfterRetention: a store whose collector dropped old records
// and generations pushes what it retains; every retained target names
// the same state in the clone, generation ids included, and the floor
// comes along.
func TestCloneAfterRetention(t *testing.T) {
	ctx := context.Background()
	s := newSource(t)
	at := history(t, s)
	if _, err := rewind.Retain(s.j, 2, false); err != nil {
		t.Fatal(err)
	}
	floor, err := s.j.Floor()
	if err != nil || floor <= 1 {
		t.Fatalf("floor after retention %d, %v", floor, err)
	}
	fake := objstorefake.New("retained")
	if _, err := Push(ctx, s.j, fake, "w"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := Clone(ctx, fake, "w", dir, ""); err != nil {
		t.Fatal(err)
	}
	cj := openClone(t, dir)
	if f, err := cj.Floor(); err != nil || f != floor {
		t.Errorf("clone's floor %d, %v; want %d", f, err, floor)
	}
	retained := map[string]uint64{}
	for name, seq := range at {
		if _, err := rewind.Resolve(s.j, strconv.FormatUint(seq, 10)); err == nil {
			retained[name] = seq
		}
	}
	if len(retained) < 2 {
		t.Fatalf("retention kept %v of %v", retained, at)
	}
	gens, err := rewind.Timeline(s.j)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gens {
		id := "g" + strconv.Itoa(g.ID)
		a, aerr := rewind.Resolve(s.j, id)
		b, berr := rewind.Resolve(cj, id)
		if aerr != nil || berr != nil || a != b {
			t.Errorf("%s names seq %d (%v) in the source, %d (%v) in the clone", id, a, aerr, b, berr)
		}
	}
	checkClone(t, s.j, retained, cj, s.j.Head())
}

// TestPushFromClone: a clone knows the remote holds everything it
// fetched: pushing it as a new workspace sends records only, and that
// workspace clones to the same states; pushing it over the workspace it
// came from is refused (another store wrote it).
func TestPushFromClone(t *testing.T) {
	ctx := context.Background()
	s := newSource(t)
	at := history(t, s)
	fake := objstorefake.New("fork")
	if _, err := Push(ctx, s.j, fake, "w"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := Clone(ctx, fake, "w", dir, strconv.FormatUint(at["mid"], 10)); err != nil {
		t.Fatal(err)
	}
	cj := openClone(t, dir)
	if _, err := Push(ctx, cj, fake, "w"); !errors.Is(err, ErrNotOurs) {
		t.Fatalf("push of the clone over its origin = %v, want ErrNotOurs", err)
	}
	fake.Reset()
	res, err := Push(ctx, cj, fake, "w2")
	if err != nil {
		t.Fatal(err)
	}
	// The clone's own reset and generation name the state at mid, whose
	// tree no generation had: its root and the directories on the paths
	// changed since the previous generation are new, nothing else.
	if res.Objects > 3 || res.Through != cj.Head() {
		t.Errorf("push of the clone as w2: %+v; want its records and the new state's few inode objects", res)
	}
	if n := fake.Count(objstorefake.OpGet); n != 2 {
		t.Errorf("push of the clone made %d GETs, want 2 (config, HEAD)", n)
	}
	dir2 := filepath.Join(t.TempDir(), "db")
	if _, err := Clone(ctx, fake, "w2", dir2, ""); err != nil {
		t.Fatal(err)
	}
	delete(at, "head")
	checkClone(t, cj, at, openClone(t, dir2), cj.Head())

	// A clone at head has nothing of its own: no object at all.
	dir3 := filepath.Join(t.TempDir(), "db")
	if _, err := Clone(ctx, fake, "w", dir3, ""); err != nil {
		t.Fatal(err)
	}
	if res, err := Push(ctx, openClone(t, dir3), fake, "w3"); err != nil || res.Objects != 0 || res.Packs != 0 {
		t.Errorf("push of a clone at head as w3: %+v, %v; want no object", res, err)
	}
}

// TestCloneReportsDamage: a flipped byte in a pack, an index or a
// segment on the directory backend fails the clone with ErrCorrupt
// naming the object, and leaves no store behind.
func TestCloneReportsDamage(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{".pack", ".idx", ".seg"} {
		t.Run(kind, func(t *testing.T) {
			root := t.TempDir()
			b, err := objstore.OpenDir(root)
			if err != nil {
				t.Fatal(err)
			}
			s2 := newSource(t)
			s2.write(t, "f", pattern(7, 100000))
			s2.cut(t, "one")
			if _, err := Push(ctx, s2.j, b, "w"); err != nil {
				t.Fatal(err)
			}
			var victim string
			err = b.List(ctx, "", func(i objstore.Info) error {
				if strings.HasSuffix(i.Key, kind) && victim == "" {
					victim = i.Key
				}
				return nil
			})
			if err != nil || victim == "" {
				t.Fatalf("no %s object: %v", kind, err)
			}
			path := filepath.Join(root, filepath.FromSlash(victim))
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 1
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "db")
			_, err = Clone(ctx, b, "w", dir, "")
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), victim) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("clone with %s damaged = %v; want ErrCorrupt naming it on one line", victim, err)
			}
			for _, p := range []string{dir, journal.LogPath(dir), journal.ManifestPath(dir)} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("a failed clone left %s", p)
				}
			}
		})
	}
}

// TestCover: the tiling of 1..to prefers long segments and backtracks
// from a dead end; nil when no tiling exists.
func TestCover(t *testing.T) {
	s := func(first, last uint64) seg {
		return seg{key: fmt.Sprintf("%d-%d", first, last), first: first, last: last}
	}
	keys := func(c []seg) string {
		var out []string
		for _, x := range c {
			out = append(out, x.key)
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		segs []seg
		to   uint64
		want string
	}{
		{[]seg{s(1, 5), s(6, 10)}, 10, "1-5 6-10"},
		{[]seg{s(1, 5), s(1, 8), s(6, 10), s(9, 9)}, 10, "1-5 6-10"}, // 1-8 leads to 9-9, then nothing
		{[]seg{s(1, 5), s(1, 8), s(9, 10), s(6, 10)}, 10, "1-8 9-10"},
		{[]seg{s(1, 5), s(7, 10)}, 10, ""},
		{[]seg{s(2, 10)}, 10, ""},
		{[]seg{s(1, 12)}, 10, ""},
	} {
		if got := keys(cover(c.segs, 1, c.to)); got != c.want {
			t.Errorf("cover(%v, 1, %d) = %q, want %q", c.segs, c.to, got, c.want)
		}
	}
}
