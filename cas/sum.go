package cas

import "github.com/zeebo/blake3"

// Sum returns the hash that names data: its 256-bit BLAKE3 digest. See the
// package documentation for why BLAKE3 and not SHA-256.
func Sum(data []byte) Hash { return blake3.Sum256(data) }
