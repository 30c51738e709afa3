package termsafe

import "testing"

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"plain name.go":      "plain name.go",
		"héllo 世界":           "héllo 世界",
		"a\x1b[2J\x1b[Hb":    `a\x1b[2J\x1b[Hb`,
		"line\nseq 9 forged": `line\nseq 9 forged`,
		"c1\u009bm":          `c1\x9bm`,
		"bidi\u202etxt.exe":  `bidi\u202etxt.exe`,
		"bad\xff\xfe":        `bad\xff\xfe`,
		"del\x7f":            `del\x7f`,
		`back\slash`:         `back\slash`,
		"back\\slash\x07":    `back\\slash\x07`,
		"tab\there\r":        `tab\there\r`,
		"\U000e0041 tag":     `\U000e0041 tag`,
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Sprintf("%s|%d|%v", "x\x1by", 7, errString("e\nf")); got != `x\x1by|7|e\nf` {
		t.Errorf("Sprintf: %q", got)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
