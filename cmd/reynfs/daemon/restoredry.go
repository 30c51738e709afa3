package daemon

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/rewind"
)

// RestoreDry says what restoring rel from target would change, writing
// nothing: the diff, below rel, from the live tree to the target's state.
// It refuses what the restore itself refuses (a path under the views, the
// root, a path that did not exist at target).
func (s *Service) RestoreDry(rel, target string) (*rewind.RestoreResult, []rewind.Change, error) {
	start := time.Now()
	seq, err := rewind.Resolve(s.J, target)
	if err != nil {
		return nil, nil, err
	}
	if s.Live == nil {
		return nil, nil, fmt.Errorf("%w: restore works on a mounted workspace; mount it first (or export the point and copy)", ErrUsage)
	}
	rel = path.Clean(strings.TrimPrefix(rel, "/"))
	if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, nil, fmt.Errorf("%w: restore needs a path below the workspace root (use rewind for the whole tree)", rewind.ErrTarget)
	}
	if first, _, _ := strings.Cut(rel, "/"); s.Views != "" && first == s.Views {
		return nil, nil, fmt.Errorf("%w: %s is inside the read-only history views", rewind.ErrTarget, rel)
	}
	past, err := rewind.Reconstruct(s.J, seq)
	if err != nil {
		return nil, nil, err
	}
	if !exists(past, rel) {
		return nil, nil, fmt.Errorf("%w: %s did not exist at seq %d", rewind.ErrTarget, rel, seq)
	}
	s.Live.Lock()
	replaced := exists(s.Live.Tree(), rel)
	s.Live.Unlock()
	cs, _, err := s.DiffOf(api.DiffParams{Target: "live", Other: fmt.Sprint(seq), Paths: []string{rel}})
	if err != nil {
		return nil, nil, err
	}
	return &rewind.RestoreResult{Path: rel, From: seq, Replaced: replaced, Took: time.Since(start)}, cs, nil
}

// exists reports whether rel names an entry of t.
func exists(t *tree.Tree, rel string) bool {
	ino := uint64(tree.RootIno)
	for _, name := range strings.Split(rel, "/") {
		n, err := t.Lookup(ino, name)
		if err != nil {
			return false
		}
		ino = n.Ino
	}
	return true
}
