package replica

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

func nameList(t *testing.T, j *journal.Journal) string {
	t.Helper()
	ns, err := rewind.Names(j)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range ns {
		out = append(out, fmt.Sprintf("%s=%d", n.Name, n.Seq))
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

// TestBranchNamesTravel: names given with `reynfs branch NAME` are
// pushed once (after the HEAD covering their seq), come back with a
// clone (where they resolve as targets, clone --at NAME included) and a
// fetch, reach a fork only through its seq, and a damaged name object is
// reported, not applied.
func TestBranchNamesTravel(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("names")
	s := newSource(t)
	at := history(t, s)
	if err := rewind.SetName(s.j, "kept", at["abandoned"]); err != nil {
		t.Fatal(err)
	}
	if err := rewind.SetName(s.j, "early", at["mid"]); err != nil {
		t.Fatal(err)
	}
	res, err := Push(ctx, s.j, fake, "w")
	if err != nil || res.Names != 2 {
		t.Fatalf("push: %+v, %v; want 2 names sent", res, err)
	}
	puts := fake.Count(objstorefake.OpPutIfAbsent)
	if res, err := Push(ctx, s.j, fake, "w"); err != nil || res.Names != 0 || fake.Count(objstorefake.OpPutIfAbsent) != puts {
		t.Fatalf("second push: %+v, %v; it wrote %d objects by PutIfAbsent, want none", res, err, fake.Count(objstorefake.OpPutIfAbsent)-puts)
	}
	want := nameList(t, s.j)

	dir := filepath.Join(t.TempDir(), "db")
	cres, err := Clone(ctx, fake, "w", dir, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if cres.Target != at["abandoned"] {
		t.Errorf("clone --at kept made seq %d live, want %d", cres.Target, at["abandoned"])
	}
	cj := openClone(t, dir)
	if got := nameList(t, cj); got != want {
		t.Errorf("clone's names %s, the source's %s", got, want)
	}

	// A name given later, with records, reaches a clone by fetch.
	dir2 := filepath.Join(t.TempDir(), "db2")
	if _, err := Clone(ctx, fake, "w", dir2, ""); err != nil {
		t.Fatal(err)
	}
	s.write(t, "late.txt", []byte("late\n"))
	s.sync(t)
	if err := rewind.SetName(s.j, "late", s.j.Head()); err != nil {
		t.Fatal(err)
	}
	if res, err := Push(ctx, s.j, fake, "w"); err != nil || res.Names != 1 {
		t.Fatalf("push after a new name: %+v, %v", res, err)
	}
	cj2 := openClone(t, dir2)
	if _, err := Fetch(ctx, cj2, fake, "w"); err != nil {
		t.Fatal(err)
	}
	if got, want := nameList(t, cj2), nameList(t, s.j); got != want {
		t.Errorf("names after fetch %s, the source's %s", got, want)
	}

	// A fork at mid has the names through mid only.
	if _, err := Fork(ctx, fake, "w", at["mid"], "f"); err != nil {
		t.Fatal(err)
	}
	dir3 := filepath.Join(t.TempDir(), "db3")
	if _, err := Clone(ctx, fake, "f", dir3, ""); err != nil {
		t.Fatal(err)
	}
	if got, want := nameList(t, openClone(t, dir3)), fmt.Sprint([]string{fmt.Sprintf("early=%d", at["mid"])}); got != want {
		t.Errorf("fork's names %s, want %s", got, want)
	}

	if rep, err := Fsck(ctx, fake, ""); err != nil || rep.Damaged() {
		t.Fatalf("fsck --remote with names: %+v, %v", rep, err)
	}

	// Damage: a name object that holds another name.
	key := NameKey("w", "late")
	if err := fake.Put(ctx, key, canonical(&RemoteName{Format: Format, Name: "other", Seq: 3})); err != nil {
		t.Fatal(err)
	}
	if _, err := Clone(ctx, fake, "w", filepath.Join(t.TempDir(), "db4"), ""); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("clone with a damaged name object = %v, want ErrCorrupt", err)
	}
	rep, err := Fsck(ctx, fake, "w")
	if err != nil || !rep.Damaged() || !strings.Contains(fmt.Sprint(rep.Problems), key) {
		t.Fatalf("fsck --remote of a damaged name object: %+v, %v", rep, err)
	}
}
