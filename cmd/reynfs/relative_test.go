package main

import (
	"slices"
	"testing"
)

// TestRelativeTargets: "-N" before "--" is a target (rewritten "~N"),
// except as the value of the flag before it.
func TestRelativeTargets(t *testing.T) {
	flags := valueFlags(newRootCommand())
	for _, c := range []struct{ in, want []string }{
		{[]string{"rewind", "-1"}, []string{"rewind", "~1"}},
		{[]string{"diff", "-2", "-p"}, []string{"diff", "~2", "-p"}},
		{[]string{"checkpoint", "-m", "-1"}, []string{"checkpoint", "-m", "-1"}},
		{[]string{"checkpoint", "--label", "-12"}, []string{"checkpoint", "--label", "-12"}},
		{[]string{"rewind", "--dry-run", "-1"}, []string{"rewind", "--dry-run", "~1"}},
		{[]string{"restore", "a", "--from", "-3"}, []string{"restore", "a", "--from", "-3"}},
		{[]string{"log", "--", "-1"}, []string{"log", "--", "-1"}},
	} {
		if got := relativeTargets(c.in, flags); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
	}
}
