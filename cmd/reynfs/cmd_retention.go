package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/rewind"
)

const retentionHelp = `Retention has two windows. Every seq (every state, on every branch) is kept for the
seqs window; generations (their trees and agent states, not the records between them)
for the generations window. A window is an age (90s, 36h, 7d, 2w) or a count (500:
records for --seqs, generations for --generations, counting only the kinds a person
cuts, not auto or rewind). Past both, history goes, and the objects only it named with
it. The floors never drop the current state, the newest generation, a state a name
(reynfs branch NAME) points at, or one a rewind, restore or view is using. A mounted
daemon collects every --every (default 10m); 'reynfs gc' collects now. A rewind,
restore, diff or view below the floor is refused (kind not_retained).`

func newRetentionCommand() *cobra.Command {
	var o storeOptions
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "retention [--json]",
		Short: "Show the store's retention windows and floors",
		Long: `Show the store's retention policy (default: every seq for 7d, generations for 90d)
and where the floors stand.

` + retentionHelp + "\n\n" + exitCodeHelp,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return retention(cmd, o, dir, api.RetentionParams{}, asJSON)
		},
	}
	flags := func(c *cobra.Command) {
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		c.Flags().StringVar(&dir, "dir", ".", "the project directory (or a path inside it)")
		c.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	}
	flags(cmd)
	var p api.RetentionParams
	set := &cobra.Command{
		Use:   "set [--seqs W] [--generations W] [--every D] [--default] [--json]",
		Short: "Change the store's retention windows",
		Long: `Change the windows given (the others stay); --default goes back to the default
policy first. The policy is kept in the store; the next collection applies it.

` + retentionHelp + "\n\n" + exitCodeHelp,
		Example: `  reynfs retention set --seqs 7d --generations 90d
  reynfs retention set --seqs 2000 --generations 50 --every 1h`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if p.Seqs == "" && p.Generations == "" && p.Every == "" && !p.Default {
				return fmt.Errorf("%w: retention set needs --seqs, --generations, --every or --default", errUsage)
			}
			for _, w := range []string{p.Seqs, p.Generations} {
				if w != "" {
					if _, err := rewind.ParseWindow(w); err != nil {
						return fmt.Errorf("%w: %v", errUsage, err)
					}
				}
			}
			return retention(cmd, o, dir, p, asJSON)
		},
	}
	set.Flags().StringVar(&p.Seqs, "seqs", "", "keep every seq for this age (7d) or this many records (500)")
	set.Flags().StringVar(&p.Generations, "generations", "", "keep generations for this age (90d) or this many (50)")
	set.Flags().StringVar(&p.Every, "every", "", "how often a mounted daemon collects (10m)")
	set.Flags().BoolVar(&p.Default, "default", false, "back to the default policy (then the other flags apply)")
	flags(set)
	cmd.AddCommand(set)
	return cmd
}

func retention(cmd *cobra.Command, o storeOptions, dir string, p api.RetentionParams, asJSON bool) error {
	var resp api.RetentionResult
	if err := call(cmd.Context(), o, dir, p, &resp); err != nil {
		return err
	}
	r := resp.Retention
	if asJSON {
		return printJSON(r)
	}
	def := ""
	if !r.Set {
		def = " (the default)"
	}
	fmt.Printf("retention: every seq for %s, generations for %s%s; a mounted daemon collects every %s\n",
		window(r.Seqs, "records"), window(r.Generations, "generations"), def, r.Every)
	printFloors(r.Floor, r.Floors)
	return nil
}

// window reads a window back for people: "7d" or "500 records".
func window(w, what string) string {
	if _, err := strconv.Atoi(w); err == nil {
		return w + " " + what
	}
	return w
}

func printFloors(floor uint64, f rewind.Floors) {
	if floor <= 1 && f.Seq <= 1 {
		fmt.Println("floor: nothing dropped yet; every seq from 1 is kept")
		return
	}
	line := fmt.Sprintf("floor: every seq from seq %d", floor)
	if f.Seq == floor && !f.SeqTime.IsZero() {
		line += fmt.Sprintf(" (%s, set by %s)", f.SeqTime.Local().Format(time.DateTime), f.SeqBy)
	}
	if f.Gen != 0 && f.Gen < floor {
		line += fmt.Sprintf("; generations from seq %d (%s, set by %s)", f.Gen, f.GenTime.Local().Format(time.DateTime), f.GenBy)
	}
	fmt.Println(line)
}
