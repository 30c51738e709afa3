package cas_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/castest"
)

// newLogged returns a store with a segment log over a fresh database.
func newLogged(t *testing.T, dir string) (*cas.Badger, *badger.DB) {
	t.Helper()
	db := openDB(t, badger.DefaultOptions(filepath.Join(dir, "db")))
	s, err := cas.OpenLogged(db, filepath.Join(dir, "db.log"), cas.LogOptions{ID: "0123456789abcdef0123456789abcdef", Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CatchUp(false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.CloseLog() })
	return s, db
}

func TestLoggedConformance(t *testing.T) {
	castest.Run(t, func(t *testing.T) cas.Store {
		s, _ := newLogged(t, t.TempDir())
		return s
	})
}

// Compressible objects are stored compressed, incompressible ones raw;
// both read back, and Each reports the bytes on disk.
func TestLoggedCompression(t *testing.T) {
	dir := t.TempDir()
	s, _ := newLogged(t, dir)
	text := bytes.Repeat([]byte("func main() { fmt.Println(\"hello\") }\n"), 1700)
	noise := castest.Data(7, 64<<10)
	ht, err := s.Put(text)
	if err != nil {
		t.Fatal(err)
	}
	hn, err := s.Put(noise)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[cas.Hash]int64{}
	if err := s.Each(func(h cas.Hash, n int64) error { sizes[h] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	if sizes[ht] >= int64(len(text))/8 {
		t.Errorf("text of %d bytes stored in %d", len(text), sizes[ht])
	}
	if sizes[hn] != int64(len(noise)) {
		t.Errorf("noise of %d bytes stored in %d, want raw", len(noise), sizes[hn])
	}
	for h, want := range map[cas.Hash][]byte{ht: text, hn: noise} {
		got, err := s.Get(h)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Get %s: %d bytes, %v", h.Short(), len(got), err)
		}
	}
}

// A flipped byte in a stored object is ErrCorrupt for that object alone.
func TestLoggedCorruptObject(t *testing.T) {
	dir := t.TempDir()
	s, _ := newLogged(t, dir)
	noise := castest.Data(9, 10000)
	h, err := s.Put(noise)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Put(castest.Data(10, 10000))
	if err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "db.log", "0000000000000001.seg")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, noise[:64])
	if i < 0 {
		t.Fatal("object not found in the segment")
	}
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{^noise[100]}, int64(i+100)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := s.Get(h); !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("Get of a damaged object = %v, want ErrCorrupt", err)
	}
	if _, err := s.Get(other); err != nil {
		t.Fatalf("an intact object: %v", err)
	}
}
