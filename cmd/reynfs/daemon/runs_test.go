package daemon

import (
	"bufio"
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/journal"
)

// rpc dispatches one call to d and decodes its result into res; it
// returns the error object the daemon answered, if any.
func rpc(t *testing.T, d *Daemon, p api.Params, res any) *api.Error {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	resp := dispatch(d.svc, d, &api.Request{JSONRPC: api.JSONRPC, ID: json.RawMessage("1"), Method: p.Method(), Params: raw})
	if resp.Error != nil {
		return resp.Error
	}
	if res != nil {
		if err := json.Unmarshal(resp.Result, res); err != nil {
			t.Fatal(err)
		}
	}
	return nil
}

// TestDispatchRuns: the run methods register a run, attach the pid its
// launcher started, record its exit code, and list it with state and
// code; bad input is refused with bad_input, and an unmounted store
// answers not_mounted.
func TestDispatchRuns(t *testing.T) {
	j, err := journal.Open(t.TempDir(), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	runs, err := agents.NewRuns(agents.Options{StoreID: "dispatch-test", ForceFallback: true})
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{j: j, log: zerolog.Nop(), done: make(chan struct{}), runs: runs, svc: &Service{J: j}}

	var st api.RunStartResult
	if e := rpc(t, d, api.RunStartParams{Agent: "coder", Label: "l", OnRewind: "freeze"}, &st); e != nil {
		t.Fatal(e)
	}
	if st.ID == "" || st.Mode != string(agents.ModeProcessGroup) || st.CgroupDir != "" {
		t.Fatalf("run.start = %+v; want an id, mode process-group and no cgroup", st)
	}
	// The launcher's half, as `reynfs run` does it in the process-group
	// mode, but without agents.Launch: that would make this test process a
	// subreaper, and Attach in the same process would then reap the
	// command's status itself (the daemon and the launcher are two
	// processes in real use).
	cmd := exec.Command("sh", "-c", "read x; exit 7")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := cmd.Process
	if e := rpc(t, d, api.RunAttachParams{ID: st.ID, Pid: p.Pid}, nil); e != nil {
		t.Fatal(e)
	}
	var rs api.RunsResult
	if e := rpc(t, d, api.RunsParams{}, &rs); e != nil {
		t.Fatal(e)
	}
	if len(rs.Runs) != 1 || rs.Runs[0].ID != st.ID || rs.Runs[0].Pid != p.Pid || rs.Runs[0].State != "running" ||
		rs.Runs[0].Agent != "coder" || rs.Runs[0].OnRewind != "freeze" || rs.Mode != st.Mode || rs.ModeReason == "" {
		t.Fatalf("runs = %+v; want the one run, running, with its pid, agent, policy and a mode reason", rs)
	}
	_ = in.Close()
	_ = cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if e := rpc(t, d, api.RunExitedParams{ID: st.ID, Code: code}, nil); e != nil {
		t.Fatal(e)
	}
	if e := rpc(t, d, api.RunsParams{}, &rs); e != nil {
		t.Fatal(e)
	}
	if len(rs.Runs) != 1 || rs.Runs[0].State != "exited" || rs.Runs[0].ExitCode != 7 {
		t.Fatalf("runs after exit = %+v; want it exited with code 7", rs.Runs)
	}

	for _, bad := range []api.Params{
		api.RunStartParams{OnRewind: "pause"},
		api.RunStartParams{Agent: "../x"},
		api.RunAttachParams{ID: "nope", Pid: p.Pid},
		api.RunAttachParams{ID: st.ID, Pid: 1},
		api.RunExitedParams{ID: "nope"},
	} {
		if e := rpc(t, d, bad, nil); e == nil || e.Data.Kind != api.KindBadInput || e.Data.Exit != 2 {
			t.Errorf("%s %+v: error %+v; want bad_input, exit 2", bad.Method(), bad, e)
		}
	}

	var none api.RunsResult
	err = Serve(&Service{J: j}, api.RunsParams{}, &none)
	if kindOf(err) != api.KindNotMounted {
		t.Errorf("runs on an unmounted store: %v; want not_mounted", err)
	}
	if runs.Get(st.ID) != nil {
		t.Error("an exited run with no process left is still live after runs listed it")
	}
	if err := runs.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRunEvents: a subscription sees run.started when a run is attached
// and run.exited with its code when it exits, after init.
func TestRunEvents(t *testing.T) {
	j, err := journal.Open(t.TempDir(), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	runs, err := agents.NewRuns(agents.Options{StoreID: "events-test", ForceFallback: true})
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{j: j, log: zerolog.Nop(), done: make(chan struct{}), runs: runs, svc: &Service{J: j}}
	server, client := net.Pipe()
	defer client.Close()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer server.Close()
		d.subscribe(server, json.NewEncoder(server), api.SubscribeParams{})
	}()
	defer func() { <-ended }()
	defer close(d.done)
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(client)
	next := func() api.Event {
		t.Helper()
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("read event: %v", err)
		}
		var n api.Notification
		if err := json.Unmarshal(line, &n); err != nil {
			t.Fatalf("not an event: %q: %v", line, err)
		}
		return n.Params
	}
	if ev := next(); ev.Type != api.EventInit {
		t.Fatalf("first event %q; want init", ev.Type)
	}
	var st api.RunStartResult
	if e := rpc(t, d, api.RunStartParams{Agent: "coder"}, &st); e != nil {
		t.Fatal(e)
	}
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if e := rpc(t, d, api.RunAttachParams{ID: st.ID, Pid: cmd.Process.Pid}, nil); e != nil {
		t.Fatal(e)
	}
	if ev := next(); ev.Type != api.EventRunStarted || ev.Run == nil || ev.Run.ID != st.ID || ev.Run.Agent != "coder" || ev.Run.Pid != cmd.Process.Pid {
		t.Fatalf("event %+v (run %+v); want run.started of %s", ev, ev.Run, st.ID)
	}
	_ = cmd.Wait()
	if e := rpc(t, d, api.RunExitedParams{ID: st.ID, Code: 3}, nil); e != nil {
		t.Fatal(e)
	}
	if ev := next(); ev.Type != api.EventRunExited || ev.Run == nil || ev.Run.ID != st.ID || ev.Run.State != "exited" || ev.Run.ExitCode != 3 {
		t.Fatalf("event %+v (run %+v); want run.exited of %s with code 3", ev, ev.Run, st.ID)
	}
	if err := runs.Get(st.ID).Remove(); err != nil {
		t.Fatal(err)
	}
}

// TestRewindInProgress: while a rewind holds the workspace, a second
// rewind (dry too), a restore and a checkpoint get rewind_in_progress with
// a one-line message, whatever their target; once it is done they are
// served again.
func TestRewindInProgress(t *testing.T) {
	j, err := journal.Open(t.TempDir(), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	d := &Daemon{j: j, log: zerolog.Nop(), done: make(chan struct{}), svc: &Service{J: j}}
	d.rewinding.Store(time.Now().Add(-1500 * time.Millisecond).UnixNano())
	for _, p := range []api.Params{
		api.RewindParams{Target: "-1"},
		api.RewindParams{Target: "no-such-label", Dry: true},
		api.RestoreParams{Path: "src", Target: "-1"},
		api.CheckpointParams{Label: "turn 2"},
	} {
		e := rpc(t, d, p, nil)
		if e == nil || e.Data.Kind != api.KindRewindInProgress {
			t.Fatalf("%s during a rewind: %+v, want kind rewind_in_progress", p.Method(), e)
		}
		if strings.Contains(e.Message, "\n") || !strings.Contains(e.Message, "a rewind has held the workspace for 1.5") {
			t.Errorf("%s: message %q", p.Method(), e.Message)
		}
	}
	d.rewinding.Store(0)
	if e := rpc(t, d, api.RewindParams{Target: "no-such-label", Dry: true}, nil); e == nil || e.Data.Kind != api.KindBadTarget {
		t.Fatalf("a dry rewind to a bad target with no rewind going: %+v, want bad_target", e)
	}
}
