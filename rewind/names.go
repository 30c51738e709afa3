package rewind

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/journal"
)

// ErrName: a checkpoint label or a branch name that the rule below refuses.
var ErrName = errors.New("bad name")

// MaxName bounds a label or branch name, in bytes.
const MaxName = 200

// Names (checkpoint labels and branch names) share one namespace with the
// targets that Resolve reads, so that a name never means two things:
//
//   - A name must not read as a target or as something a target could
//     become: a number (a seq), gN (a generation id), -N or ~N and anything
//     else that starts with '-' or '~' (Resolve reads those as "N back" and
//     never as a label), '@…' (kept for the current state), "live" (the
//     current state in diff) and b-N (the automatic name of the branch
//     whose tip is seq N).
//   - It must not duplicate a live name: a label of a generation on the
//     current path, or the name of a branch.
//   - It is not empty, has no control characters (newlines, tabs, escape
//     sequences: a name is printed on one line of a terminal) and is at
//     most MaxName bytes of valid UTF-8.
//
// CheckName applies the rule; the checkpoint and branch commands refuse
// what it refuses (exit 2, one line, nothing written). Agents' hooks make
// labels from prompts they do not control, so they go through Sanitize
// instead, which turns any text into a name the rule accepts.
func CheckName(name string, taken map[string]bool) error {
	if err := checkForm(name); err != nil {
		return err
	}
	if taken[name] {
		return fmt.Errorf("%w: %q is already a label or branch name on the current path; pick another", ErrName, name)
	}
	return nil
}

// checkForm is the rule without the duplicate check.
func checkForm(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty", ErrName)
	case len(name) > MaxName:
		return fmt.Errorf("%w: the name is %d bytes, more than %d", ErrName, len(name), MaxName)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: the name is not valid UTF-8", ErrName)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: %q has a control character (a newline, a tab, ...)", ErrName, name)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("%w: %q starts or ends with a space", ErrName, name)
	}
	if what := targetForm(name); what != "" {
		return fmt.Errorf("%w: %q reads as %s; a label or branch name must not look like a target", ErrName, name, what)
	}
	return nil
}

// targetForm says what kind of target name reads as ("" if none).
func targetForm(name string) string {
	if _, err := strconv.ParseUint(name, 10, 64); err == nil || allDigits(name) {
		return "a seq"
	}
	if rest, ok := strings.CutPrefix(name, "g"); ok && allDigits(rest) {
		return "a generation id"
	}
	if rest, ok := strings.CutPrefix(name, BranchPrefix); ok && allDigits(rest) {
		return "an automatic branch name"
	}
	switch {
	case name[0] == '-' || name[0] == '~':
		return "a target N generations back"
	case name[0] == '@':
		return "the current state (@)"
	case name == "live":
		return "the current state"
	}
	return ""
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Sanitize turns text into a name CheckName accepts: control characters
// become spaces, the text is cut to fit MaxName with room for a suffix,
// an empty text becomes fallback, one that reads as a target is prefixed
// with fallback + ": ", and a duplicate gets " (2)", " (3)", ... The hooks
// label checkpoints with it.
func Sanitize(text, fallback string, taken map[string]bool) string {
	text = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, text)
	text = strings.Join(strings.Fields(text), " ")
	text = cut(text, MaxName-16)
	if text == "" {
		text = fallback
	}
	if checkForm(text) != nil {
		text = cut(fallback+": "+text, MaxName-16)
	}
	if checkForm(text) != nil {
		text = fallback // a fallback that fails the rule is the caller's bug
	}
	name := text
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("%s (%d)", text, i)
	}
	return name
}

// cut shortens s to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.TrimSpace(s[:n])
}

// TakenNames returns the names in use: the labels of the generations on
// the current path and the names of branches (automatic and given).
func TakenNames(j *journal.Journal) (map[string]bool, error) {
	gens, err := Timeline(j)
	if err != nil {
		return nil, err
	}
	path, err := j.Path()
	if err != nil {
		return nil, err
	}
	taken := map[string]bool{}
	for _, g := range onLivePath(gens, path, j.Head()) {
		if g.Rec.Label != "" {
			taken[g.Rec.Label] = true
		}
	}
	names, err := Names(j)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		taken[n.Name] = true
	}
	return taken, nil
}

// CutNamed cuts a generation labelled label (none when empty). The label
// goes through CheckName, refused with ErrName, or with sanitize (the
// hooks: a label made from a prompt) through Sanitize with kind as the
// fallback. The check and the cut are serialized with other namings, so
// two checkpoints cannot both take one label.
func (rw *Rewinder) CutNamed(kind, label string, sanitize bool) (*journal.Record, error) {
	return rw.CutNamedBy(kind, label, sanitize, agents.Origin{})
}

// CutNamedBy is CutNamed on behalf of o (see CutBy).
func (rw *Rewinder) CutNamedBy(kind, label string, sanitize bool, o agents.Origin) (*journal.Record, error) {
	if label == "" {
		return rw.CutBy(kind, "", o)
	}
	defer rw.Serialize()()
	taken, err := TakenNames(rw.J)
	if err != nil {
		return nil, fmt.Errorf("cut generation: %w", err)
	}
	if sanitize {
		label = Sanitize(label, kind, taken)
	} else if err := CheckName(label, taken); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return rw.CutBy(kind, label, o)
}
