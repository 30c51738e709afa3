// Package termsafe makes text that someone else controls safe to print on
// a terminal. File names, symlink targets, labels, branch, agent and run
// names and process names (comm) all come from whoever can write in the
// workspace or start a process; printed raw, an ESC sequence in one could
// move the cursor, retitle the window or rewrite what the user sees, and a
// newline could forge a line of output. Every human-facing output path of
// the CLI and the timeline prints such text through Text (or the printf
// wrappers here, which apply it to each string argument). --json output
// does not: JSON escapes what it must and stays exact.
package termsafe

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s unchanged when every rune is printable (unicode.IsPrint,
// or a plain space) and it is valid UTF-8; otherwise a copy where each C0
// or C1 control, DEL, format character (bidi overrides, zero-width) and
// invalid byte is written as a Go-style escape (\n, \x1b, \u202e) and a
// backslash as \\. The escaping is for safety, not a reversible encoding:
// a printable name that happens to spell "\x1b" prints as it is, the same
// as an escaped ESC (--json is the exact form).
func Text(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case printable(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += n
	}
	return b.String()
}

func printable(r rune) bool { return r == ' ' || unicode.IsPrint(r) }

func clean(s string) bool {
	for i := 0; i < len(s); {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || !printable(r) {
			return false
		}
		i += n
	}
	return true
}

// args returns a copy of a with every string, error and fmt.Stringer
// replaced by its Text; numbers and the like are left to the verbs.
func args(a []any) []any {
	out := make([]any, len(a))
	for i, v := range a {
		switch v := v.(type) {
		case string:
			out[i] = Text(v)
		case error:
			out[i] = Text(v.Error())
		case fmt.Stringer:
			out[i] = Text(v.String())
		default:
			out[i] = v
		}
	}
	return out
}

// Fprintf is fmt.Fprintf with each string argument passed through Text;
// the format is the program's own and printed as is.
func Fprintf(w io.Writer, format string, a ...any) {
	fmt.Fprintf(w, format, args(a)...)
}

// Printf is Fprintf to stdout.
func Printf(format string, a ...any) { Fprintf(os.Stdout, format, a...) }

// Println is fmt.Println with each string argument passed through Text.
func Println(a ...any) { fmt.Fprintln(os.Stdout, args(a)...) }

// Sprintf is fmt.Sprintf with each string argument passed through Text.
func Sprintf(format string, a ...any) string { return fmt.Sprintf(format, args(a)...) }
