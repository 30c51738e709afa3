package main

import (
	"bytes"
	"fmt"

	"github.com/klauspost/compress/zstd"

	"github.com/reynfs/reynfs/cas"
)

// levels are the zstd levels measured. klauspost/compress has four;
// Fastest and Default are the candidates for a write path (Default is about
// zstd -3), Better shows what a background repack could buy.
var levels = []struct {
	name  string
	level zstd.EncoderLevel
}{
	{"fastest", zstd.SpeedFastest},
	{"default", zstd.SpeedDefault},
	{"better", zstd.SpeedBetterCompression},
}

// compressor holds one encoder per level and a decoder, so a measurement
// does not pay for building them per object.
type compressor struct {
	enc map[zstd.EncoderLevel]*zstd.Encoder
	dec *zstd.Decoder
}

func newCompressor() (*compressor, error) {
	c := &compressor{enc: map[zstd.EncoderLevel]*zstd.Encoder{}}
	for _, l := range levels {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(l.level), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("new encoder: %w", err)
		}
		c.enc[l.level] = e
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("new decoder: %w", err)
	}
	c.dec = d
	return c, nil
}

// stored is what one object costs stored compressed, as a pack would store
// it: the compressed frame, or the raw bytes when compression does not make
// it smaller (restic stores incompressible blobs raw; one flag bit in the
// pack index says which).
func stored(raw, z int) int64 { return int64(min(raw, z)) }

// size returns the stored size of data compressed alone at level.
func (c *compressor) size(data []byte, level zstd.EncoderLevel) int64 {
	z := c.enc[level].EncodeAll(data, nil)
	return stored(len(data), len(z))
}

// withDict returns the stored size of data compressed at the default level
// with dict as a raw dictionary (zstd's "patch from": the previous version
// of the same object as history, which is what git's deltas do). It checks
// that the frame decodes back to data with the same dictionary, so a number
// in the report is a representation that really round-trips.
func withDict(data, dict []byte) (int64, error) {
	if len(dict) < 8 { // zstd wants a few bytes of history
		dict = append(bytes.Repeat([]byte{0}, 8-len(dict)), dict...)
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(1), zstd.WithEncoderDictRaw(1, dict))
	if err != nil {
		return 0, fmt.Errorf("delta encoder: %w", err)
	}
	z := e.EncodeAll(data, nil)
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderDictRaw(1, dict))
	if err != nil {
		return 0, fmt.Errorf("delta decoder: %w", err)
	}
	defer d.Close()
	back, err := d.DecodeAll(z, nil)
	if err != nil || !bytes.Equal(back, data) {
		return 0, fmt.Errorf("delta round trip failed (%d bytes against a %d-byte base): %v", len(data), len(dict), err)
	}
	return stored(len(data), len(z)), nil
}

// packed returns the stored size of objects grouped into frames of about
// frame bytes (consecutive objects, never split), each frame compressed as
// one zstd frame at the default level: what a pack that compresses groups
// of blobs together would take. A read of one object then decompresses its
// whole frame, so the frame size bounds the read amplification.
func (c *compressor) packed(objects [][]byte, frame int) int64 {
	var total int64
	var buf []byte
	flush := func() {
		if len(buf) > 0 {
			total += c.size(buf, zstd.SpeedDefault)
			buf = buf[:0]
		}
	}
	for _, o := range objects {
		if len(buf) > 0 && len(buf)+len(o) > frame {
			flush()
		}
		buf = append(buf, o...)
	}
	flush()
	return total
}

// dictionary builds a zstd dictionary from samples (the first objects of
// one kind, up to 110 KiB of them, zstd's usual dictionary size) for
// per-object compression of the rest: the alternative to deltas when an
// object has no previous version to delta against.
func dictionary(samples [][]byte) (dict []byte, err error) {
	defer func() {
		// BuildDict (v1.18.0) divides by zero on some sample sets; that
		// is a dictionary we cannot build, reported as n/a
		if r := recover(); r != nil {
			dict, err = nil, fmt.Errorf("build dictionary: %v", r)
		}
	}()
	var hist []byte
	var contents [][]byte
	for _, s := range samples {
		if len(hist)+len(s) > 110<<10 {
			break
		}
		hist = append(hist, s...)
		contents = append(contents, s)
	}
	if len(contents) < 2 || len(hist) < 1<<10 {
		return nil, fmt.Errorf("build dictionary: %d samples of %d bytes are too few", len(contents), len(hist))
	}
	d, err := zstd.BuildDict(zstd.BuildDictOptions{ID: 7, Contents: contents, History: hist, Level: zstd.SpeedDefault})
	if err != nil {
		return nil, fmt.Errorf("build dictionary: %w", err)
	}
	return d, nil
}

// dictSizes returns the stored size of each object compressed alone at the
// default level with the trained dictionary dict, checking the round trip.
func dictSizes(objects [][]byte, dict []byte) (int64, error) {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(1), zstd.WithEncoderDict(dict))
	if err != nil {
		return 0, fmt.Errorf("dict encoder: %w", err)
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderDicts(dict))
	if err != nil {
		return 0, fmt.Errorf("dict decoder: %w", err)
	}
	defer d.Close()
	var total int64
	for _, o := range objects {
		z := e.EncodeAll(o, nil)
		back, err := d.DecodeAll(z, nil)
		if err != nil || !bytes.Equal(back, o) {
			return 0, fmt.Errorf("dict round trip failed: %v", err)
		}
		total += stored(len(o), len(z))
	}
	return total, nil
}

// cheapDelta returns the stored size of data as a delta against base that
// costs microseconds to compute: for two directory objects, the new one's
// header (its inode fields) and the entries added, changed or removed by
// name; for anything else the smaller of trimDelta and blockDelta.
func (c *compressor) cheapDelta(data, base []byte) int64 {
	a, errA := cas.DecodeInode(data)
	b, errB := cas.DecodeInode(base)
	if errA != nil || errB != nil || !a.IsDir() || !b.IsDir() {
		return min(c.trimDelta(data, base), c.blockDelta(data, base))
	}
	head := *a
	head.Entries = nil
	n := int64(len(cas.EncodeInode(&head)))
	old := make(map[string]cas.Entry, len(b.Entries))
	for _, e := range b.Entries {
		old[e.Name] = e
	}
	ops := 0
	for _, e := range a.Entries {
		if o, ok := old[e.Name]; ok && o == e {
			delete(old, e.Name)
			continue
		}
		delete(old, e.Name)
		ops++
		n += int64(1 + uvarintLen(uint64(len(e.Name))) + len(e.Name) + uvarintLen(e.Ino) + len(e.Object))
	}
	for name := range old {
		ops++
		n += int64(1 + uvarintLen(uint64(len(name))) + len(name))
	}
	n += int64(uvarintLen(uint64(ops)))
	return min(n, c.size(data, zstd.SpeedFastest))
}

// trimDelta returns the stored size of data as a trim delta against base:
// the lengths of the prefix and suffix it shares with base (uvarints) and
// the middle, zstd fastest or raw. It is what a checkpoint could afford to
// compute for every directory object it writes (one pass of compares, no
// encoder set up per base: a zstd encoder with a raw dictionary costs
// about 1.7 ms and 0.8 MB to build, see BenchmarkDirDelta), and it is
// exact for the common case of one entry changed.
func (c *compressor) trimDelta(data, base []byte) int64 {
	p := 0
	for p < len(data) && p < len(base) && data[p] == base[p] {
		p++
	}
	s := 0
	for s < len(data)-p && s < len(base)-p && data[len(data)-1-s] == base[len(base)-1-s] {
		s++
	}
	mid := data[p : len(data)-s]
	n := int64(uvarintLen(uint64(p)) + uvarintLen(uint64(s)))
	if len(mid) > 0 {
		n += c.size(mid, zstd.SpeedFastest)
	}
	return min(n, c.size(data, zstd.SpeedFastest))
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// blockDelta returns the stored size of data as the 4 KiB blocks in which
// it differs from base: a bitmap of them and their bytes, zstd fastest or
// raw. It is exact for writers that rewrite whole pages in place
// (databases), where trimDelta keeps everything between the first and the
// last changed page.
func (c *compressor) blockDelta(data, base []byte) int64 {
	const block = 4 << 10
	var changed []byte
	blocks := 0
	for off := 0; off < len(data); off += block {
		blocks++
		end := min(off+block, len(data))
		if end <= len(base) && bytes.Equal(data[off:end], base[off:end]) {
			continue
		}
		changed = append(changed, data[off:end]...)
	}
	n := int64((blocks + 7) / 8)
	if len(changed) > 0 {
		n += c.size(changed, zstd.SpeedFastest)
	}
	return n
}
