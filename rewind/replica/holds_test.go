package replica

import (
	"context"
	"strings"
	"testing"

	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/rewind"
)

// TestFloorHolds: a remote this store pushed to holds local retention
// at its shipped seq + 1, named; a collection keeps the records after
// it (and drops them once shipped); removing the remote's name releases
// the hold.
func TestFloorHolds(t *testing.T) {
	s := newSource(t)
	b := objstorefake.New("holds")
	if err := SetRemote(s.j, "origin", b.String()); err != nil {
		t.Fatal(err)
	}
	s.write(t, "a.txt", []byte("shipped"))
	s.cut(t, "one")
	if _, err := Push(context.Background(), s.j, b, "ws"); err != nil {
		t.Fatal(err)
	}
	shipped := s.j.Durable()
	for i := range 3 {
		s.write(t, "b.txt", pattern(byte(i), 3000))
		s.cut(t, "more")
	}
	holds, err := FloorHolds(s.j)
	if err != nil {
		t.Fatal(err)
	}
	if len(holds) != 1 || holds[0].Seq != shipped+1 || holds[0].Remote != "origin" || holds[0].WS != "ws" {
		t.Fatalf("holds %+v; want origin#ws from seq %d", holds, shipped+1)
	}
	collect := func() *rewind.RetainResult {
		t.Helper()
		holds, err := FloorHolds(s.j)
		if err != nil {
			t.Fatal(err)
		}
		var rh []rewind.RecordHold
		for _, h := range holds {
			rh = append(rh, rewind.RecordHold{Seq: h.Seq, By: h.Why()})
		}
		res, err := s.rw.Collect(rewind.CollectOptions{Keep: 1, Holds: rh})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := collect()
	if res.Floor > shipped+1 || !strings.Contains(res.Floors.SeqBy, "remote origin") {
		t.Fatalf("collection with seqs after %d unshipped: floor %d by %q", shipped, res.Floor, res.Floors.SeqBy)
	}
	if _, err := Push(context.Background(), s.j, b, "ws"); err != nil {
		t.Fatal(err)
	}
	if res := collect(); res.Floor <= shipped+1 {
		t.Fatalf("collection after the push: floor %d, want past %d", res.Floor, shipped+1)
	}
	s.write(t, "c.txt", []byte("unshipped again"))
	s.cut(t, "last")
	if holds, _ := FloorHolds(s.j); len(holds) != 1 {
		t.Fatalf("holds %+v", holds)
	}
	if ok, err := RemoveRemote(s.j, "origin"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if holds, err := FloorHolds(s.j); err != nil || len(holds) != 0 {
		t.Fatalf("holds after remote remove: %+v, %v", holds, err)
	}
}
