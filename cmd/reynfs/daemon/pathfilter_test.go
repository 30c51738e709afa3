package daemon

import "testing"

func TestPathFilter(t *testing.T) {
	f, err := newPathFilter([]string{"src/", "./docs/a.md"}, []string{"*.log", "vendor"})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{
		"src": true, "src/a.go": true, "src/deep/b.go": true, "srcx/a.go": false,
		"docs/a.md": true, "docs/b.md": false, ".": false, "README": false,
		"src/x.log": false, "src/vendor/m.go": false, "src/vendor": false, "src/vendored/m.go": true,
	} {
		if got := f.match(p); got != want {
			t.Errorf("match(%q) = %v, want %v", p, got, want)
		}
	}
	if all, _ := newPathFilter([]string{"."}, nil); all.active() {
		t.Errorf("the root filters")
	}
	if _, err := newPathFilter([]string{"../x"}, nil); err == nil {
		t.Errorf("a path outside the workspace is accepted")
	}
	if _, err := newPathFilter(nil, []string{"[x"}); err == nil {
		t.Errorf("a bad glob is accepted")
	}
}
