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
		Use:   "integrate claude|gemini|aider [--remove] [--dir PROJECT]",
		Short: "Add reynfs's hooks to an agent CLI's project config (or remove them)",
		Long: `Merge the hooks that run 'reynfs hook claude' into PROJECT/.claude/settings.json
(created if missing), or for gemini .gemini/settings.json. Running it again changes nothing; --remove takes out exactly
the entries it added. Other settings keep their order and bytes. For aider, add a
block to .git/hooks/post-commit (created if missing, an existing hook is kept)
that makes each commit a generation. See docs/agents.md.

` + exitCodeHelp,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := filepath.Join(dir, ".claude", "settings.json")
			merge := hooks.IntegrateClaude
			switch args[0] {
			case "claude":
			case "gemini":
				path, merge = filepath.Join(dir, ".gemini", "settings.json"), hooks.IntegrateGemini
			case "aider":
				return integrateAider(dir, remove)
			default:
				return fmt.Errorf("%w: integrate %q: want claude, gemini or aider (see docs/agents.md for the others)", errUsage, args[0])
			}
			old, err := os.ReadFile(path)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("integrate %s: %w", args[0], err)
			}
			if old == nil && remove {
				return nil
			}
			out, err := merge(old, remove)
			if err != nil {
				return fmt.Errorf("%w: %s: %v", errUsage, path, err)
			}
			if string(out) == string(old) {
				return nil
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return fmt.Errorf("integrate %s: %w", args[0], err)
			}
			mode := os.FileMode(0o644)
			if fi, err := os.Stat(path); err == nil {
				mode = fi.Mode().Perm()
			}
			return replaceFile(args[0], path, out, mode)
		},
	}
	cmd.Flags().BoolVar(&remove, "remove", false, "take reynfs's hooks out again")
	cmd.Flags().StringVar(&dir, "dir", ".", "the project directory")
	return cmd
}

// replaceFile writes data beside path and renames it over: a crash leaves
// the old or the new file, never half of it.
func replaceFile(tool, path string, data []byte, mode os.FileMode) error {
	tmp := path + ".reynfs-tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("integrate %s: %w", tool, err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("integrate %s: %w", tool, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("integrate %s: %w", tool, err)
	}
	return nil
}

func integrateAider(dir string, remove bool) error {
	gitDir := filepath.Join(dir, ".git")
	if fi, err := os.Stat(gitDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: integrate aider: %s is not a git repository's top (no .git directory)", errUsage, dir)
	}
	path := filepath.Join(gitDir, "hooks", "post-commit")
	old, err := os.ReadFile(path)
	existed := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("integrate aider: %w", err)
	}
	out, keep := hooks.IntegratePostCommit(string(old), existed, remove)
	switch {
	case !keep && existed:
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("integrate aider: %w", err)
		}
		return nil
	case !keep || (existed && out == string(old)):
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("integrate aider: %w", err)
	}
	mode := os.FileMode(0o755)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm() | 0o111
	}
	return replaceFile("aider", path, []byte(out), mode)
}
