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

// TestLooksRandomNeverSkipsCompressible: on samples between random and
// compressible (a restricted alphabet, a share of repeated runs, a share
// of text), whatever looksRandom skips, zstd would not have compressed.
func TestLooksRandomNeverSkipsCompressible(t *testing.T) {
	enc, _, err := codecs()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(13, 14))
	text := bytes.Repeat([]byte("if err != nil {\n\treturn fmt.Errorf(\"commit: %w\", err)\n}\n"), 100)
	skipped := 0
	for k := range 600 {
		s := make([]byte, sampleSize)
		alphabet := 64 + rng.IntN(193)
		for i := range s {
			s[i] = byte(rng.IntN(alphabet))
		}
		share := rng.IntN(40) // percent of the sample overwritten
		for done := 0; done*100 < share*len(s); {
			run := 4 + rng.IntN(60)
			at := rng.IntN(len(s) - run)
			if k%2 == 0 && at >= run { // a repeat of earlier bytes
				src := rng.IntN(at - run + 1)
				copy(s[at:at+run], s[src:src+run])
			} else { // text
				copy(s[at:at+run], text[rng.IntN(len(text)-run):])
			}
			done += run
		}
		if !looksRandom(s) {
			continue
		}
		skipped++
		if z := enc.EncodeAll(s, nil); len(z) <= len(s)-len(s)/8 {
			t.Fatalf("sample %d (alphabet %d, %d%% overwritten) skipped, but zstd takes it to %d bytes", k, alphabet, share, len(z))
		}
	}
	t.Logf("%d of 600 samples skipped", skipped)
	if skipped == 0 {
		t.Fatal("nothing skipped: the test does not reach the boundary")
	}
}
