package cas_test

import (
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
