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

// importBar is the mount's import progress: files and bytes read so far
// (the total is not known before the walk ends).
type importBar struct{ bar *progressbar.ProgressBar }

func newImportBar() *importBar {
	return &importBar{bar: progressbar.NewOptions64(-1, progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription("importing"), progressbar.OptionShowBytes(true), progressbar.OptionShowTotalBytes(true),
		progressbar.OptionSpinnerType(14), progressbar.OptionSetElapsedTime(true),
		progressbar.OptionClearOnFinish(), progressbar.OptionEnableColorCodes(false),
		progressbar.OptionThrottle(100*time.Millisecond))}
}

func (b *importBar) update(files int, bytes int64) {
	b.bar.Describe("importing " + plural(files, "file"))
	_ = b.bar.Set64(bytes)
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
