package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestLogWALReachesHead: 'reynfs log --wal' right after a write lists the
// records up to the head seq it reports (it used to stop at the last
// committed record, short of a head that counted records still waiting
// for the group commit).
func TestLogWALReachesHead(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("a\n"), 0o644)
	m := mountProject(t, dir)
	for i := range 15 {
		if err := os.WriteFile(filepath.Join(m.Dir, fmt.Sprintf("f%d", i)), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := m.Run("log", "--wal", "--json", "--dir", m.Dir)
		if r.Code != 0 {
			t.Fatalf("reynfs log --wal --json: exit %d: %s", r.Code, r.Stderr)
		}
		var l struct {
			Head uint64 `json:"head_seq"`
			Gens []struct {
				Seq     uint64 `json:"seq"`
				Records []struct {
					Seq uint64 `json:"seq"`
				} `json:"records"`
			} `json:"generations"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &l); err != nil {
			t.Fatalf("log --wal --json: %v\n%s", err, r.Stdout)
		}
		var last uint64
		for _, g := range l.Gens {
			last = max(last, g.Seq)
			for _, rec := range g.Records {
				last = max(last, rec.Seq)
			}
		}
		if last != l.Head {
			t.Fatalf("round %d: log --wal lists records up to seq %d, reports head seq %d", i, last, l.Head)
		}
	}
}
