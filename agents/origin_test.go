package agents

import (
	"errors"
	"sync"
	"testing"

	"github.com/reynfs/reynfs/journal"
)

// A save names who made it, and a save its Check refuses under the lock
// appends nothing and leaves the registry's state as it was.
func TestSaveFrom(t *testing.T) {
	j, err := journal.Open(t.TempDir(), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var mu sync.Mutex
	r := NewRegistry(nil)
	o := Origin{Pid: 7, Comm: "reynfs", Run: "r1", Agent: "coder"}
	seq, h, err := r.SaveFrom(j, &mu, o, "coder", []byte("c1"))
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("run r1 cancelled")
	locked := false
	o.Check = func() error {
		locked = !mu.TryLock() // held by SaveFrom while it checks
		return refused
	}
	if _, _, err := r.SaveFrom(j, &mu, o, "coder", []byte("c2")); !errors.Is(err, refused) {
		t.Fatalf("refused save: %v, want its Check's error", err)
	}
	if !locked {
		t.Error("Check ran without the lock held")
	}
	if !mu.TryLock() {
		t.Fatal("the lock is still held after a refused save")
	}
	mu.Unlock()
	if got := r.Refs(); len(got) != 1 || got[0].State != h {
		t.Errorf("registry after a refused save: %+v, want the first state", got)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = j.Iter(1, func(rec *journal.Record) error {
		n++
		if rec.Seq == seq && (rec.Run != "r1" || rec.Agent != "coder" || rec.Pid != 7 || rec.Comm != "reynfs") {
			t.Errorf("save record %+v does not name its origin", rec)
		}
		return nil
	})
	if err != nil || n != 1 {
		t.Errorf("journal holds %d records (%v), want the one save", n, err)
	}
}
