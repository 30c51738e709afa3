package cas

import (
	"errors"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// locCases are one index entry of each kind, with fields wide enough to
// take several uvarint bytes.
func locCases() []Loc {
	return []Loc{
		{Seg: 1, Off: 64, Stored: 3000, Raw: 3000, Comp: compRaw},
		{Seg: 7, Off: 1 << 40, Stored: 1 << 20, Raw: 4 << 20, Comp: compZstd},
		{Seg: 2, Off: 123456, Stored: 80, Raw: 4100, Comp: compDelta, Base: Sum([]byte("base")), Depth: 31},
		{Seg: 3, Off: 99999, Stored: 20000, Raw: 4000, Comp: compPack, In: 12000, PackRaw: 65000},
	}
}

// TestLocCompact: a compact entry decodes to the Loc it was made of, as
// the fixed-width entry of formats 2-5 still does, and is shorter.
func TestLocCompact(t *testing.T) {
	for _, l := range locCases() {
		c, f := l.encode(), l.encodeFixed()
		if len(c) >= len(f) || c[0]&locCompactTag == 0 || f[0]&locCompactTag != 0 {
			t.Errorf("%+v: compact %x, fixed %x", l, c, f)
		}
		for _, b := range [][]byte{c, f} {
			got, err := decodeLoc(b)
			if err != nil || got != l {
				t.Errorf("decode %x = %+v, %v, want %+v", b, got, err, l)
			}
		}
	}
}

// TestLocCompactDamage: a compact entry encodeCompact would not write is
// damage, not a location.
func TestLocCompactDamage(t *testing.T) {
	cs := locCases()
	pack := cs[3]
	pack.In = pack.PackRaw - pack.Raw + 1
	delta := cs[2]
	delta.Depth = 0
	bad := map[string][]byte{
		"empty after tag":    {locCompactTag},
		"unknown comp":       append([]byte{locCompactTag | 4}, cs[0].encode()[1:]...),
		"trailing byte":      append(cs[0].encode(), 0),
		"truncated base":     cs[2].encode()[:10],
		"depth 0":            delta.encode(),
		"outside its pack":   pack.encode(),
		"truncated pack":     cs[3].encode()[:len(cs[3].encode())-1],
		"stored over 32 bit": {locCompactTag, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x10, 1},
	}
	for name, b := range bad {
		if l, err := decodeLoc(b); !errors.Is(err, ErrDamaged) {
			t.Errorf("%s: decode %x = %+v, %v, want ErrDamaged", name, b, l, err)
		}
	}
}

func FuzzDecodeLoc(f *testing.F) {
	for _, l := range locCases() {
		f.Add(l.encode())
		f.Add(l.encodeFixed())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeLoc(b)
		if err != nil {
			return
		}
		if b[0]&locCompactTag != 0 {
			if again, err := decodeLoc(l.encode()); err != nil || again != l {
				t.Fatalf("%x decodes to %+v, which does not round-trip: %+v, %v", b, l, again, err)
			}
		}
	})
}

// RewriteIndexFixed rewrites every object index entry of db as the
// format-5 code wrote it (fixed width), as a store upgraded from format
// 5 holds them, and returns how many it rewrote.
func RewriteIndexFixed(db *badger.DB) (int, error) {
	n := 0
	err := db.Update(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.Prefix = []byte{LogPrefix}
		it := txn.NewIterator(o)
		var keys, vals [][]byte
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				it.Close()
				return err
			}
			l, err := decodeLoc(v)
			if err != nil {
				it.Close()
				return err
			}
			keys, vals = append(keys, it.Item().KeyCopy(nil)), append(vals, l.encodeFixed())
		}
		it.Close()
		for i := range keys {
			if err := txn.Set(keys[i], vals[i]); err != nil {
				return err
			}
		}
		n = len(keys)
		return nil
	})
	return n, err
}

// IndexEntryCompact reports whether h's index entry in db is compact.
func IndexEntryCompact(db *badger.DB, h Hash) (bool, error) {
	var compact bool
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(logKey(h))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			compact = len(v) > 0 && v[0]&locCompactTag != 0
			return nil
		})
	})
	return compact, err
}

// TestSameIndexEntry: the two forms of one location are the same entry;
// another location, or damage, is not.
func TestSameIndexEntry(t *testing.T) {
	cs := locCases()
	for i, l := range cs {
		if !SameIndexEntry(l.encode(), l.encodeFixed()) || !SameIndexEntry(l.encodeFixed(), l.encode()) {
			t.Errorf("%+v: its two forms differ", l)
		}
		other := cs[(i+1)%len(cs)]
		if SameIndexEntry(l.encode(), other.encodeFixed()) {
			t.Errorf("%+v is the same entry as %+v", l, other)
		}
		if SameIndexEntry(l.encode(), l.encode()[:2]) {
			t.Errorf("%+v is the same entry as its damaged form", l)
		}
	}
}
