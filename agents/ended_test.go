package agents

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Runs that ended leave the live set, and List shows only the last
// MaxEnded of them, so a long-lived mount does not list every run ever.
func TestListKeepsLastEnded(t *testing.T) {
	for _, mode := range []Mode{ModeCgroup, ModeProcessGroup} {
		t.Run(string(mode), func(t *testing.T) {
			r := newTestRuns(t, mode)
			live, err := r.Start(Spec{ID: "live", Cmd: exec.Command("sleep", "30")})
			if err != nil {
				t.Fatal(err)
			}
			var last string
			for i := range MaxEnded + 6 {
				run, err := r.Start(Spec{Cmd: exec.Command("true")})
				if err != nil {
					t.Fatal(err)
				}
				if code := run.Wait(); code != 0 {
					t.Fatalf("run %d exited %d", i, code)
				}
				last = run.ID
			}
			ris := r.List()
			states := map[State]int{}
			seen := map[string]bool{}
			for _, ri := range ris {
				states[ri.State]++
				seen[ri.ID] = true
			}
			if states[StateExited] != MaxEnded || states[StateRunning] != 1 || len(ris) != MaxEnded+1 {
				t.Fatalf("List shows %d runs %v, want %d exited and the live one", len(ris), states, MaxEnded)
			}
			if !seen[live.ID] || !seen[last] {
				t.Fatalf("the live run or the newest ended one is missing from List")
			}
			if r.Get(last) != nil {
				t.Errorf("an ended run with no process left is still tracked as live")
			}
			if err := live.Cancel(0); err != nil {
				t.Fatal(err)
			}
			if ris := r.List(); ris[len(ris)-1].ID != last || len(ris) != MaxEnded {
				t.Errorf("after cancelling the live run List shows %d runs, want the last %d ended", len(ris), MaxEnded)
			}
		})
	}
}

// RunOfThread finds the run of a process without reading its stat file.
func TestRunOfThread(t *testing.T) {
	for _, mode := range []Mode{ModeCgroup, ModeProcessGroup} {
		t.Run(string(mode), func(t *testing.T) {
			r := newTestRuns(t, mode)
			run, err := r.Start(Spec{Agent: "coder", Cmd: exec.Command("sh", "-c", "sleep 30 & wait")})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.RunOfThread(run.Pid()); got != run {
				t.Fatalf("RunOfThread(first process) = %v, want run %s", got, run.ID)
			}
			var child int
			for deadline := time.Now().Add(5 * time.Second); child == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the run's sleep never started")
				}
				if c := childPids(run.Pid()); len(c) > 0 {
					child = c[0]
				}
			}
			if got := r.RunOfThread(child); got != run {
				t.Errorf("RunOfThread(child) = %v, want run %s", got, run.ID)
			}
			if got := r.RunOfThread(os.Getpid()); got != nil {
				t.Errorf("RunOfThread(test process) = run %s, want none", got.ID)
			}
		})
	}
}

func childPids(pid int) []int {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}
