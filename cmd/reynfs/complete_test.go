package main

import (
	"strings"
	"testing"
	"time"

	"github.com/reynfs/reynfs/agents/api"
)

func TestTargetCompletions(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	l := &api.LogResult{Gens: []api.LogEntry{
		{ID: 3, Kind: "turn", Label: "before-refactor", Time: now.Add(-time.Minute)},
		{ID: 2, Kind: "manual", Label: "dup", Time: now.Add(-time.Hour)},
		{ID: 1, Kind: "import", Label: "dup", Time: now.Add(-2 * time.Hour)},
	}}
	got := strings.Join(targetCompletions(l, "", now), "|")
	want := "g3\t\"before-refactor\" turn, 1m0s ago|before-refactor\tg3, \"before-refactor\" turn, 1m0s ago|g2\t\"dup\" manual, 1h0m0s ago|g1\t\"dup\" import, 2h0m0s ago"
	if got != want {
		t.Errorf("all:\n got %q\nwant %q", got, want)
	}
	if got := targetCompletions(l, "be", now); len(got) != 1 || !strings.HasPrefix(got[0], "before-refactor\t") {
		t.Errorf("prefix be: %q", got)
	}
	if got := targetCompletions(l, "g", now); len(got) != 3 {
		t.Errorf("prefix g: %q", got)
	}
}
