package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/hooks"
)

func newIntegrateCommand() *cobra.Command {
	var dir string
	var remove bool
	cmd := &cobra.Command{
		Use:   "integrate claude [--remove] [--dir PROJECT]",
		Short: "Add reynfs's hooks to an agent CLI's project config (or remove them)",
		Long: `Merge the hooks that run 'reynfs hook claude' into PROJECT/.claude/settings.json
(created if missing). Running it again changes nothing; --remove takes out exactly
the entries it added. Other settings keep their order and bytes. See docs/agents.md.

` + exitCodeHelp,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "claude" {
				return fmt.Errorf("%w: integrate %q: only claude is supported so far (see docs/agents.md for the others)", errUsage, args[0])
			}
			path := filepath.Join(dir, ".claude", "settings.json")
			old, err := os.ReadFile(path)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("integrate claude: %w", err)
			}
			if old == nil && remove {
				return nil
			}
			out, err := hooks.IntegrateClaude(old, remove)
			if err != nil {
				return fmt.Errorf("%w: %s: %v", errUsage, path, err)
			}
			if string(out) == string(old) {
				return nil
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return fmt.Errorf("integrate claude: %w", err)
			}
			mode := os.FileMode(0o644)
			if fi, err := os.Stat(path); err == nil {
				mode = fi.Mode().Perm()
			}
			// Written beside and renamed: a crash leaves the old or the new
			// settings, never half of them.
			tmp := path + ".reynfs-tmp"
			if err := os.WriteFile(tmp, out, mode); err != nil {
				return fmt.Errorf("integrate claude: %w", err)
			}
			if err := os.Rename(tmp, path); err != nil {
				os.Remove(tmp)
				return fmt.Errorf("integrate claude: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&remove, "remove", false, "take reynfs's hooks out again")
	cmd.Flags().StringVar(&dir, "dir", ".", "the project directory")
	return cmd
}
