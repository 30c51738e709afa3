package journal

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"strconv"
	"strings"
	"testing"
)

// logEntry encodes one entry as Badger's logFile.encodeEntry does.
func logEntry(meta byte, key, val []byte) []byte {
	b := []byte{meta, 0}
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = binary.AppendUvarint(b, uint64(len(val)))
	b = binary.AppendUvarint(b, 0)
	b = append(append(b, key...), val...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// logTxn is one committed transaction: its entries, then the finishing one.
func logTxn(ts uint64, vals ...string) []byte {
	var b []byte
	k := func(name string) []byte {
		return binary.BigEndian.AppendUint64([]byte(name), math.MaxUint64-ts)
	}
	for i, v := range vals {
		b = append(b, logEntry(logBitTxn, k("key"+strconv.Itoa(i)), []byte(v))...)
	}
	return append(b, logEntry(logBitFinTxn, k("!badger!txn"), []byte(strconv.FormatUint(ts, 10)))...)
}

func scanBytes(b []byte) logScan {
	return scanLogBytes(b, func(from int64) int64 {
		for i := len(b) - 1; i >= int(from); i-- {
			if b[i] != 0 {
				return int64(i)
			}
		}
		return -1
	})
}

// TestScanLog checks the line scanLogBytes draws between what a kill -9
// leaves (accepted: Badger truncates it, nothing acknowledged is lost) and
// damage that a truncation would turn into silent loss (refused).
func TestScanLog(t *testing.T) {
	head := make([]byte, logFileHeader)
	t1 := logTxn(1, "one", strings.Repeat("x", 300))
	t2 := logTxn(2, "two")
	t3 := logTxn(3, "three", "more")
	pad := make([]byte, 4096)
	join := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	torn := func(txn []byte, keep func(i int) bool) []byte {
		c := append([]byte(nil), txn...)
		for i := range c {
			if !keep(i) {
				c[i] = 0
			}
		}
		return c
	}
	flipped := func(b []byte, at int) []byte {
		c := append([]byte(nil), b...)
		c[at] ^= 0x5a
		return c
	}
	whole := int64(logFileHeader + len(t1) + len(t2))
	for _, c := range []struct {
		name   string
		b      []byte
		end    int64
		damage bool
	}{
		{"clean", join(head, t1, t2, pad), whole, false},
		{"unfinished txn", join(head, t1, t2, t3[:len(t3)-20], pad), whole, false},
		{"prefix copied", join(head, t1, t2, t3[:17], pad), whole, false},
		{"head copied last", join(head, t1, t2, torn(t3, func(i int) bool { return i > 20 && i < 40 }), pad), whole, false},
		{"cut at EOF", join(head, t1, t2, t3[:30]), whole, false},
		// File content that holds an older Badger log, torn: not damage.
		{"torn entry holding a log", join(head, t1, t2, torn(logEntry(0, []byte("okey\x00\x00\x00\x00\x00\x00\x00\x09"),
			join(logTxn(0, "foreign"), pad[:64])), func(i int) bool { return i > 12 }), pad), whole, false},
		{"flip in a middle txn", join(head, flipped(t1, 40), t2, t3, pad), logFileHeader, true},
		{"flip in a header", join(head, t1, flipped(t2, 3), t3, pad), int64(logFileHeader + len(t1)), true},
		{"flip in the last txn", join(head, t1, t2, flipped(t3, 10), pad), whole, true},
		// A bad last entry looks like a torn one; the manifest's durable
		// seq catches it when it held synced history.
		{"flip in the last entry", join(head, t1, t2, flipped(t3, len(t3)-6), pad), whole, false},
	} {
		s := scanBytes(c.b)
		if s.End != c.end || (s.Damage != "") != c.damage {
			t.Errorf("%s: end %d damage %q; want end %d, damage %v", c.name, s.End, s.Damage, c.end, c.damage)
		}
	}
}
