package replica

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/rewind"
)

// TestForkAtTarget: a fork at a generation, a label, -N or a seq names
// the seq a clone of the parent resolves the same target to, and reads
// no pack; a target the parent does not have is refused as a bad target
// and makes nothing.
func TestForkAtTarget(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("forkat")
	s := newSource(t)
	at := history(t, s)
	if err := rewind.SetName(s.j, "named", at["abandoned"]); err != nil {
		t.Fatal(err)
	}
	if _, err := Push(ctx, s.j, fake, "w"); err != nil {
		t.Fatal(err)
	}
	var packReads atomic.Int32
	fake.SetHook(func(op objstorefake.Op, key string) error {
		if strings.HasSuffix(key, ".pack") && (op == objstorefake.OpGet || op == objstorefake.OpGetRange) {
			packReads.Add(1)
		}
		return nil
	})
	cases := []struct{ target, ws string }{
		{"second", "by-label"},
		{"g2", "by-gen"},
		{"-1", "by-relative"},
		{"mid", "by-seq"},
		{"named", "by-branch-name"},
	}
	for _, c := range cases {
		target := c.target
		if target == "mid" {
			target = strconv.FormatUint(at["mid"], 10)
		}
		want, err := rewind.Resolve(s.j, target)
		if err != nil {
			t.Fatalf("local resolve %s: %v", target, err)
		}
		res, err := ForkAt(ctx, fake, "w", target, c.ws)
		if err != nil {
			t.Fatalf("fork @%s: %v", target, err)
		}
		if res.Seq != want {
			t.Errorf("fork @%s at seq %d, the parent's store resolves it to %d", target, res.Seq, want)
		}
		if n := packReads.Load(); n != 0 {
			t.Errorf("fork @%s read %d packs, want none", target, n)
		}
		h, _, err := ReadHead(ctx, fake, c.ws)
		if err != nil || h.Parent == nil || h.Parent.Seq != want {
			t.Errorf("fork @%s: HEAD %+v, %v", target, h, err)
		}
	}
	if _, err := ForkAt(ctx, fake, "w", "no-such-label", "bad"); !errors.Is(err, rewind.ErrTarget) {
		t.Fatalf("fork at an unknown label = %v, want rewind.ErrTarget", err)
	}
	if _, _, err := ReadHead(ctx, fake, "bad"); err == nil {
		t.Fatal("a refused fork left a HEAD")
	}
}
