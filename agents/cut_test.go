package agents

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestStopForRewind: four runs, one per policy plus a second kill that
// ignores SIGTERM. The two kill runs are cancelled together within one
// grace period (+1 s), the freeze run is frozen until Resume, the keep run
// is untouched; and Active sees what is left.
func TestStopForRewind(t *testing.T) {
	forModes(t, func(t *testing.T, r *Runs) {
		start := func(pol Policy, script string) *Run {
			t.Helper()
			run, err := r.Start(Spec{OnRewind: pol, Label: string(pol), Cmd: exec.Command("sh", "-c", script)})
			if err != nil {
				t.Fatal(err)
			}
			return run
		}
		k1 := start(PolicyKill, "sleep 1000 & wait")
		k2 := start(PolicyKill, `trap "" TERM; sleep 1000 & wait`)
		f := filepath.Join(t.TempDir(), "f")
		fr := start(PolicyFreeze, `while :; do echo x >> `+f+`; sleep 0.005; done`)
		size := func() int64 {
			st, err := os.Stat(f)
			if err != nil {
				return 0
			}
			return st.Size()
		}
		eventually(t, 3*time.Second, "the freeze run writes", func() bool { return size() > 0 })
		kp := start(PolicyKeep, "sleep 1000 & wait")
		if n := len(r.Active()); n != 4 {
			t.Fatalf("%d active runs, want 4", n)
		}
		const grace = 400 * time.Millisecond
		t0 := time.Now()
		s, err := r.StopForRewind(grace)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(t0); took > grace+time.Second {
			t.Errorf("stopping 4 runs took %v, want at most %v", took, grace+time.Second)
		}
		if len(s.Cancelled) != 2 || len(s.Frozen) != 1 || len(s.Kept) != 1 ||
			s.Cancelled[0].ID != k1.ID || s.Cancelled[1].ID != k2.ID || s.Frozen[0].ID != fr.ID || s.Kept[0].ID != kp.ID {
			t.Fatalf("stopped: %+v", s)
		}
		for _, run := range []*Run{k1, k2} {
			if run.populated() || r.Get(run.ID) != nil {
				t.Errorf("cancelled run %s is still there", run.ID)
			}
		}
		if fr.Info().State != StateFrozen || kp.Info().State != StateRunning {
			t.Errorf("states: freeze run %s, keep run %s", fr.Info().State, kp.Info().State)
		}
		if n := len(r.Active()); n != 2 {
			t.Errorf("%d active runs after the stop, want 2", n)
		}
		// Frozen for real, and thawed for real: its writes stop, then go on.
		s1 := size()
		time.Sleep(100 * time.Millisecond)
		if s2 := size(); s2 != s1 {
			t.Errorf("the frozen run wrote: %d to %d bytes", s1, s2)
		}
		if err := r.Resume(s); err != nil {
			t.Fatal(err)
		}
		if fr.Info().State != StateRunning {
			t.Errorf("freeze run %s after resume", fr.Info().State)
		}
		eventually(t, 3*time.Second, "the thawed run writes", func() bool { return size() > s1 })
	})
}
