package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
)

// completeTimeout bounds a completion's call: a shell must never hang on
// a tab (a stopped daemon, a slow store).
const completeTimeout = 2 * time.Second

// targetCompleter completes the targets of the workspace around dir (or
// --store): generation ids with their label, kind and age as the
// description, and labels, newest first, asked through the control API
// (the log method). nargs is how many leading arguments are targets.
func targetCompleter(o *storeOptions, dir *string, nargs int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if completingPath() || len(args) >= nargs {
			return nil, cobra.ShellCompDirectiveDefault // paths, or a directory (export)
		}
		return targets(cmd.Context(), *o, *dir, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// flagTargetCompleter completes a flag whose value is a target (--from, --at).
func flagTargetCompleter(o *storeOptions, dir *string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return targets(cmd.Context(), *o, *dir, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completingPath reports whether the word being completed comes after
// a "--" (a path of log or diff): cobra's ArgsLenAtDash is not set while
// it completes, so the command line is read as the shell passed it.
func completingPath() bool {
	if len(os.Args) < 2 {
		return false
	}
	words := os.Args[1 : len(os.Args)-1] // the last is the word being completed
	for _, w := range words {
		if w == "--" {
			return true
		}
	}
	return false
}

func targets(ctx context.Context, o storeOptions, dir, prefix string) []cobra.Completion {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	var resp api.LogReply
	if err := call(ctx, o, dir, api.LogParams{}, &resp); err != nil || resp.Log == nil {
		return nil
	}
	return targetCompletions(resp.Log, prefix, time.Now())
}

// targetCompletions lists the ids and labels of the current path's
// generations that start with prefix.
func targetCompletions(l *api.LogResult, prefix string, now time.Time) []cobra.Completion {
	var out []cobra.Completion
	labels := map[string]int{}
	for _, g := range l.Gens {
		labels[g.Label]++
	}
	for _, g := range l.Gens {
		age := now.Sub(g.Time).Round(time.Second)
		desc := fmt.Sprintf("%s, %s ago", g.Kind, age)
		if g.Label != "" {
			desc = fmt.Sprintf("%q %s", g.Label, desc)
		}
		if id := fmt.Sprintf("g%d", g.ID); strings.HasPrefix(id, prefix) {
			out = append(out, cobra.CompletionWithDesc(id, desc))
		}
		// A label names a target only when no other generation has it,
		// and one with blanks or a tab cannot be completed cleanly.
		if g.Label != "" && labels[g.Label] == 1 && !strings.ContainsAny(g.Label, " \t\n") && strings.HasPrefix(g.Label, prefix) {
			out = append(out, cobra.CompletionWithDesc(g.Label, fmt.Sprintf("g%d, %s", g.ID, desc)))
		}
	}
	return out
}
