package cas_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/reynfs/reynfs/cas"
)

// TestIndexedOnSalvage: a salvage open (fsck's) reads the whole log, so
// it finds an object the collector swept from the index while its bytes
// are still in a segment; Indexed tells it apart from one a mount finds.
func TestIndexedOnSalvage(t *testing.T) {
	dir := t.TempDir()
	s, db := newLogged(t, dir)
	swept, err := s.Put([]byte("swept: only its segment still holds it"))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.Put([]byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete([]cas.Hash{swept}); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseLog(); err != nil {
		t.Fatal(err)
	}
	for _, salvage := range []bool{false, true} {
		o, err := cas.OpenLogged(db, filepath.Join(dir, "db.log"), cas.LogOptions{ID: "0123456789abcdef0123456789abcdef", ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.CatchUp(salvage); err != nil {
			t.Fatal(err)
		}
		has, _ := o.Has(swept)
		if has != salvage {
			t.Errorf("salvage=%v: Has(swept) = %v", salvage, has)
		}
		if ok, err := o.Indexed(swept); ok || err != nil {
			t.Errorf("salvage=%v: Indexed(swept) = %v, %v; want false", salvage, ok, err)
		}
		if ok, err := o.Indexed(kept); !ok || err != nil {
			t.Errorf("salvage=%v: Indexed(kept) = %v, %v; want true", salvage, ok, err)
		}
		_ = o.CloseLog()
	}
}

// TestIndexedDeltaBase: a delta whose base the index lost (a sweep without
// the base closure) reads on a salvage open, which finds the base in the
// log, but is not Indexed: a mount could not read it.
func TestIndexedDeltaBase(t *testing.T) {
	dir := t.TempDir()
	s, db := newLogged(t, dir)
	vs := versions(3)
	hs := putVersions(t, s, vs)
	if err := s.Delete(hs[:1]); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseLog(); err != nil {
		t.Fatal(err)
	}
	o, err := cas.OpenLogged(db, filepath.Join(dir, "db.log"), cas.LogOptions{ID: "0123456789abcdef0123456789abcdef", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer o.CloseLog()
	if _, err := o.CatchUp(true); err != nil {
		t.Fatal(err)
	}
	if got, err := o.Get(hs[2]); err != nil || !bytes.Equal(got, vs[2]) {
		t.Fatalf("salvage read of the delta: %v", err)
	}
	for i, h := range hs {
		if ok, err := o.Indexed(h); ok || err != nil {
			t.Errorf("version %d (its chain's base swept): Indexed = %v, %v; want false", i, ok, err)
		}
	}
}
