package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"time"
)

// guard runs a command and turns a panic in it into an error that exits
// with exitInternal: a user never sees a Go stack trace. The trace goes to
// a file of its own, named in the one-line message. Panics in other
// goroutines cannot be caught this way; the store-opening code checks
// Badger's files first so that Badger's own goroutines do not panic.
func guard(run func() error) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		where := writeTrace(r, debug.Stack())
		err = &codedError{code: exitInternal,
			msg: oneLine(fmt.Sprintf("internal error: %v (trace in %s); please report it", r, where))}
	}()
	return run()
}

// writeTrace saves a panic's value and stack in a new temporary file and
// returns its name (or why it could not).
func writeTrace(r any, stack []byte) string {
	f, err := os.CreateTemp("", "reynfs-panic-*.txt")
	if err != nil {
		return "no file: " + err.Error()
	}
	defer f.Close()
	fmt.Fprintf(f, "reynfs %v panic at %s: %v\n\n%s", os.Args[1:], time.Now().UTC().Format(time.RFC3339), r, stack)
	if g, ok := r.(interface{ Stack() []byte }); ok {
		// raised again from another goroutine (the import's): its own stack
		fmt.Fprintf(f, "\npanicked first in:\n%s", g.Stack())
	}
	return f.Name()
}
