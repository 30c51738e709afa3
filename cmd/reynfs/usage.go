package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// unknownSubcommands makes every command that only groups others (reynfs,
// agent, api) refuse an unknown subcommand as bad input (exit 2) with
// cobra's suggestions, on one line, like git's "did you mean". Without it
// cobra prints such a group's help and exits 0 ('reynfs agent bogus'), or
// reports the root's unknown command over several lines.
func unknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		unknownSubcommands(sub)
	}
	if c.Runnable() || !c.HasSubCommands() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.SuggestionsMinimumDistance = 2 // cobra's own default, which SuggestionsFor needs set
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return unknownCommand(cmd, args[0])
	}
}

func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return fmt.Errorf("%w: %s (see '%s --help')", errUsage, msg, cmd.CommandPath())
}

// flagError is a bad flag as one line of bad input, with the nearest
// flag names the command has when the flag is unknown ("--jsn": did you
// mean --json?).
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		var near []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && (editDistance(name, f.Name) <= 2 || strings.HasPrefix(f.Name, name)) {
				near = append(near, "--"+f.Name)
			}
		})
		if len(near) > 0 {
			msg += "; did you mean " + strings.Join(near, " or ") + "?"
		}
	}
	return fmt.Errorf("%w: %s%s", errUsage, commandPrefix(cmd), msg)
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// colour reports whether output to f may be coloured: only a terminal,
// and never when NO_COLOR is set to anything (https://no-color.org).
func colour(f *os.File) bool {
	return os.Getenv("NO_COLOR") == "" && term.IsTerminal(int(f.Fd()))
}
