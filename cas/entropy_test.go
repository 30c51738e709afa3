package cas

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestLooksRandomAgreesWithZstd: the shortcut skips only samples that the
// zstd attempt would also have found incompressible (compressed to more
// than 7/8), and it does skip random bytes.
func TestLooksRandomAgreesWithZstd(t *testing.T) {
	enc, _, err := codecs()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	symbols := func(n int) []byte {
		b := make([]byte, sampleSize)
		for i := range b {
			b[i] = byte(rng.IntN(n))
		}
		return b
	}
	repeated := func(period int) []byte {
		blk := symbols(256)[:period]
		return bytes.Repeat(blk, sampleSize/period+1)[:sampleSize]
	}
	text := bytes.Repeat([]byte("func (l *Live) WriteAt(c Caller, ino uint64) error {\n\treturn nil\n}\n"), 80)[:sampleSize]
	mostlyRandom := symbols(256)
	copy(mostlyRandom[2048:], mostlyRandom[:512]) // one repeat of an eighth
	cases := []struct {
		name   string
		data   []byte
		random bool // what looksRandom must say
	}{
		{"random", symbols(256), true},
		{"200 symbols", symbols(200), true},
		{"64 symbols", symbols(64), false},
		{"text", text, false},
		{"random 1 KiB repeated", repeated(1024), false},
		{"random 100 B repeated", repeated(100), false},
		{"random with an eighth repeated", mostlyRandom, false},
		{"zeros", make([]byte, sampleSize), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := looksRandom(c.data)
			if got != c.random {
				t.Errorf("looksRandom = %v, want %v", got, c.random)
			}
			z := enc.EncodeAll(c.data, nil)
			zstdSaves := len(z) <= len(c.data)-len(c.data)/8
			if got && zstdSaves {
				t.Errorf("skipped, but zstd takes it from %d to %d bytes", len(c.data), len(z))
			}
		})
	}
	big := append(symbols(256), bytes.Repeat(symbols(256), 15)...)
	if compressible(enc, big) {
		t.Error("a chunk of random bytes is compressible")
	}
}

func BenchmarkCompressibleRandomChunk(b *testing.B) {
	enc, _, _ := codecs()
	d := make([]byte, ChunkSize)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range d {
		d[i] = byte(rng.Uint32())
	}
	for b.Loop() {
		compressible(enc, d)
	}
}

func BenchmarkLooksRandom(b *testing.B) {
	d := make([]byte, sampleSize)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range d {
		d[i] = byte(rng.Uint32())
	}
	for b.Loop() {
		looksRandom(d)
	}
}
