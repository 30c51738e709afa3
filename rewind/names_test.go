package rewind

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	taken := map[string]bool{"before refactor": true}
	bad := []string{"", "5", "007", "g2", "g10", "-1", "~1", "-x", "~", "@", "@-1", "live", "b-12",
		"two\nlines", "tab\there", "esc\x1b[31m", " pad", "pad ", strings.Repeat("x", 201), "before refactor", "\xff"}
	for _, n := range bad {
		if err := CheckName(n, taken); !errors.Is(err, ErrName) {
			t.Errorf("CheckName(%q) = %v, want ErrName", n, err)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckName(%q): message of more than one line: %q", n, err)
		}
	}
	good := []string{"before refactor 2", "g", "gx", "g-2", "b-", "b-x", "v1.2", "fix: -1 bug", "5 files", strings.Repeat("é", 100), "livelier"}
	for _, n := range good {
		if err := CheckName(n, taken); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", n, err)
		}
	}
}

func TestSanitize(t *testing.T) {
	taken := map[string]bool{"end of turn": true, "end of turn (2)": true, "turn: 5": true}
	cases := map[string]string{
		"end of turn":         "end of turn (3)",
		"5":                   "turn: 5 (2)",
		"-1":                  "turn: -1",
		"":                    "turn",
		"  two\nlines\tand  ": "two lines and",
		"g2":                  "turn: g2",
	}
	for in, want := range cases {
		got := Sanitize(in, "turn", taken)
		if got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
		if err := CheckName(got, taken); err != nil {
			t.Errorf("Sanitize(%q) = %q, which CheckName refuses: %v", in, got, err)
		}
	}
	long := Sanitize(strings.Repeat("ü", 300), "turn", nil)
	if len(long) > MaxName || CheckName(long, nil) != nil {
		t.Errorf("Sanitize of a long text: %d bytes, %v", len(long), CheckName(long, nil))
	}
}
