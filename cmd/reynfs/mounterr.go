package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// goFuseFusermount is how go-fuse reports a failed fusermount: the raw
// wait status ("exited with code 256" is exit status 1), without the
// reason, which fusermount wrote to the daemon's stderr: the store's log.
var goFuseFusermount = regexp.MustCompile(`fusermount exited with code (\d+)`)

// fusermountCause replaces go-fuse's "fusermount exited with code N" in
// err with what fusermount itself said, read from the log written since
// offset from (the daemon's stderr is the log), or at least with its real
// exit status. Any other error is returned as it is.
func fusermountCause(err error, log *os.File, from int64) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	m := goFuseFusermount.FindStringSubmatchIndex(msg)
	if m == nil {
		return err
	}
	cause := fusermountSaid(log, from)
	if cause == "" {
		status, _ := strconv.Atoi(msg[m[2]:m[3]])
		cause = fmt.Sprintf("fusermount failed (exit status %d)", status>>8)
	}
	return &wrappedMsg{msg: oneLine(msg[:m[0]] + cause + msg[m[1]:]), err: err}
}

// fusermountSaid is the last line fusermount (or fusermount3) wrote to
// log after offset from, without the program's name.
func fusermountSaid(log *os.File, from int64) string {
	if log == nil {
		return ""
	}
	f, err := os.Open(log.Name())
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return ""
	}
	var said string
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		// "/usr/bin/fusermount3: failed to open /dev/fuse: ..."
		if prog, text, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(filepath.Base(prog), "fusermount") {
			said = filepath.Base(prog) + ": " + text
		}
	}
	return said
}

// logSize is where a log ends now (0 when it cannot be told).
func logSize(f *os.File) int64 {
	if st, err := f.Stat(); err == nil {
		return st.Size()
	}
	return 0
}

// wrappedMsg is err told in other words; errors.Is and errors.As still
// see err (for the exit code).
type wrappedMsg struct {
	msg string
	err error
}

func (e *wrappedMsg) Error() string { return e.msg }
func (e *wrappedMsg) Unwrap() error { return e.err }
