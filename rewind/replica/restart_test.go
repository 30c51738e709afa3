package replica

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstoretest"
)

// killAt is a Backend that kills the S3 server just before the nth pack
// it writes and starts it again in the background.
type killAt struct {
	objstore.Backend
	n      int32
	packs  atomic.Int32
	kill   func()
	revive func()
}

func (k *killAt) Put(ctx context.Context, key string, data []byte) error {
	if strings.HasSuffix(key, ".pack") && k.packs.Add(1) == k.n {
		k.kill()
		go k.revive()
	}
	return k.Backend.Put(ctx, key, data)
}

// TestPushServerRestarted: the S3 server is killed (SIGKILL) in the
// middle of a push, before one of its packs, and started again on the
// same data. The push either rides it out (the client retries) or fails
// with an error; a second push completes either way, and a clone of the
// remote equals the source, with fsck --remote clean.
func TestPushServerRestarted(t *testing.T) {
	ctx := context.Background()
	g := objstoretest.StartS3(t)
	g.SetEnv(t)
	b, err := objstore.Open(ctx, g.NewBucket(t))
	if err != nil {
		t.Fatal(err)
	}
	s := newSource(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 12 {
		data := make([]byte, 150<<10)
		for k := range data {
			data[k] = byte(rng.Uint32())
		}
		s.write(t, "f"+string(rune('a'+i))+".bin", data)
	}
	s.sync(t)
	s.cut(t, "all")
	var wg sync.WaitGroup
	var reviveErr error
	k := &killAt{Backend: b, n: 3, kill: g.Kill, revive: func() {
		defer wg.Done()
		reviveErr = g.Revive(t)
	}}
	wg.Add(1)
	res, err := PushWith(ctx, s.j, k, "w", Options{PackSize: 256 << 10})
	wg.Wait()
	if reviveErr != nil {
		t.Fatal(reviveErr)
	}
	if k.packs.Load() < 3 {
		t.Fatalf("the push wrote %d packs: the server was never killed mid-push", k.packs.Load())
	}
	t.Logf("push across the restart: %+v, %v", res, err)
	if err != nil {
		if res, err = Push(ctx, s.j, b, "w"); err != nil {
			t.Fatalf("push after the server came back: %v", err)
		}
		t.Logf("second push: %+v", res)
		// The two packs written before the kill are not sent again.
		if res.Objects >= 50 {
			t.Errorf("the second push sent %d objects, all of them again", res.Objects)
		}
	}
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := Clone(ctx, b, "w", dir, ""); err != nil {
		t.Fatal(err)
	}
	cj := openClone(t, dir)
	sameTree(t, export(t, s.j, s.j.Head()), export(t, cj, cj.Head()))
	if rep, err := Fsck(ctx, b, ""); err != nil || rep.Damaged() {
		t.Fatalf("fsck --remote: %+v, %v", rep, err)
	}
}
