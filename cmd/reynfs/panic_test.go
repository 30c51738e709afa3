package main

import (
	"os"
	"strings"
	"testing"
)

func TestGuardTurnsPanicIntoExit70(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	err := guard(func() error {
		var m map[string]int
		m["x"]++ // a nil-map write: a real runtime panic
		return nil
	})
	if got := exitCode(err); got != exitInternal {
		t.Fatalf("exit code %d, want %d (%v)", got, exitInternal, err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || strings.Contains(msg, "goroutine") {
		t.Fatalf("message is not one line without a trace: %q", msg)
	}
	i := strings.Index(msg, "trace in ")
	if i < 0 {
		t.Fatalf("message names no trace file: %q", msg)
	}
	name := strings.Fields(msg[i+len("trace in "):])[0]
	name = strings.TrimSuffix(name, ");")
	b, err := os.ReadFile(name)
	if err != nil || !strings.Contains(string(b), "goroutine") {
		t.Fatalf("trace file %s: %v\n%s", name, err, b)
	}
	if err := guard(func() error { return nil }); err != nil {
		t.Fatal(err)
	}
}
