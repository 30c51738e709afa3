package daemon

import (
	"errors"
	"strings"
	"testing"
)

// TestPickRemote: the remote of a sync or push without a name is origin,
// else the only one; none, or several without origin, is bad input
// naming them.
func TestPickRemote(t *testing.T) {
	for _, c := range []struct {
		rs   map[string]string
		name string
		want string
		err  string
	}{
		{map[string]string{"origin": "file:///a", "b": "file:///b"}, "", "origin", ""},
		{map[string]string{"only": "file:///a"}, "", "only", ""},
		{map[string]string{"a": "file:///a", "b": "file:///b"}, "", "", "2 remotes (a, b) and none is origin"},
		{map[string]string{}, "", "", "names no remote"},
		{map[string]string{"a": "file:///a"}, "b", "", "no remote b"},
		{map[string]string{"a": "file:///a", "b": "file:///b"}, "b", "b", ""},
	} {
		got, err := PickRemote(c.rs, c.name)
		if c.err != "" {
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("PickRemote(%v, %q): %v; want a usage error with %q", c.rs, c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("PickRemote(%v, %q) = %q, %v; want %q", c.rs, c.name, got, err, c.want)
		}
	}
}
