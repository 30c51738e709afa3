package daemon

import (
	"errors"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// flushLogEvery is how often a periodic flush failure that persists is
// logged again.
const flushLogEvery = time.Minute

// flushLog logs the results of the once-a-second periodic flush. A full
// disk fails every flush until space comes back, and a line a second
// buries everything else in reynfs.log (and fills the disk further when
// the log is on it): so the first failure of a kind is logged, then at
// most one line a minute while that kind persists (saying how many it
// left out), and one line when flushing works again.
type flushLog struct {
	log     zerolog.Logger
	class   string    // kind of the failures now being logged; "" while flushes work
	logged  time.Time // when the last failure line was written
	skipped int       // failures since then not logged
	since   time.Time // first failure of this run of failures
}

// note records one flush's result at time now.
func (f *flushLog) note(err error, now time.Time) {
	if err == nil {
		if f.class != "" {
			f.log.Info().Str("after", now.Sub(f.since).Round(time.Second).String()).
				Msg("periodic flush works again")
			f.class, f.skipped = "", 0
		}
		return
	}
	c := flushClass(err)
	switch {
	case c != f.class:
		if f.class == "" {
			f.since = now
		}
		f.class, f.skipped = c, 0
	case now.Sub(f.logged) < flushLogEvery:
		f.skipped++
		return
	}
	ev := f.log.Error().Err(err)
	if f.skipped > 0 {
		ev = ev.Int("repeats", f.skipped)
	}
	ev.Msg("periodic flush (logged again at most once a minute while it keeps failing)")
	f.logged, f.skipped = now, 0
}

// flushClass names the kind of a flush failure: a run of failures of one
// kind is one condition (a full disk, a failed journal), whatever the
// details of each message.
func flushClass(err error) string {
	switch {
	case errors.Is(err, journal.ErrNoSpace), errors.Is(err, tree.ErrNoSpace), errors.Is(err, syscall.ENOSPC):
		return "no space"
	case errors.Is(err, journal.ErrFailed), errors.Is(err, tree.ErrFailed):
		return "journal failed"
	case errors.Is(err, journal.ErrClosed):
		return "journal closed"
	case errors.Is(err, journal.ErrInvalid):
		return "invalid record"
	}
	return "other"
}
