package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// logRecord is one record of `reynfs log --wal --json`.
type logRecord struct {
	Seq   uint64 `json:"seq"`
	Op    string `json:"op"`
	What  string `json:"what"`
	Pid   uint32 `json:"pid"`
	Comm  string `json:"comm"`
	Run   string `json:"run"`
	Agent string `json:"agent"`
}

// walOf lists the journal records `reynfs log --wal --json ARGS` shows,
// oldest first.
func walOf(t *testing.T, m *Mount, args ...string) []logRecord {
	t.Helper()
	r := m.Run(append([]string{"log", "--wal", "--json", "--dir", m.Dir}, args...)...)
	if r.Code != 0 {
		t.Fatalf("reynfs log --wal %v: exit %d: %s%s", args, r.Code, r.Stdout, r.Stderr)
	}
	var l struct {
		Gens []struct {
			Records []logRecord `json:"records"`
		} `json:"generations"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &l); err != nil {
		t.Fatalf("reynfs log --wal --json: %v\n%s", err, r.Stdout)
	}
	var out []logRecord
	for i := len(l.Gens) - 1; i >= 0; i-- { // newest generation first
		out = append(out, l.Gens[i].Records...)
	}
	return out
}

// TestLogRunAttribution: the records a `reynfs run --agent` makes carry its
// run id and agent (log --wal, in JSON and for people), `log --run R`
// lists exactly them, and a write from outside any run carries none.
func TestLogRunAttribution(t *testing.T) {
	m := mountProject(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := reynfsRun(ctx, m, "--agent", "coder", "--", "sh", "-c", "echo x > f").CombinedOutput(); err != nil {
		t.Fatalf("reynfs run: %v\n%s", err, out)
	}
	writeFile(t, filepath.Join(m.Dir, "outside"), []byte("y\n"), 0o644)
	_, runs := runsOf(t, m)
	if len(runs) != 1 {
		t.Fatalf("runs = %+v; want the one run", runs)
	}
	id := runs[0].ID

	var mine, others []logRecord
	for _, r := range walOf(t, m) {
		if r.Run == id {
			mine = append(mine, r)
		} else {
			others = append(others, r)
		}
	}
	created := false
	for _, r := range mine {
		if r.Agent != "coder" || r.Comm != "sh" {
			t.Errorf("record %d of run %s: agent %q comm %q; want coder, sh", r.Seq, id, r.Agent, r.Comm)
		}
		created = created || (r.Op == "create" && r.What == "f")
	}
	if !created {
		t.Fatalf("no create of f attributed to run %s; its records: %+v", id, mine)
	}
	outside := false
	for _, r := range others {
		if r.Run != "" || r.Agent != "" {
			t.Errorf("record %d (%s %s by %s) names run %q agent %q; want none", r.Seq, r.Op, r.What, r.Comm, r.Run, r.Agent)
		}
		outside = outside || (r.Op == "create" && r.What == "outside")
	}
	if !outside {
		t.Errorf("no record of the write from outside the run: %+v", others)
	}

	only := walOf(t, m, "--run", id)
	if len(only) != len(mine) {
		t.Fatalf("log --run %s lists %d records, want its %d: %+v", id, len(only), len(mine), only)
	}
	for i := range only {
		if only[i] != mine[i] {
			t.Errorf("log --run record %d is %+v, want %+v", i, only[i], mine[i])
		}
	}
	// An unknown run is bad input, not an empty log that reads as "this
	// run changed nothing".
	if r := m.Run("log", "--wal", "--run", "000000000000", "--dir", m.Dir); r.Code != 2 || !strings.Contains(r.Stderr, "no such run") {
		t.Errorf("log --run of an unknown run: exit %d, %q; want exit 2, no such run", r.Code, r.Stderr)
	}
	r := m.Run("log", "--wal", "--dir", m.Dir)
	if r.Code != 0 || !strings.Contains(r.Stdout, "run "+id+" (coder)") {
		t.Errorf("reynfs log --wal: exit %d; want the run and agent on its records\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestRewindCancelledRunLeavesNoRecord: a run writing in a tight loop that
// ignores SIGTERM (so it is killed in mid-write after the grace period) is
// cancelled by a rewind, and no record attributed to it has a seq after
// the reset record. While that rewind holds the workspace, a checkpoint
// and a second rewind get rewind_in_progress.
func TestRewindCancelledRunLeavesNoRecord(t *testing.T) {
	m := mountProject(t, t.TempDir())
	if r := m.Run("checkpoint", "--dir", m.Dir, "-m", "before"); r.Code != 0 {
		t.Fatalf("checkpoint: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _, run := startRun(t, ctx, m, "--agent", "coder", "--", "sh", "-c",
		`trap "" TERM; i=0; while :; do echo $i > loop; echo $i >> log; i=$((i+1)); done`)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run never wrote")
		}
		if b, err := os.ReadFile(filepath.Join(m.Dir, "log")); err == nil && len(b) > 100 {
			break
		}
	}

	var wg sync.WaitGroup
	var rw Result
	wg.Go(func() { rw = m.Run("rewind", "-1", "--dir", m.Dir) })
	// The run ignores SIGTERM: the rewind holds the workspace for the
	// whole grace period (2 s) once it has marked the run cancelled.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run was never listed as cancelled")
		}
		if _, runs := runsOf(t, m); len(runs) == 1 && runs[0].State == "cancelled" {
			break
		}
	}
	// Both at once, well inside the grace period.
	calls := [][]string{{"checkpoint", "-m", "during"}, {"rewind", "-1"}}
	results := make([]Result, len(calls))
	for i, args := range calls {
		wg.Go(func() { results[i] = m.Run(append(args, "--dir", m.Dir)...) })
	}
	wg.Wait()
	for i, r := range results {
		if r.Code != 1 || !strings.Contains(r.Stderr, "a rewind has held the workspace") ||
			strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
			t.Errorf("%s during a rewind: exit %d: %q; want exit 1 and one line saying a rewind holds the workspace", calls[i][0], r.Code, r.Stderr)
		}
	}
	if rw.Code != 0 || !strings.Contains(rw.Stdout, "cancelled run "+run.ID) {
		t.Fatalf("rewind: exit %d: %s%s; want it to name the cancelled run %s", rw.Code, rw.Stdout, rw.Stderr, run.ID)
	}
	if _, err := os.Lstat(filepath.Join(m.Dir, "loop")); !os.IsNotExist(err) {
		t.Errorf("loop after the rewind: %v; want it gone as before the run", err)
	}
	checkNoRecordAfterReset(t, m, run.ID)
}

// checkNoRecordAfterReset fails if a record attributed to run has a seq
// after the newest reset record, and if the run made no record at all.
func checkNoRecordAfterReset(t *testing.T, m *Mount, run string) {
	t.Helper()
	recs := walOf(t, m, "--all")
	var reset uint64
	n := 0
	for _, r := range recs {
		if r.Op == "reset" && r.Seq > reset {
			reset = r.Seq
		}
	}
	if reset == 0 {
		t.Fatalf("no reset record in log --all --wal")
	}
	for _, r := range recs {
		if r.Run != run {
			continue
		}
		n++
		if r.Seq > reset {
			t.Errorf("record %d (%s %s) of cancelled run %s after the reset record %d", r.Seq, r.Op, r.What, run, reset)
		}
	}
	if n == 0 {
		t.Errorf("run %s made no record at all: nothing was tested", run)
	}
}
