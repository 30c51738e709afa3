package main

import (
	"testing"
	"time"
)

func TestImportDesc(t *testing.T) {
	for _, c := range []struct {
		files   int
		elapsed time.Duration
		want    string
	}{
		{1, 10 * time.Millisecond, "importing 1 file"},
		{500, 900 * time.Millisecond, "importing 500 files"},
		{30000, 2 * time.Second, "importing 30000 files at 15000 files/s"},
	} {
		if got := importDesc(c.files, c.elapsed); got != c.want {
			t.Errorf("importDesc(%d, %v) = %q, want %q", c.files, c.elapsed, got, c.want)
		}
	}
}

// TestThrottle: a first mount calls Progress once a file; the terminal
// sees at most ten updates a second.
func TestThrottle(t *testing.T) {
	calls := 0
	f := throttle(func(int, int64) { calls++ })
	start := time.Now()
	for i := range 100000 {
		f(i, int64(i))
	}
	if limit := 1 + int(time.Since(start)/(100*time.Millisecond)); calls < 1 || calls > limit {
		t.Errorf("%d updates in %v, want 1..%d", calls, time.Since(start), limit)
	}
}
