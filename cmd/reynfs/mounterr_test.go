package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

// TestFusermountCause: go-fuse's "fusermount exited with code 256" becomes
// what fusermount wrote to the log after the mount began, or its real exit
// status when it wrote nothing; other errors stay as they are.
func TestFusermountCause(t *testing.T) {
	log, err := os.Create(filepath.Join(t.TempDir(), "reynfs.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	fmt.Fprintln(log, "/usr/bin/fusermount3: an older failure")
	from := logSize(log)
	goFuse := fmt.Errorf("%w: mount /p: fusermount exited with code 256\n", daemon.ErrUsage)

	if got := fusermountCause(goFuse, log, from).Error(); got != "usage: mount /p: fusermount failed (exit status 1)" {
		t.Errorf("nothing said: %q", got)
	}
	fmt.Fprintln(log, `{"level":"info","message":"importing"}`)
	fmt.Fprintln(log, "/usr/bin/fusermount3: user has no write access to mountpoint /p")
	got := fusermountCause(goFuse, log, from)
	if got.Error() != "usage: mount /p: fusermount3: user has no write access to mountpoint /p" {
		t.Errorf("said: %q", got)
	}
	if !errors.Is(got, daemon.ErrUsage) {
		t.Errorf("the cause's sentinel is lost: %v", got)
	}
	other := errors.New("mount /p: no such device")
	if fusermountCause(other, log, from) != other {
		t.Errorf("another error was changed")
	}
}
