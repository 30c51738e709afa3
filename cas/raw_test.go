package cas_test

import (
	"bytes"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/castest"
)

// TestLoggedRawBlob: a blob its writer judged incompressible (Blob.Raw) is
// stored as it is, and reads back; Incompressible says so of noise and not
// of text.
func TestLoggedRawBlob(t *testing.T) {
	s, _ := newLogged(t, t.TempDir())
	text := bytes.Repeat([]byte("func main() { fmt.Println(\"hello\") }\n"), 1700)
	noise := castest.Data(8, 64<<10)
	if cas.Incompressible(text) || !cas.Incompressible(noise) {
		t.Fatalf("Incompressible: text %v, noise %v", cas.Incompressible(text), cas.Incompressible(noise))
	}
	ht, hn := cas.Sum(text), cas.Sum(noise)
	f := &cas.Frame{Blobs: []cas.Blob{{Hash: ht, Data: text, Raw: true}, {Hash: hn, Data: noise, Raw: true}}}
	if _, _, err := s.Commit(f); err != nil {
		t.Fatal(err)
	}
	sizes := map[cas.Hash]int64{}
	if err := s.Each(func(h cas.Hash, n int64) error { sizes[h] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	if sizes[ht] != int64(len(text)) || sizes[hn] != int64(len(noise)) {
		t.Errorf("raw blobs of %d and %d bytes stored in %d and %d", len(text), len(noise), sizes[ht], sizes[hn])
	}
	for h, want := range map[cas.Hash][]byte{ht: text, hn: noise} {
		got, err := s.Get(h)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Get %s: %d bytes, %v", h.Short(), len(got), err)
		}
	}
}
