package main

import (
	"testing"
	"time"

	"github.com/reynfs/reynfs/agents/api"
)

// TestCheckpointLine: a checkpoint without -m prints no empty label.
func TestCheckpointLine(t *testing.T) {
	root := "0123456789abcdef0123"
	for _, c := range []struct {
		g    api.Gen
		want string
	}{
		{api.Gen{ID: 3, Seq: 5, Kind: "manual", Root: root, Took: 3170 * time.Microsecond}, "g3 at seq 5 (manual) root 0123456789ab in 3.17ms"},
		{api.Gen{ID: 2, Seq: 3, Kind: "turn", Label: "tests pass", Root: root, Took: time.Millisecond}, `g2 at seq 3 (turn) "tests pass" root 0123456789ab in 1ms`},
	} {
		if got := checkpointLine(&c.g); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}
