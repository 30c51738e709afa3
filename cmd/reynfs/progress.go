package main

import (
	"os"
	"strconv"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// The progress indicators: schollz/progressbar (maintained, no terminal
// library of its own beyond x/term, which we already use), on stderr, and
// only where a person watches: a terminal, never a pipe or a file, never
// under --json. NO_COLOR is honoured by drawing without colour codes.

// busyAfter is how long an operation runs before busy shows a spinner: a
// quick call prints nothing extra.
const busyAfter = 500 * time.Millisecond

// busy runs fn, showing a spinner with what and the time elapsed on a
// terminal while fn takes longer than busyAfter (export, gc and restore
// wait on the daemon, which does not report how far it is).
func busy(show bool, what string, fn func() error) error {
	if !show || !interactive() {
		return fn()
	}
	done := make(chan struct{})
	shown := make(chan *progressbar.ProgressBar, 1)
	go func() {
		select {
		case <-done:
			shown <- nil
		case <-time.After(busyAfter):
			bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(os.Stderr),
				progressbar.OptionSetDescription(what), progressbar.OptionSpinnerType(14),
				progressbar.OptionSetElapsedTime(true), progressbar.OptionClearOnFinish(),
				progressbar.OptionEnableColorCodes(false))
			_ = bar.RenderBlank()
			<-done
			shown <- bar
		}
	}()
	err := fn()
	close(done)
	if bar := <-shown; bar != nil {
		_ = bar.Exit()
		_ = bar.Clear()
	}
	return err
}

// importBar is the mount's import progress: files and bytes read so far,
// and their rates (the total is not known before the walk ends). update
// is called often (throttle it): each call redraws.
type importBar struct {
	bar   *progressbar.ProgressBar
	start time.Time
}

func newImportBar() *importBar {
	return &importBar{start: time.Now(), bar: progressbar.NewOptions64(-1, progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription("importing"), progressbar.OptionShowBytes(true), progressbar.OptionShowCount(),
		progressbar.OptionSpinnerType(14), progressbar.OptionSetElapsedTime(true),
		progressbar.OptionClearOnFinish(), progressbar.OptionEnableColorCodes(false),
		progressbar.OptionThrottle(100*time.Millisecond))}
}

func (b *importBar) update(files int, bytes int64) {
	b.bar.Describe(importDesc(files, time.Since(b.start)))
	_ = b.bar.Set64(bytes)
}

// importDesc says how many files an import read in elapsed, and how
// fast once there is a second to average over (the bar adds the bytes
// and their rate).
func importDesc(files int, elapsed time.Duration) string {
	desc := "importing " + plural(files, "file")
	if s := elapsed.Seconds(); s >= 1 {
		desc += " at " + strconv.FormatFloat(float64(files)/s, 'f', 0, 64) + " files/s"
	}
	return desc
}

func (b *importBar) done() {
	_ = b.bar.Exit()
	_ = b.bar.Clear()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// interactive reports whether a person watches stderr (a terminal).
func interactive() bool { return term.IsTerminal(int(os.Stderr.Fd())) }
