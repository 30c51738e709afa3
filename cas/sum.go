package cas

import "github.com/zeebo/blake3"

// Sum returns the hash that names data: its 256-bit BLAKE3 digest. See the
// package documentation for why BLAKE3 and not SHA-256.
func Sum(data []byte) Hash { return blake3.Sum256(data) }

// Summer computes Sum of bytes that arrive in pieces: after Write(a) and
// Write(b), Sum() is Sum(a+b). BLAKE3 hashes 1 KiB chunks into a tree, and
// its state after a prefix is a stack of the finished subtrees' chaining
// values and the bytes of the unfinished chunk, so Sum of the prefix
// plus a tail costs the tail (and a copy of the state, some 11 KiB), not
// the prefix again: a file that grows 4 KiB per fsync (fio's write+fsync,
// a database's WAL, a log) pays for the 4 KiB it appended to its chunk
// instead of up to 64 KiB (fs/tree, Tree.Flush). The zero value is not
// ready: use NewSummer.
type Summer struct {
	h blake3.Hasher
	n int64
}

// NewSummer returns a Summer over no bytes yet.
func NewSummer() *Summer { return &Summer{h: *blake3.New()} }

// Write adds p to the bytes summed.
func (s *Summer) Write(p []byte) {
	_, _ = s.h.Write(p)
	s.n += int64(len(p))
}

// Len is how many bytes were written.
func (s *Summer) Len() int64 { return s.n }

// Sum returns the hash of every byte written so far; the Summer is left as
// it was (the digest is taken from a copy: zeebo/blake3's finalization
// rearranges the state it runs on), so more may be written after it.
func (s *Summer) Sum() Hash {
	c := s.h // a copy of the whole state: arrays, no pointers
	var h Hash
	c.Sum(h[:0])
	return h
}

// Clone returns a Summer with the same state, independent of s.
func (s *Summer) Clone() *Summer {
	c := *s
	return &c
}
