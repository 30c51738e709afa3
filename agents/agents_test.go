package agents

import (
	"errors"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"planner", "coder-2", "a.b_c", "ü"} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a/b", "a b", "tab\t", "nl\n", string(make([]byte, 129))} {
		if err := CheckName(bad); !errors.Is(err, ErrName) {
			t.Errorf("CheckName(%q): %v, want ErrName", bad, err)
		}
	}
}

// TestStatesAt: saves, a generation that snapshots them, and a reset that
// abandons a later save; StatesAt follows each seq's own path.
func TestStatesAt(t *testing.T) {
	j, err := journal.Open(t.TempDir(), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	r := NewRegistry(nil)
	save := func(name, data string) uint64 {
		t.Helper()
		seq, h, err := r.Save(j, nil, name, []byte(data))
		if err != nil || h != cas.Sum([]byte(data)) {
			t.Fatalf("save %s: %v", name, err)
		}
		return seq
	}
	s1 := save("a", "a1")
	save("b", "b1")
	gen := &journal.Record{Op: journal.OpGeneration, GenKind: "manual", Root: cas.Sum([]byte("root")), Agents: r.Refs()}
	if err := j.Enqueue(gen, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	s3 := save("a", "a2") // abandoned below
	reset := &journal.Record{Op: journal.OpReset, ResetTo: gen.Seq, Supersedes: 0}
	if err := j.Enqueue(reset, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	s5 := save("b", "b2")
	gens := []uint64{gen.Seq}
	want := map[uint64]map[string]string{
		s1:      {"a": "a1"},
		gen.Seq: {"a": "a1", "b": "b1"},
		s3:      {"a": "a2", "b": "b1"}, // on its own (abandoned) path
		s5:      {"a": "a1", "b": "b2"}, // the reset dropped a2
	}
	for x, w := range want {
		got, err := StatesAt(j, x, gens)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(w) {
			t.Errorf("at %d: %d agents, want %d", x, len(got), len(w))
		}
		for name, data := range w {
			if got[name] != cas.Sum([]byte(data)) {
				t.Errorf("at %d: agent %s is not %q", x, name, data)
			}
		}
	}
	if _, _, err := r.Save(j, nil, "big", make([]byte, MaxState+1)); err == nil {
		t.Error("a state over MaxState was saved")
	}
}

// TestSaveRefusedLeavesRegistry: a save the journal refuses (here the
// journal failed by a commit the full disk refused, and then a closed
// journal) is an error and leaves the registry as it was, so the next
// generation does not name a state that was never stored.
func TestSaveRefusedLeavesRegistry(t *testing.T) {
	var full bool
	dir := t.TempDir()
	j, err := journal.Open(dir, journal.Options{Logger: zerolog.Nop(), Fault: func(op string) error {
		if full && op == "commit" {
			return journal.ErrNoSpace
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRegistry(nil)
	if _, _, err := r.Save(j, nil, "a", []byte("a1")); err != nil {
		t.Fatal(err)
	}
	full = true
	if _, _, err := r.Save(j, nil, "a", []byte("a2")); !errors.Is(err, journal.ErrNoSpace) {
		t.Fatalf("save on a full disk: %v, want ErrNoSpace", err)
	}
	// The journal is failed now: the next save is refused at Enqueue.
	want := r.States()
	seq, _, err := r.Save(j, nil, "b", []byte("b1"))
	if err == nil {
		t.Fatalf("save on a failed journal: seq %d, want an error", seq)
	}
	if got := r.States(); len(got) != len(want) || got["b"] != (cas.Hash{}) {
		t.Errorf("states after a refused save: %v, want %v", got, want)
	}
	_ = j.Close()

	j, err = journal.Open(dir, journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	r = NewRegistry(map[string]cas.Hash{"a": cas.Sum([]byte("a1"))})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Save(j, nil, "a", []byte("a3")); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("save on a closed journal: %v, want ErrClosed", err)
	}
	for _, ref := range r.Refs() {
		if ref.Name == "a" && ref.State != cas.Sum([]byte("a1")) {
			t.Errorf("generation would name agent a's refused state %s", ref.State.Short())
		}
	}
}
