package objstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
)

func TestSelfTestPasses(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("ok")
	for _, b := range []objstore.Backend{newDir(t), fake} {
		if err := objstore.SelfTest(ctx, b); err != nil {
			t.Fatalf("SelfTest(%s): %v", b, err)
		}
		var left []string
		must(t, b.List(ctx, "", func(in objstore.Info) error { left = append(left, in.Key); return nil }))
		if len(left) != 0 {
			t.Fatalf("SelfTest(%s) left %q behind", b, left)
		}
	}
	// What the design does not rely on is not checked.
	lax := objstorefake.New("lax")
	lax.IgnoreMatchOnMissing()
	if err := objstore.SelfTest(ctx, lax); err != nil {
		t.Fatalf("SelfTest of a server that ignores If-Match on a missing key: %v", err)
	}
}

// TestSelfTestRefuses: a server that ignores a condition is refused with
// ErrUnsupported naming the check; a broken connection is not called
// "unsupported"; either way the probe keys are removed.
func TestSelfTestRefuses(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		setup func(*objstorefake.Backend)
		want  error
		check string
	}{
		{"IfNoneMatchIgnored", func(b *objstorefake.Backend) { b.IgnoreCondition(objstorefake.OpPutIfAbsent) },
			objstore.ErrUnsupported, "PutIfAbsent (If-None-Match: *) overwrote"},
		{"IfMatchIgnored", func(b *objstorefake.Backend) { b.IgnoreCondition(objstorefake.OpPutIfMatch) },
			objstore.ErrUnsupported, "PutIfMatch (If-Match) with a wrong ETag replaced"},
		{"PutFails", func(b *objstorefake.Backend) { b.FailNth(objstorefake.OpPutIfAbsent, 1, nil) },
			objstorefake.ErrInjected, "PutIfAbsent (If-None-Match: *) of a new key"},
		{"RaceFails", func(b *objstorefake.Backend) { b.FailNth(objstorefake.OpPutIfAbsent, 5, nil) },
			objstorefake.ErrInjected, "concurrent PutIfAbsent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := objstorefake.New(c.name)
			c.setup(b)
			err := objstore.SelfTest(ctx, b)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.check) {
				t.Fatalf("SelfTest = %v, want %v naming %q", err, c.want, c.check)
			}
			if c.want != objstore.ErrUnsupported && errors.Is(err, objstore.ErrUnsupported) {
				t.Fatalf("a failed request was reported as unsupported: %v", err)
			}
			if keys := b.Keys(); len(keys) != 0 {
				t.Fatalf("SelfTest left %q behind", keys)
			}
		})
	}
}
