package journal

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Key layout (see doc.go for the table). Prefixes are single bytes so one
// Badger iterator with a prefix walks one kind of key.
const (
	prefixRecord = 'j' // 'j' + 8-byte big-endian seq -> encoded record
	prefixReset  = 'r' // 'r' + 8-byte big-endian seq -> encoded OpReset record
)

var (
	keyFormat  = []byte("m/format") // store format version, decimal
	keySeq     = []byte("m/seq")    // highest seq ever committed, 8-byte big-endian
	metaPrefix = "m/k/"             // daemon bookkeeping (GetMeta/SetMeta)
)

// storeFormat is the store format this reynfs reads and writes: 3 stores
// objects as deltas against their previous version (cas/doc.go,
// "Deltas"), which a format-2 reader would take for damage and whose bases
// its collector would sweep; 4 logs whole objects without their names
// (cas/frame.go, entryBare), which a format-3 reader would take for
// damage; 5 packs small objects (cas/pack.go), whose log entries and
// index entries a format-4 reader would take for damage; 6 writes each
// frame's synced-through mark in its header (cas/frame.go), whose frames
// a format-5 reader would take for a torn tail and cut, and compact index
// entries (cas/loc.go), which a format-5 reader would take for damage. A
// writable open upgrades 1 to 5 by writing the version: every older entry
// still reads, and format-5 frames are read as frames without marks.
const storeFormat = 6

// formatLog is the first format with a segment log.
const formatLog = 2

// StoreFormat is storeFormat for those who report it ('reynfs version'):
// a store of another format is refused with ErrFormat.
const StoreFormat = storeFormat

func seqKey(prefix byte, seq uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

// keySeqOf returns the seq of a 'j' or 'r' key.
func keySeqOf(k []byte) (uint64, error) {
	if len(k) != 9 {
		return 0, fmt.Errorf("%w: key %q is not prefix+8-byte seq", ErrCorrupt, k)
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

func uint64Bytes(v uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, v)
}

func parseUint64(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: %d-byte counter, want 8", ErrCorrupt, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

func formatBytes(v int) []byte { return []byte(strconv.Itoa(v)) }

func parseFormat(b []byte) (int, error) {
	v, err := strconv.Atoi(string(b))
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%w: format version %q is not a number", ErrCorrupt, b)
	}
	return v, nil
}

func metaKey(key string) ([]byte, error) {
	if key == "" {
		return nil, fmt.Errorf("%w: empty meta key", ErrInvalid)
	}
	return []byte(metaPrefix + key), nil
}
