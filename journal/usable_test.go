package journal

import (
	"sync/atomic"
	"testing"
)

// TestUsableMatchesAdmit: what statfs in the mount reports (Usable) is
// what Admit lets writers use: a write is admitted exactly while Usable
// holds twice its size, Usable is 0 when a write of one byte is refused,
// and it never goes below zero.
func TestUsableMatchesAdmit(t *testing.T) {
	const total = 64 << 20
	j := openT(t, t.TempDir(), Options{})
	var avail atomic.Uint64
	fakeFree(j, &avail)
	for _, n := range []uint64{1, 4096, 1 << 20} {
		var lo uint64 // the least free space that admits n bytes
		for a := uint64(0); a < total; a += 512 {
			if Usable(a, total) >= 2*n {
				lo = a
				break
			}
		}
		avail.Store(lo)
		if err := j.Admit(int(n), AdmitWrite); err != nil {
			t.Errorf("%d bytes with %d free (Usable %d): %v", n, lo, Usable(lo, total), err)
		}
		avail.Store(lo - 512)
		if err := j.Admit(int(n), AdmitWrite); err == nil {
			t.Errorf("%d bytes with %d free (Usable %d): admitted", n, lo-512, Usable(lo-512, total))
		}
	}
	for _, a := range []uint64{0, 1, reserveFor(total), reserveFor(total) + 2*prepSlack} {
		if u := Usable(a, total); u != 0 {
			t.Errorf("Usable(%d, %d) = %d, want 0", a, total, u)
		}
		avail.Store(a)
		if err := j.Admit(1, AdmitWrite); err == nil {
			t.Errorf("one byte admitted with %d free", a)
		}
	}
}
