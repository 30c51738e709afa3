package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/agents/hooks"
)

func newIntegrateCommand() *cobra.Command {
	var dir string
	var remove, asJSON bool
	cmd := &cobra.Command{
		Use:   "integrate claude|codex|gemini|cursor|cline|openhands|aider [--remove] [--dir PROJECT] [--json]",
		Short: "Add reynfs's hooks to an agent CLI's project config (or remove them)",
		Long: `Merge the hooks that run 'reynfs hook TOOL' into the tool's project config in
PROJECT (created if missing): .claude/settings.json, .codex/hooks.json,
.gemini/settings.json, .cursor/hooks.json or .openhands/hooks.json. Running it
again changes nothing; --remove takes out exactly the entries it added. Other
settings keep their order and bytes. For cline, write one executable per event
in .clinerules/hooks/ (an existing hook file that is not reynfs's is an error,
and nothing is written). For aider, add a block to .git/hooks/post-commit
(created if missing, an existing hook is kept) that makes each commit a
generation. See docs/agents.md. --json prints the files looked at and what was
done to each (created, updated, removed or unchanged).

` + exitCodeHelp,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := integrate(args[0], dir, remove)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(api.IntegrateInfo{Tool: args[0], Removed: remove, Files: files})
			}
			// One line per file, as git prints what a command changed: a
			// silent success leaves the user to guess whether it worked.
			for _, f := range files {
				fmt.Printf("%s %s\n", f.Change, f.Path)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&remove, "remove", false, "take reynfs's hooks out again")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the files changed as JSON")
	cmd.Flags().StringVar(&dir, "dir", ".", "the project directory")
	return cmd
}

// integrate merges (or removes) tool's hooks in the project dir and says
// what it did to which file.
func integrate(tool, dir string, remove bool) ([]api.IntegrateFile, error) {
	if !strings.Contains(" claude codex gemini cursor openhands cline aider ", " "+tool+" ") {
		return nil, fmt.Errorf("%w: integrate %q: want claude, codex, gemini, cursor, cline, openhands or aider", errUsage, tool)
	}
	// The project must exist: 'integrate claude --dir /typo' created
	// /typo/.claude/settings.json, directories and all.
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%w: integrate %s: %s: no such directory", errUsage, tool, dir)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%w: integrate %s: %s: not a directory", errUsage, tool, dir)
	}
	var path string
	var merge func([]byte, bool) ([]byte, error)
	switch tool {
	case "claude":
		path, merge = filepath.Join(dir, ".claude", "settings.json"), hooks.IntegrateClaude
	case "codex":
		path, merge = filepath.Join(dir, ".codex", "hooks.json"), hooks.IntegrateCodex
	case "gemini":
		path, merge = filepath.Join(dir, ".gemini", "settings.json"), hooks.IntegrateGemini
	case "cursor":
		path, merge = filepath.Join(dir, ".cursor", "hooks.json"), hooks.IntegrateCursor
	case "openhands":
		path, merge = filepath.Join(dir, ".openhands", "hooks.json"), hooks.IntegrateOpenHands
	case "cline":
		return integrateCline(dir, remove)
	case "aider":
		return integrateAider(dir, remove)
	default:
		return nil, fmt.Errorf("%w: integrate %q: want claude, codex, gemini, cursor, cline, openhands or aider", errUsage, tool)
	}
	unchanged := []api.IntegrateFile{{Path: path, Change: "unchanged"}}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("integrate %s: %w", tool, err)
	}
	if old == nil && remove {
		return unchanged, nil
	}
	out, err := merge(old, remove)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errUsage, path, err)
	}
	if string(out) == string(old) {
		return unchanged, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("integrate %s: %w", tool, err)
	}
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	change := "updated"
	if old == nil {
		change = "created"
	}
	return []api.IntegrateFile{{Path: path, Change: change}}, replaceFile(tool, path, out, mode)
}

// replaceFile writes data to a new temporary file beside path (a unique
// name, so two integrates never share one) and renames it over: a crash
// leaves the old or the new file, never half of it.
func replaceFile(tool, path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".reynfs-*")
	if err != nil {
		return fmt.Errorf("integrate %s: %w", tool, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("integrate %s: %w", tool, err)
	}
	return nil
}

func integrateAider(dir string, remove bool) ([]api.IntegrateFile, error) {
	gitDir := filepath.Join(dir, ".git")
	if fi, err := os.Stat(gitDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: integrate aider: %s is not a git repository's top (no .git directory)", errUsage, dir)
	}
	path := filepath.Join(gitDir, "hooks", "post-commit")
	old, err := os.ReadFile(path)
	existed := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("integrate aider: %w", err)
	}
	out, keep := hooks.IntegratePostCommit(string(old), existed, remove)
	switch {
	case !keep && existed:
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("integrate aider: %w", err)
		}
		return []api.IntegrateFile{{Path: path, Change: "removed"}}, nil
	case !keep || (existed && out == string(old)):
		return []api.IntegrateFile{{Path: path, Change: "unchanged"}}, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("integrate aider: %w", err)
	}
	mode := os.FileMode(0o755)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm() | 0o111
	}
	change := "updated"
	if !existed {
		change = "created"
	}
	return []api.IntegrateFile{{Path: path, Change: change}}, replaceFile("aider", path, []byte(out), mode)
}

// integrateCline writes (or removes) one hook file per event in
// .clinerules/hooks/. Every file is checked before any is written, so a
// foreign hook leaves the directory as it was.
func integrateCline(dir string, remove bool) ([]api.IntegrateFile, error) {
	hookDir := filepath.Join(dir, ".clinerules", "hooks")
	type change struct {
		path string
		out  []byte
		keep bool
	}
	var changes []change
	var files []api.IntegrateFile
	for _, name := range hooks.ClineHooks {
		path := filepath.Join(hookDir, name)
		old, err := os.ReadFile(path)
		existed := err == nil
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("integrate cline: %w", err)
		}
		out, keep, err := hooks.IntegrateClineHook(old, existed, remove)
		if err != nil {
			return nil, fmt.Errorf("%w: integrate cline: %s %v", errUsage, path, err)
		}
		if keep != existed || (keep && string(out) != string(old)) {
			changes = append(changes, change{path, out, keep})
			what := "updated"
			switch {
			case !keep:
				what = "removed"
			case !existed:
				what = "created"
			}
			files = append(files, api.IntegrateFile{Path: path, Change: what})
		} else {
			files = append(files, api.IntegrateFile{Path: path, Change: "unchanged"})
		}
	}
	if len(changes) > 0 && !remove {
		if err := os.MkdirAll(hookDir, 0o755); err != nil {
			return nil, fmt.Errorf("integrate cline: %w", err)
		}
	}
	for _, c := range changes {
		if !c.keep {
			if err := os.Remove(c.path); err != nil {
				return nil, fmt.Errorf("integrate cline: %w", err)
			}
			continue
		}
		if err := replaceFile("cline", c.path, c.out, 0o755); err != nil {
			return nil, err
		}
	}
	if remove && len(changes) > 0 {
		// The directories go too when nothing else is in them (Remove
		// fails on a directory that is not empty, and that is fine).
		os.Remove(hookDir)
		os.Remove(filepath.Dir(hookDir))
	}
	return files, nil
}
