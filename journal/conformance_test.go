package journal_test

import (
	"testing"

	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/journal/journaltest"
)

func TestConformance(t *testing.T) {
	journaltest.Run(t, func(t *testing.T, dir string) *journal.Journal {
		j, err := journal.Open(dir, journal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return j
	})
}
