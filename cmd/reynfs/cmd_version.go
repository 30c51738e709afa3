package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

// versionJSON is what 'reynfs version --json' prints: this binary's build
// and, when a daemon serves the workspace, the daemon's (it runs the
// binary it was mounted with, maybe an older one).
type versionJSON struct {
	api.Build
	Daemon *api.Build `json:"daemon,omitempty"`
}

func newVersionCommand() *cobra.Command {
	var o storeOptions
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the reynfs version, the store format and the API protocol version",
		Long: `Print this binary's version (the module version, the commit it was built from),
the Go toolchain that built it, the store format version it reads and writes, and the
control API protocol version; and, when a daemon serves the workspace around the
current directory (or --dir), the daemon's, which runs the binary it was mounted with.

` + exitCodeHelp,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := versionJSON{Build: api.ThisBuild(), Daemon: daemonBuild(cmd.Context(), o, dir)}
			if asJSON {
				return printJSON(v)
			}
			fmt.Print(formatBuild("reynfs", v.Build))
			if v.Daemon != nil {
				fmt.Print(formatBuild("daemon", *v.Daemon))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace whose daemon to ask too")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	return cmd
}

// formatBuild is a build for people, one line:
// "reynfs (devel) commit 1a2b3c4d5e6f (modified), go1.26.8, store format 1, API 1.0".
func formatBuild(who string, b api.Build) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s %s", who, b.Version)
	if b.Commit != "" {
		fmt.Fprintf(&s, " commit %.12s", b.Commit)
		if b.Dirty {
			s.WriteString(" (modified)")
		}
	}
	fmt.Fprintf(&s, ", %s, store format %d, API %s\n", b.Go, b.StoreFormat, b.Protocol)
	return s.String()
}

// daemonBuild asks the daemon of the workspace at dir for its build; nil
// when none runs (or it does not answer within a second: version never
// waits on a hung mount).
func daemonBuild(ctx context.Context, o storeOptions, dir string) *api.Build {
	store, err := findStore(o, dir)
	if err != nil {
		return nil
	}
	var r api.VersionResult
	if err := daemon.Call(ctx, store, api.VersionParams{}, &r, time.Second); err != nil {
		return nil
	}
	return &r.Build
}
