package integration

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRewindBigDirsChanges: a rewind of files rewritten in place in
// directories of 100 entries (the case the rewind takes its change list
// from the graft's own walk, and the Merkle root re-hashes only the
// children that changed), mixed with a rename, a removal, a new file and a
// new directory. The rewind must report exactly the changed files (the
// list its kernel invalidations are made from), and every file read
// through the mount afterwards must show the target's content, although
// the kernel had just read the state before. A rewind forward again, to
// the state before, must do the same the other way.
func TestRewindBigDirsChanges(t *testing.T) {
	dir := t.TempDir()
	base := rwState{}
	for d := range 12 {
		base[fmt.Sprintf("d%02d", d)] = rwDir
		for f := range 100 {
			base[fmt.Sprintf("d%02d/f%02d.txt", d, f)] = fmt.Sprintf("file %d/%d version 0\n", d, f)
		}
	}
	rwApply(t, dir, base)
	m := rwNewMount(t, dir)
	m.Mount()
	rwExpect(t, m.Dir, base, "mounted") // the kernel now caches every page and name
	rwCheckpoint(t, m, "base")

	// The next state: 40 files rewritten in place over all directories, a
	// rename within a directory, a file removed, one created, and a new
	// directory with files.
	next := maps.Clone(base)
	want := map[string]string{} // path -> kind, as the rewind back to base reports it
	for k := range 40 {
		p := fmt.Sprintf("d%02d/f%02d.txt", k%12, (k*37)%100)
		next[p] = fmt.Sprintf("file %s version 1 %s\n", p, strings.Repeat("x", k))
		want[p] = "modified"
	}
	delete(next, "d03/f98.txt")
	next["d03/renamed.txt"] = base["d03/f98.txt"]
	want["d03/f98.txt"], want["d03/renamed.txt"] = "added", "removed"
	delete(next, "d05/f99.txt")
	want["d05/f99.txt"] = "added"
	next["d07/new.txt"] = "new\n"
	want["d07/new.txt"] = "removed"
	next["nd"] = rwDir
	want["nd"] = "removed"
	for f := range 3 {
		p := fmt.Sprintf("nd/g%d.txt", f)
		next[p] = "in a new directory\n"
		want[p] = "removed"
	}
	if err := os.Rename(filepath.Join(m.Dir, "d03/f98.txt"), filepath.Join(m.Dir, "d03/renamed.txt")); err != nil {
		t.Fatal(err)
	}
	rwApply(t, m.Dir, next)
	rwExpect(t, m.Dir, next, "next state written") // and cached
	head := rwHead(t, m)

	res := rwRewind(t, m, "base")
	if d := rwFileChanges(res, base, next, want); d != "" {
		t.Fatalf("rewind to base: changes differ:\n%s", d)
	}
	rwExpect(t, m.Dir, base, "after the rewind to base")

	// Forward again, to the state before the rewind (the undo's target).
	back := map[string]string{}
	for p, k := range want {
		switch k {
		case "added":
			back[p] = "removed"
		case "removed":
			back[p] = "added"
		default:
			back[p] = k
		}
	}
	res = rwRewind(t, m, fmt.Sprint(head))
	if d := rwFileChanges(res, next, base, back); d != "" {
		t.Fatalf("rewind back to seq %d: changes differ:\n%s", head, d)
	}
	rwExpect(t, m.Dir, next, "after the rewind back")
}

// rwFileChanges compares a rewind's changes, leaving out directories that
// both states have (their attributes change with their entries), with want
// (path -> kind); it returns the differences, one a line.
func rwFileChanges(res rwRewound, to, from rwState, want map[string]string) string {
	got := map[string]string{}
	for _, c := range res.Changes {
		if to[c.Path] == rwDir && from[c.Path] == rwDir || c.Path == "." {
			continue
		}
		if k, dup := got[c.Path]; dup {
			got[c.Path] = k + "+" + c.Kind
			continue
		}
		got[c.Path] = c.Kind
	}
	var out []string
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if got[p] != want[p] {
			out = append(out, fmt.Sprintf("%s: %q, want %q", p, got[p], want[p]))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			out = append(out, fmt.Sprintf("%s: %q, want no change", p, got[p]))
		}
	}
	return strings.Join(out, "\n")
}
