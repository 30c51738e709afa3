package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/restic/chunker"
)

// A splitter cuts one file version into chunks (slices of data).
type splitter struct {
	name  string
	split func(data []byte) ([][]byte, error)
}

func fixed(size int) func([]byte) ([][]byte, error) {
	return func(data []byte) ([][]byte, error) {
		var out [][]byte
		for len(data) > 0 {
			n := min(size, len(data))
			out = append(out, data[:n])
			data = data[n:]
		}
		return out, nil
	}
}

// resticPol is a fixed irreducible polynomial (the one restic's own tests
// use), so runs are repeatable; restic picks one per repository.
const resticPol = chunker.Pol(0x3DA3358B4DC173)

// rabin is restic's content-defined chunker (a Rabin fingerprint over a
// 64-byte window) with the given bounds and an average of 2^avgBits bytes.
func rabin(minSize, maxSize uint, avgBits int) func([]byte) ([][]byte, error) {
	return func(data []byte) ([][]byte, error) {
		c := chunker.NewWithBoundaries(bytes.NewReader(data), resticPol, minSize, maxSize)
		c.SetAverageBits(avgBits)
		buf := make([]byte, maxSize)
		var out [][]byte
		var off uint
		for {
			ch, err := c.Next(buf)
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return nil, fmt.Errorf("restic chunker: %w", err)
			}
			out = append(out, data[off:off+ch.Length])
			off += ch.Length
		}
	}
}

// gear is FastCDC's table of 256 random 64-bit values (splitmix64 from a
// fixed seed, so runs are repeatable).
var gear = func() (t [256]uint64) {
	x := uint64(0x5eed)
	for i := range t {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		t[i] = z ^ z>>31
	}
	return t
}()

// fastCDC is FastCDC (Xia et al., USENIX ATC 2016) with normalized
// chunking, level 2: a gear rolling hash, cut points tested from minSize
// on, a stricter mask (2 more bits) below the average size and a looser
// one (2 fewer) above it, which narrows the size distribution. The masks
// take the hash's high bits, which depend on the last 64 bytes (a gear
// hash shifts left, so its low bits see only the last few).
func fastCDC(minSize, avg, maxSize int) func([]byte) ([][]byte, error) {
	b := bits.Len(uint(avg)) - 1
	maskS := ^uint64(0) << (64 - (b + 2))
	maskL := ^uint64(0) << (64 - (b - 2))
	return func(data []byte) ([][]byte, error) {
		var out [][]byte
		for len(data) > 0 {
			n := cdcCut(data, minSize, avg, maxSize, maskS, maskL)
			out = append(out, data[:n])
			data = data[n:]
		}
		return out, nil
	}
}

func cdcCut(data []byte, minSize, avg, maxSize int, maskS, maskL uint64) int {
	n := len(data)
	if n <= minSize {
		return n
	}
	n = min(n, maxSize)
	normal := min(avg, n)
	var fp uint64
	i := minSize
	for ; i < normal; i++ {
		fp = fp<<1 + gear[data[i]]
		if fp&maskS == 0 {
			return i + 1
		}
	}
	for ; i < n; i++ {
		fp = fp<<1 + gear[data[i]]
		if fp&maskL == 0 {
			return i + 1
		}
	}
	return n
}

// splitters are the chunkings compared: reynfs's fixed 64 KiB, a smaller
// fixed size, and two content-defined chunkers at the same average (64
// KiB, bounds 16 KiB to 256 KiB), plus restic's own defaults (512 KiB to
// 8 MiB, 1 MiB average) for scale.
var splitters = []splitter{
	{"fixed 64 KiB (now)", fixed(64 << 10)},
	{"fixed 16 KiB", fixed(16 << 10)},
	{"FastCDC 16/64/256 KiB", fastCDC(16<<10, 64<<10, 256<<10)},
	{"restic Rabin 16/64/256 KiB", rabin(16<<10, 256<<10, 16)},
	{"restic Rabin 512K/1M/8M (restic default)", rabin(512<<10, 8<<20, 20)},
}
