package replica

import (
	"context"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/rewind"
)

// TestShipperGCAndNames: a continuous session outlives a remote GC that
// condemns a.bin's packs and, after the grace, deletes them. The store's
// record of what the remote holds then names deleted objects; a.bin
// written again must be sent again, which the session only knows by
// reading GC's state again while it runs (Guard). It also ships a
// branch name given meanwhile.
func TestShipperGCAndNames(t *testing.T) {
	for _, c := range []struct {
		name  string
		guard time.Duration
	}{{"guarded", 20 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			fake := objstorefake.New(t.Name())
			clk := newClock(fake)
			g := newGCSceneWith(t, fake, false, nil)
			sh, err := StartShipper(g.s.j, fake, "w", ShipOptions{Interval: 20 * time.Millisecond, Guard: c.guard})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = sh.Stop(ctx) })
			waitShipped(t, sh, g.s.j.Durable())
			if res := mustGC(t, fake); res.Condemned.Packs == 0 {
				t.Fatalf("first gc condemned nothing: %+v", res)
			}
			clk.add(DefaultGrace)
			if res := mustGC(t, fake); res.Deleted.Packs == 0 {
				t.Fatalf("gc after the grace deleted nothing: %+v", res)
			}
			time.Sleep(60 * time.Millisecond) // a few guard periods of the guarded case
			g.s.write(t, "a.bin", pattern(1, 200000))
			g.at["g3"] = g.s.cut(t, "three")
			if err := rewind.SetName(g.s.j, "again", g.at["g3"]); err != nil {
				t.Fatal(err)
			}
			g.s.write(t, "nudge.txt", []byte("a record after the name\n"))
			g.s.sync(t)
			waitShipped(t, sh, g.s.j.Durable())
			if _, err := sh.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			checkRemote(t, fake, g.s, "w", g.at)
			if _, _, err := fake.Get(ctx, NameKey("w", "again")); err != nil {
				t.Errorf("the session did not ship the branch name: %v", err)
			}
		})
	}
}
