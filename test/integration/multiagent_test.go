package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMultiAgentCut (issue 9 item 6): a planner and a coder, each a
// `reynfs run --agent`, write files and save their states concurrently; a
// checkpoint then holds both states and the tree at one seq. After more
// writes and saves by two new runs still going, a rewind to that
// checkpoint cancels both runs and brings back the tree and both states
// together, and no record of a cancelled run lands after the reset.
func TestMultiAgentCut(t *testing.T) {
	m := mountProject(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	save := func(agent, data string) string {
		return fmt.Sprintf("printf %s | %q agent save %s >/dev/null", data, reynfsBin, agent)
	}
	agentShow := func(name string, at ...string) string {
		r := m.Run(append([]string{"agent", "show", name, "--dir", m.Dir}, at...)...)
		if r.Code != 0 {
			t.Fatalf("agent show %s %v: exit %d: %s", name, at, r.Code, r.Stderr)
		}
		return r.Stdout
	}

	// Both agents at work at once.
	planner := "set -e; for i in 1 2 3; do echo \"plan $i\" > plan.txt; " + save("planner", "p$i") + "; done"
	coder := "set -e; mkdir -p src; for i in 1 2 3; do echo \"code $i\" > src/main.go; " + save("coder", "c$i") + "; done"
	var wg sync.WaitGroup
	for agent, script := range map[string]string{"planner": planner, "coder": coder} {
		wg.Go(func() {
			if out, err := reynfsRun(ctx, m, "--agent", agent, "--", "sh", "-c", script).CombinedOutput(); err != nil {
				t.Errorf("run of %s: %v\n%s", agent, err, out)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if r := m.Run("checkpoint", "--dir", m.Dir, "-m", "sync", "--kind", "plan-step"); r.Code != 0 {
		t.Fatalf("checkpoint: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	if p, c := agentShow("planner", "--at", "sync"), agentShow("coder", "--at", "sync"); p != "p3" || c != "c3" {
		t.Fatalf("the checkpoint holds planner %q, coder %q; want p3, c3", p, c)
	}

	// The future the rewind abandons: both agents go on, and are still
	// going (the coder in a tight loop) when the rewind comes.
	_, _, prun := startRun(t, ctx, m, "--agent", "planner", "--", "sh", "-c",
		"echo 'plan later' > plan.txt; "+save("planner", "p-later")+"; while :; do echo x >> notes.txt; sleep 0.01; done")
	_, _, crun := startRun(t, ctx, m, "--agent", "coder", "--", "sh", "-c",
		"echo 'code later' > src/main.go; "+save("coder", "c-later")+"; while :; do echo y >> src/gen.txt; done")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the later runs never saved their states")
		}
		if agentShow("planner") == "p-later" && agentShow("coder") == "c-later" {
			break
		}
	}

	r := m.Run("rewind", "sync", "--dir", m.Dir)
	if r.Code != 0 || !strings.Contains(r.Stdout, "cancelled run "+prun.ID) || !strings.Contains(r.Stdout, "cancelled run "+crun.ID) {
		t.Fatalf("rewind to sync: exit %d: %s%s; want both runs (%s, %s) cancelled", r.Code, r.Stdout, r.Stderr, prun.ID, crun.ID)
	}
	for name, want := range map[string]string{"plan.txt": "plan 3\n", "src/main.go": "code 3\n"} {
		if b, err := os.ReadFile(filepath.Join(m.Dir, name)); err != nil || string(b) != want {
			t.Errorf("%s after the rewind: %q, %v; want %q", name, b, err, want)
		}
	}
	for _, name := range []string{"notes.txt", "src/gen.txt"} {
		if _, err := os.Lstat(filepath.Join(m.Dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s after the rewind: %v; want it gone", name, err)
		}
	}
	if p, c := agentShow("planner"), agentShow("coder"); p != "p3" || c != "c3" {
		t.Errorf("states after the rewind: planner %q, coder %q; want p3, c3", p, c)
	}
	checkNoRecordAfterReset(t, m, prun.ID)
	checkNoRecordAfterReset(t, m, crun.ID)
	// The saves went through the control socket, and name their run too.
	saved := map[string]bool{}
	for _, r := range walOf(t, m, "--all") {
		if r.Op == "agent-state" && r.Run != "" {
			saved[r.Run+"/"+r.Agent] = true
		}
	}
	for _, run := range []runInfo{prun, crun} {
		if !saved[run.ID+"/"+run.Agent] {
			t.Errorf("no agent-state record names run %s (%s): %v", run.ID, run.Agent, saved)
		}
	}
}
