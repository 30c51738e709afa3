package cas

import (
	"bytes"
	"testing"
)

// FuzzDecodeInode feeds garbage to DecodeInode: it must never panic, and what
// it accepts must be canonical (re-encoding gives the same bytes), otherwise
// one inode could be stored under two hashes.
func FuzzDecodeInode(f *testing.F) {
	for _, in := range testInodes() {
		f.Add(EncodeInode(in))
	}
	f.Add([]byte{})
	f.Add([]byte{inodeV1})
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := DecodeInode(b)
		if err != nil {
			if in != nil {
				t.Fatal("inode returned with an error")
			}
			return
		}
		if err := in.Validate(); err != nil {
			t.Fatalf("decoded inode does not validate: %v", err)
		}
		if again := EncodeInode(in); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, again)
		}
	})
}
