package cas_test

import (
	"errors"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/castest"
)

func TestMemoryConformance(t *testing.T) {
	castest.Run(t, func(*testing.T) cas.Store { return cas.NewMemory() })
}

func TestMemoryCorrupt(t *testing.T) {
	m := cas.NewMemory()
	for _, d := range [][]byte{[]byte("some bytes"), nil} {
		h, err := m.Put(d)
		if err != nil {
			t.Fatal(err)
		}
		m.Corrupt(h)
		got, err := m.Get(h)
		if !errors.Is(err, cas.ErrCorrupt) || got != nil {
			t.Fatalf("Get after Corrupt = %q, %v; want ErrCorrupt", got, err)
		}
	}
	m.Corrupt(cas.Sum([]byte("absent"))) // no-op
	if m.Len() != 2 {
		t.Fatalf("Len = %d, want 2", m.Len())
	}
}
