package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/agents/hooks"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

// TestNotServed: with no daemon, a directory never mounted is named as
// no workspace (not as a store nobody serves), an unmounted one as not
// mounted; both keep exit 5 and say what to run.
func TestNotServed(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	dir := t.TempDir()
	store, err := daemon.DefaultStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Errorf("%w (%s)", daemon.ErrNotRunning, store)

	// --store naming another store: the message is about that store.
	other := filepath.Join(t.TempDir(), "typo")
	if msg := notServed(base, dir, other).Error(); msg != "no reynfs store in "+other+": 'reynfs mount DIR --store "+other+"' makes one" {
		t.Errorf("--store elsewhere: %q", msg)
	}

	err = notServed(base, dir, store)
	if msg := err.Error(); !strings.Contains(msg, dir+" is not a reynfs workspace") || !strings.Contains(msg, "'reynfs mount DIR' makes one") {
		t.Errorf("no store: %q", msg)
	}
	if code := exitCode(err); code != exitNoDaemon {
		t.Errorf("no store: exit %d, want %d", code, exitNoDaemon)
	}

	if err := os.MkdirAll(daemon.DBPath(store), 0o700); err != nil {
		t.Fatal(err)
	}
	err = notServed(base, dir, store)
	if msg := err.Error(); !strings.Contains(msg, dir+" is not mounted") {
		t.Errorf("unmounted store: %q", msg)
	}
	if code := exitCode(err); code != exitNoDaemon {
		t.Errorf("unmounted store: exit %d, want %d", code, exitNoDaemon)
	}

	usage := fmt.Errorf("%w: bad", errUsage)
	if got := notServed(usage, dir, store); got != usage {
		t.Errorf("another error was rewritten: %v", got)
	}
}

// TestHookOutsideWorkspace: a hook fired in a directory that was never
// mounted says so, on one line, rather than naming a store that does not
// exist.
func TestHookOutsideWorkspace(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), hookDeadline)
	defer cancel()
	err := callAll(ctx, storeOptions{}, "claude", &hooks.Payload{Cwd: dir}, []api.Params{api.CheckpointParams{Kind: "turn"}})
	if err == nil || !strings.Contains(err.Error(), "hook claude checkpoint: "+dir+" is not a reynfs workspace") || strings.Contains(err.Error(), "\n") {
		t.Errorf("hook outside a workspace: %v", err)
	}
}

// TestNoStoreNamesAbsoluteDir: "no reynfs store for ." said nothing of
// where the user stood.
func TestNoStoreNamesAbsoluteDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	err := checkStoreExists(".", filepath.Join(dir, "nostore"))
	if err == nil || !strings.Contains(err.Error(), "no reynfs store for "+dir+" ") || exitCode(err) != exitUsage {
		t.Errorf("%v", err)
	}
}
