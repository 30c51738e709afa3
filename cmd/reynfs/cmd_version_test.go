package main

import (
	"testing"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/journal"
)

func TestFormatBuild(t *testing.T) {
	b := api.Build{Version: "v1.2.3", Commit: "0123456789abcdef0123", Dirty: true, Go: "go1.26.8", StoreFormat: 1, Protocol: "1.0"}
	if got, want := formatBuild("reynfs", b), "reynfs v1.2.3 commit 0123456789ab (modified), go1.26.8, store format 1, API 1.0\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	this := api.ThisBuild()
	if this.StoreFormat != journal.StoreFormat || this.Protocol != api.Version || this.Version == "" || this.Go == "" {
		t.Errorf("this build: %+v", this)
	}
}
