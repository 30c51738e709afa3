package main

import (
	"context"
	"fmt"
	"os"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/cmd/reynfs/timeline"
)

func newTimelineCommand() *cobra.Command {
	var o storeOptions
	var dir string
	cmd := &cobra.Command{
		Use:   "timeline",
		Short: "Pick a point of the timeline to rewind to, in a terminal UI",
		Long: `Open the timeline of the workspace around the current directory (or --dir) in a
terminal UI (also 'reynfs rewind -i'): newest first, "(current)" preselected so that a
stray Enter does nothing. The right pane lists what a rewind to the highlighted point
would change (d: the diff of the file under its cursor; Tab moves there). Enter asks
first: rewind, restore only the path under the cursor, or never mind (the default).
u undoes the last rewind, a shows abandoned branches, / filters, ? lists the keys.
It needs the workspace mounted (it talks to its daemon only). No colour with NO_COLOR.

` + exitCodeHelp,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTimeline(cmd.Context(), o, dir)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace (or the project directory)")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	return cmd
}

// runTimeline runs the picker on the daemon of the workspace at dir.
func runTimeline(ctx context.Context, o storeOptions, dir string) error {
	if !term.IsTerminal(int(os.Stdin.Fd())) || !term.IsTerminal(int(os.Stdout.Fd())) {
		return fmt.Errorf("%w: timeline needs a terminal; in scripts use 'reynfs log' and 'reynfs rewind TARGET'", errUsage)
	}
	store, err := findStore(o, dir)
	if err != nil {
		return err
	}
	c := daemonCaller{store: store}
	// Fail before the screen is taken: no daemon, no picker.
	if err := c.Do(ctx, api.StatusParams{}, &api.StatusResult{}); err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	_, noColor := os.LookupEnv("NO_COLOR")
	m := timeline.New(ctx, &timeline.API{C: c}, !noColor, time.Now)
	if _, err := tea.NewProgram(m, tea.WithContext(ctx)).Run(); err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	return nil
}

// daemonCaller makes each call on a connection of its own to the
// daemon of store; it never falls back to opening the store.
type daemonCaller struct{ store string }

func (d daemonCaller) Do(ctx context.Context, p api.Params, res any) error {
	return daemon.Call(ctx, d.store, p, res, 10*time.Minute) // as call() waits for a rewind
}
