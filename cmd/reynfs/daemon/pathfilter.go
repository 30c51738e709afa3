package daemon

import (
	"fmt"
	"path"
	"strings"

	"github.com/reynfs/reynfs/rewind"
)

// pathFilter keeps the changes to some paths (log -- PATH…, diff A B --
// PATH…), as git's pathspecs do: a path names itself and, as a
// directory, everything below it; an exclude glob drops a path it
// matches, whole or by its base name, and everything below a directory it
// matches ('--exclude node_modules', '--exclude "*.log"').
type pathFilter struct {
	paths   []string // cleaned, relative to the workspace root; none: all
	exclude []string
}

func newPathFilter(paths, exclude []string) (*pathFilter, error) {
	f := &pathFilter{}
	for _, p := range paths {
		c := path.Clean(strings.TrimPrefix(p, "/"))
		if c == "." {
			return &pathFilter{exclude: f.exclude}, checkGlobs(exclude) // the root: every path
		}
		if c == ".." || strings.HasPrefix(c, "../") {
			return nil, fmt.Errorf("%w: path %q is outside the workspace", ErrUsage, p)
		}
		f.paths = append(f.paths, c)
	}
	f.exclude = exclude
	return f, checkGlobs(exclude)
}

func checkGlobs(globs []string) error {
	for _, g := range globs {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("%w: --exclude %q: %v", ErrUsage, g, err)
		}
	}
	return nil
}

// active reports whether the filter drops anything.
func (f *pathFilter) active() bool { return f != nil && (len(f.paths) > 0 || len(f.exclude) > 0) }

// match reports whether path p (relative, "." the root) is kept.
func (f *pathFilter) match(p string) bool {
	if !f.active() {
		return true
	}
	if len(f.paths) > 0 {
		in := false
		for _, q := range f.paths {
			if p == q || strings.HasPrefix(p, q+"/") {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	for _, g := range f.exclude {
		for q := p; q != "." && q != "/" && q != ""; q = path.Dir(q) {
			if ok, _ := path.Match(g, q); ok {
				return false
			}
			if ok, _ := path.Match(g, path.Base(q)); ok {
				return false
			}
		}
	}
	return true
}

// changes keeps the changes to matching paths.
func (f *pathFilter) changes(cs []rewind.Change) []rewind.Change {
	if !f.active() {
		return cs
	}
	out := []rewind.Change{}
	for _, c := range cs {
		if f.match(c.Path) {
			out = append(out, c)
		}
	}
	return out
}

// any reports whether one of paths is kept.
func (f *pathFilter) any(paths []string) bool {
	for _, p := range paths {
		if f.match(p) {
			return true
		}
	}
	return false
}
