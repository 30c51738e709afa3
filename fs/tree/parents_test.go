package tree

import (
	"maps"
	"testing"
)

// TestParentSet checks the inline-first-parent set against a plain map
// through hard-link-like sequences: several parents, repeated names in one
// directory, removal of the inline parent while others remain.
func TestParentSet(t *testing.T) {
	var s parentSet
	want := map[uint64]int{}
	check := func(step string) {
		t.Helper()
		got := maps.Collect(s.all())
		if !maps.Equal(got, want) {
			t.Fatalf("%s: set %v, want %v", step, got, want)
		}
		if s.len() != len(want) {
			t.Fatalf("%s: len %d, want %d", step, s.len(), len(want))
		}
		for p, n := range want {
			if s.count(p) != n {
				t.Fatalf("%s: count(%d) %d, want %d", step, p, s.count(p), n)
			}
		}
	}
	add := func(p uint64) { s.add(p); want[p]++; check("add") }
	remove := func(p uint64) {
		empty := s.remove(p)
		if want[p]--; want[p] <= 0 {
			delete(want, p)
		}
		check("remove")
		if empty != (len(want) == 0) {
			t.Fatalf("remove(%d) reported empty=%v with %v left", p, empty, want)
		}
	}
	check("zero")
	add(5)
	add(5)
	add(7)
	add(9)
	add(7)
	remove(5)
	remove(5) // the inline parent goes; one of the others takes its place
	remove(42)
	add(5)
	remove(7)
	remove(9)
	remove(7)
	remove(5)
	if s.more != nil {
		t.Fatalf("empty set keeps its overflow map")
	}
	add(3)
	remove(3)
}
