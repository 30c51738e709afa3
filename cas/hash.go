package cas

import (
	"encoding/hex"
	"fmt"
)

// Hash names one object by the hash of its bytes. It is the one shared
// vocabulary type of reynfs: chunks, file manifests, directory manifests and
// tree roots are all named by a Hash.
type Hash [32]byte

// Zero is the all-zero Hash. It names no object (it is not Sum of any
// bytes, not even of none); a file's chunk list uses it for a hole.
var Zero Hash

// IsZero reports whether h is the zero hash.
func (h Hash) IsZero() bool { return h == Zero }

// String returns the full lowercase hex form.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// Short returns the first 12 hex digits, for people.
func (h Hash) Short() string { return hex.EncodeToString(h[:6]) }

// Parse reads the full hex form written by String.
func Parse(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("parse hash %q: want %d hex digits", s, 2*len(h))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("parse hash %q: %w", s, err)
	}
	return h, nil
}

// MarshalText writes the hex form (JSON shows hashes as strings).
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText reads the hex form.
func (h *Hash) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*h = p
	return nil
}
