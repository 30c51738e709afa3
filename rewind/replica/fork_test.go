package replica

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/journal"
)

func packKeys(fake *objstorefake.Backend) map[string]bool {
	m := map[string]bool{}
	for _, k := range fake.Keys() {
		if strings.HasSuffix(k, ".pack") {
			m[k] = true
		}
	}
	return m
}

// TestForkBesideParent: a fork at a seq inside one of the parent's
// segments copies nothing; taken (clone --take), it advances beside its
// parent, which advances too: the fork's push sends only the objects its
// own records added (no pack holds an object another pack holds), and a
// clone of each workspace holds its own history, the fork's through the
// fork point being the parent's.
func TestForkBesideParent(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("fork")
	s := newSource(t)
	at := history(t, s)
	o := Options{SegmentSize: 200}
	if _, err := PushWith(ctx, s.j, fake, "w", o); err != nil {
		t.Fatal(err)
	}
	mid := at["mid"]
	inside := false
	for _, k := range fake.Keys() {
		if _, first, last, ok := ParseSegmentKey("w", k); ok && first < mid && mid < last {
			inside = true
		}
	}
	puts := fake.Count(objstorefake.OpPut)
	res, err := Fork(ctx, fake, "w", mid, "f")
	if err != nil || res.Seq != mid {
		t.Fatalf("fork: %+v, %v", res, err)
	}
	if n := fake.Count(objstorefake.OpPut); n != puts {
		t.Fatalf("fork made %d PUTs, want none (only HEAD, by PutIfAbsent)", n-puts)
	}
	if _, err := Fork(ctx, fake, "w", mid, "f"); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("second fork to f = %v, want it refused", err)
	}
	if _, err := Fork(ctx, fake, "w", s.j.Durable()+5, "g"); err == nil {
		t.Fatal("fork past the parent's HEAD succeeded")
	}

	dir := filepath.Join(t.TempDir(), "db")
	tres, err := Take(ctx, fake, "f", dir, TakeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := reopen(t, dir)
	if tres.Head != mid || c.j.Head() != mid || stateRoot(t, c.j, mid) != stateRoot(t, s.j, mid) {
		t.Fatalf("the fork's clone holds seqs through %d (inside a segment: %v), want the parent's state at %d", c.j.Head(), inside, mid)
	}

	// Both advance.
	s.write(t, "parent-only", pattern(8, 9000))
	s.cut(t, "parent")
	if _, err := PushWith(ctx, s.j, fake, "w", o); err != nil {
		t.Fatal(err)
	}
	before := packKeys(fake)
	objs := indexed(t, fake)
	c.write(t, "fork-only", pattern(9, 7000))
	c.cut(t, "forked")
	pres, err := PushWith(ctx, c.j, fake, "f", o)
	if err != nil {
		t.Fatal(err)
	}
	after := indexed(t, fake)
	newPacks := 0
	for k := range packKeys(fake) {
		if !before[k] {
			newPacks++
		}
	}
	if pres.From != mid+1 || newPacks != pres.Packs {
		t.Fatalf("the fork's push: %+v, %d new packs", pres, newPacks)
	}
	seen := map[string]bool{}
	for id, hs := range objs {
		for h := range hs {
			seen[h.String()] = true
		}
		_ = id
	}
	for id, hs := range after {
		if _, old := objs[id]; old {
			continue
		}
		for h := range hs {
			if seen[h.String()] {
				t.Errorf("the fork's push sent %s again (pack %s)", h.Short(), id)
			}
		}
	}

	fdir := filepath.Join(t.TempDir(), "db")
	if _, err := Clone(ctx, fake, "f", fdir, ""); err != nil {
		t.Fatal(err)
	}
	fj := openClone(t, fdir)
	if fj.Head() != c.j.Head() || stateRoot(t, fj, fj.Head()) != stateRoot(t, c.j, c.j.Head()) || stateRoot(t, fj, mid) != stateRoot(t, s.j, mid) {
		t.Fatal("a clone of the fork is not the fork's history on top of the parent's")
	}
	wdir := filepath.Join(t.TempDir(), "db")
	if _, err := Clone(ctx, fake, "w", wdir, ""); err != nil {
		t.Fatal(err)
	}
	if wj := openClone(t, wdir); stateRoot(t, wj, wj.Head()) != stateRoot(t, s.j, s.j.Head()) {
		t.Fatal("a clone of the parent after the fork advanced is not the parent's head")
	}
	if _, err := Push(ctx, s.j, fake, "f"); !errors.Is(err, ErrNotOurs) {
		t.Fatalf("the parent's store pushing over the fork = %v, want ErrNotOurs", err)
	}

	// Reading the remote: a fork's seqs up to its point are its
	// parent's segments, not damage.
	for _, ws := range []string{"", "f"} {
		rep, err := Fsck(ctx, fake, ws)
		if err != nil || rep.Damaged() {
			t.Fatalf("fsck --remote (ws %q) of a remote with a fork: %+v, %v", ws, rep, err)
		}
	}
	infos, err := Workspaces(ctx, fake, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Error != "" {
			t.Fatalf("log --remote: workspace %s: %s", in.Name, in.Error)
		}
	}
	gens := func(j *journal.Journal) (n int) {
		_ = j.Iter(1, func(r *journal.Record) error {
			if r.Op == journal.OpGeneration {
				n++
			}
			return nil
		})
		return n
	}
	for _, in := range infos {
		if in.Name == "f" && in.Generations != gens(fj) {
			t.Fatalf("log --remote counts %d generations in the fork, its clone holds %d", in.Generations, gens(fj))
		}
	}
}

// TestForkClaimedByPush: the first push from a plain clone of a fork no
// store writes yet claims it (epoch 2) and extends it; another clone
// made before the claim is then refused as deposed.
func TestForkClaimedByPush(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("claim")
	s := newSource(t)
	at := history(t, s)
	if _, err := Push(ctx, s.j, fake, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := Fork(ctx, fake, "w", at["mid"], "f"); err != nil {
		t.Fatal(err)
	}
	var clones []*source
	for range 2 {
		dir := filepath.Join(t.TempDir(), "db")
		if _, err := Clone(ctx, fake, "f", dir, ""); err != nil {
			t.Fatal(err)
		}
		c := reopen(t, dir)
		c.write(t, "mine", pattern(5, 2000))
		c.sync(t)
		clones = append(clones, c)
	}
	res, err := Push(ctx, clones[0].j, fake, "f")
	if err != nil || res.From != at["mid"]+1 || res.Through != clones[0].j.Durable() {
		t.Fatalf("the first push of a clone of the fork: %+v, %v", res, err)
	}
	if h, _ := readHead(t, fake, "f"); h.Epoch() != 2 || h.Parent == nil {
		t.Fatalf("the claimed fork's HEAD: %+v", h)
	}
	if _, err := Push(ctx, clones[1].j, fake, "f"); !errors.Is(err, ErrDeposed) {
		t.Fatalf("the second clone's push to the claimed fork = %v, want deposed", err)
	}
}
