package cas

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestEncodeFrameParts checks that a frame written from its pieces (blob
// data in place, small blobs and ops copied) parses back to the same
// blobs at the offsets encodeFrame reported, and ops in order.
func TestEncodeFrameParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var blobs []stored
	for _, size := range []int{0, 1, minPiece - 1, minPiece, 64 << 10, 100, 3 * minPiece} {
		d := make([]byte, size)
		for i := range d {
			d[i] = byte(rng.Uint32())
		}
		blobs = append(blobs, stored{h: Sum(d), raw: size, data: d})
	}
	ops := []Op{{Key: []byte("k1"), Val: []byte("v1")}, {Key: []byte("k2"), Del: true}}
	for _, tc := range []struct {
		name  string
		blobs []stored
		ops   []Op
	}{{"mixed", blobs, ops}, {"blobs", blobs, nil}, {"ops", nil, ops}, {"large first", blobs[4:5], nil}, {"empty", nil, nil}} {
		t.Run(tc.name, func(t *testing.T) {
			v, offs := encodeFrame(3, 9, tc.blobs, tc.ops)
			frame := v.bytes()
			if len(frame) != v.len() {
				t.Fatalf("len %d, pieces hold %d", v.len(), len(frame))
			}
			fh, err := parseFrameHeader(frame)
			if err != nil || fh.first != 3 || fh.last != 9 || fh.length != len(frame)-frameHeaderSize {
				t.Fatalf("header %+v, %v", fh, err)
			}
			payload := frame[frameHeaderSize:]
			if crc32.Checksum(payload, castagnoli) != fh.crc {
				t.Fatal("payload checksum does not match")
			}
			got, gotOps, err := decodePayload(payload)
			if err != nil || len(got) != len(tc.blobs) || len(gotOps) != len(tc.ops) {
				t.Fatalf("decoded %d blobs, %d ops, %v", len(got), len(gotOps), err)
			}
			for i, e := range got {
				b := tc.blobs[i]
				if e.h != b.h || !bytes.Equal(e.data, b.data) || e.loc.Off+frameHeaderSize != offs[i] {
					t.Fatalf("blob %d: offset %d, encoder said %d", i, e.loc.Off+frameHeaderSize, offs[i])
				}
				if !bytes.Equal(frame[offs[i]:offs[i]+int64(len(b.data))], b.data) {
					t.Fatalf("blob %d not at its offset", i)
				}
			}
			for i, o := range gotOps {
				if !bytes.Equal(o.Key, tc.ops[i].Key) || !bytes.Equal(o.Val, tc.ops[i].Val) || o.Del != tc.ops[i].Del {
					t.Fatalf("op %d: %+v", i, o)
				}
			}
		})
	}
}

// TestPwritevManyParts writes more pieces than one pwritev takes, and a
// prefix that ends inside a piece (the crash tests' half frame).
func TestPwritevManyParts(t *testing.T) {
	var parts [][]byte
	var want []byte
	for i := range 3*iovMax + 7 {
		p := bytes.Repeat([]byte{byte(i)}, 1+i%5)
		parts = append(parts, p)
		want = append(want, p...)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range []int64{int64(len(want)), int64(len(want)) / 2, 3} {
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if err := pwritev(f, parts, 10, n); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n+10)
		if _, err := f.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[10:], want[:n]) {
			t.Fatalf("%d bytes: file differs", n)
		}
		if st, _ := f.Stat(); st.Size() != n+10 {
			t.Fatalf("%d bytes: file is %d long", n, st.Size())
		}
	}
}
