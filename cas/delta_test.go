package cas

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// mutate returns a copy of b with a few random edits: bytes changed,
// ranges inserted and deleted, as versions of one object differ.
func mutate(r *rand.Rand, b []byte) []byte {
	out := bytes.Clone(b)
	for range r.IntN(6) {
		switch r.IntN(3) {
		case 0:
			if len(out) > 0 {
				out[r.IntN(len(out))] ^= byte(1 + r.IntN(255))
			}
		case 1:
			at := r.IntN(len(out) + 1)
			ins := make([]byte, r.IntN(64))
			for i := range ins {
				ins[i] = byte(r.Uint32())
			}
			out = append(out[:at], append(ins, out[at:]...)...)
		case 2:
			if len(out) > 0 {
				at := r.IntN(len(out))
				n := min(r.IntN(64), len(out)-at)
				out = append(out[:at], out[at+n:]...)
			}
		}
	}
	return out
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestDeltaRoundTrip: for random bases and edited targets (and unrelated
// ones, and the empty cases), Undelta(base, Delta(base, t)) == t.
func TestDeltaRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		base := randomBytes(r, r.IntN(9000))
		var target []byte
		switch i % 4 {
		case 0:
			target = randomBytes(r, r.IntN(300))
		default:
			target = mutate(r, base)
		}
		if i%7 == 0 {
			// Repetitive content: many equal blocks.
			base = bytes.Repeat([]byte("0123456789abcdef"), r.IntN(100))
			target = mutate(r, base)
		}
		d := Delta(base, target)
		got, err := Undelta(base, d, len(target))
		if err != nil || !bytes.Equal(got, target) {
			t.Fatalf("case %d: base %d bytes, target %d, delta %d: err %v, round trip equal %v",
				i, len(base), len(target), len(d), err, bytes.Equal(got, target))
		}
		if n, err := DeltaTargetLen(d); err != nil || n != len(target) {
			t.Fatalf("case %d: DeltaTargetLen %d, %v; want %d", i, n, err, len(target))
		}
		if len(target) > 0 {
			if _, err := Undelta(base, d, len(target)-1); !errors.Is(err, ErrBadDelta) {
				t.Fatalf("case %d: a target over the limit decoded (%v)", i, err)
			}
		}
	}
}

// TestDeltaDirectory: a directory object with one child's hash changed
// (and its mtime) deltas to a few dozen bytes, the point of the codec.
func TestDeltaDirectory(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	dir := &Inode{Ino: 1, Mode: 0o40755, Mtime: 1e18}
	for i := range 100 {
		var h Hash
		copy(h[:], randomBytes(r, 32))
		dir.Entries = append(dir.Entries, Entry{Name: string(rune('a'+i/26)) + string(rune('a'+i%26)) + ".go", Ino: uint64(i + 2), Object: h})
	}
	base := EncodeInode(dir)
	dir.Mtime += 12345
	dir.Entries[57].Object[3] ^= 1
	copy(dir.Entries[58].Object[:], randomBytes(r, 32))
	target := EncodeInode(dir)
	d := Delta(base, target)
	if len(d) > 100 {
		t.Fatalf("delta of a %d-byte directory with two children changed is %d bytes", len(target), len(d))
	}
	got, err := Undelta(base, d, len(target))
	if err != nil || !bytes.Equal(got, target) {
		t.Fatalf("round trip: %v", err)
	}
}

// TestUndeltaRefuses: hand-made bad deltas are errors.
func TestUndeltaRefuses(t *testing.T) {
	base := []byte("0123456789abcdef0123")
	for name, d := range map[string][]byte{
		"empty":            {},
		"wrong base len":   {19, 4, 4<<1 | 1, 0},
		"copy past base":   {20, 4, 4<<1 | 1, 17},
		"insert past end":  {20, 4, 4 << 1, 'a'},
		"zero-length op":   {20, 4, 0, 4<<1 | 1, 0},
		"more than target": {20, 4, 5<<1 | 1, 0},
		"less than target": {20, 4, 3<<1 | 1, 0},
		"truncated varint": {20, 4, 0x80},
		"huge target":      {20, 0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		if _, err := Undelta(base, d, 1<<20); !errors.Is(err, ErrBadDelta) {
			t.Errorf("%s: %v, want ErrBadDelta", name, err)
		}
	}
}

// FuzzUndelta feeds hostile deltas to Undelta: never a panic, never more
// than the limit, and what it accepts has the declared length.
func FuzzUndelta(f *testing.F) {
	base := []byte("the quick brown fox jumps over the lazy dog, 0123456789abcdef")
	f.Add(base, Delta(base, []byte("the quick brown cat jumps over the lazy dog, 0123456789abcdef!")))
	f.Add(base, []byte{})
	f.Add([]byte{}, Delta(nil, []byte("x")))
	f.Fuzz(func(t *testing.T, base, d []byte) {
		const limit = 1 << 16
		out, err := Undelta(base, d, limit)
		if err != nil {
			if out != nil {
				t.Fatal("output with an error")
			}
			return
		}
		n, err := DeltaTargetLen(d)
		if err != nil || n != len(out) || len(out) > limit {
			t.Fatalf("accepted %d bytes, declared %d (%v), limit %d", len(out), n, err, limit)
		}
	})
}

// FuzzDeltaRoundTrip: any base and target round-trip.
func FuzzDeltaRoundTrip(f *testing.F) {
	f.Add([]byte("0123456789abcdef0123456789abcdef"), []byte("0123456789abcdeX0123456789abcdef"))
	f.Add([]byte{}, []byte("abc"))
	f.Fuzz(func(t *testing.T, base, target []byte) {
		got, err := Undelta(base, Delta(base, target), len(target))
		if err != nil || !bytes.Equal(got, target) {
			t.Fatalf("round trip failed: %v", err)
		}
	})
}

func BenchmarkDelta(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	base := randomBytes(r, 4000)
	target := mutate(r, base)
	b.SetBytes(int64(len(target)))
	for b.Loop() {
		Delta(base, target)
	}
}

// BenchmarkDeltaDirectory: a 4 KB and a 400 KB directory-like object with
// one 32-byte child hash changed (what a checkpoint encodes per directory).
func BenchmarkDeltaDirectory(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, size := range []int{4000, 400000} {
		base := randomBytes(r, size)
		target := bytes.Clone(base)
		copy(target[size/3:], randomBytes(r, 32))
		b.Run(fmt.Sprintf("%dKB", size/1000), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				Delta(base, target)
			}
		})
	}
}
