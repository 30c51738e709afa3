package hooks

import (
	"os"
	"os/exec"
	"testing"
)

// TestResumeLineQuotesSession: a resume line is a command the user may
// paste into a shell; a session id crafted in a hook payload must come out
// as one argument, never as shell syntax, and a plain id stays as is.
func TestResumeLineQuotesSession(t *testing.T) {
	if got := Resume([]byte(`{"tool":"claude","session_id":"1a2b-3c4d"}`)); got != "claude --resume 1a2b-3c4d --fork-session" {
		t.Errorf("plain id: %q", got)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: no sh: %v", err)
		}
		t.Skip("no sh")
	}
	for _, id := range []string{"x; echo PWNED", "$(echo PWNED)", "a'b`echo PWNED`", "x\necho PWNED"} {
		for _, tool := range []string{"claude", "gemini", "codex", "cline"} {
			state := []byte(`{"tool":"` + tool + `","session_id":` + jsonString(id) + `}`)
			line := Resume(state)
			// Replace the tool with printf, so the shell prints the words.
			out, err := exec.Command(sh, "-c", `set -- `+line[len(tool):]+`; printf '%s\n' "$2"`).Output()
			if tool == "cline" || tool == "codex" {
				// "cline --id ID (…)" and "codex resume ID (…)": the id is
				// the second word, what follows is prose.
				out, err = exec.Command(sh, "-c", `set -- `+firstWords(line[len(tool):], 2)+`; printf '%s\n' "$2"`).Output()
			}
			if err != nil || string(out) != id+"\n" {
				t.Errorf("%s %q: line %q reads in sh as %q (%v); want the id as one word", tool, id, line, out, err)
			}
		}
	}
}

func jsonString(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		switch r {
		case '"', '\\':
			b = append(b, '\\', byte(r))
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, string(r)...)
		}
	}
	return string(append(b, '"'))
}

// firstWords keeps the text up to the " (" that starts the prose.
func firstWords(s string, _ int) string {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == ' ' && s[i+1] == '(' {
			return s[:i]
		}
	}
	return s
}
