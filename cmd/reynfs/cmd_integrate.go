package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/agents/hooks"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
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
				termsafe.Printf("%s %s\n", f.Change, f.Path)
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
// what it did to which file. Every name below dir is reached without
// following a symlink (integrate_fs.go).
func integrate(tool, dir string, remove bool) ([]api.IntegrateFile, error) {
	var sub, name string
	var merge func([]byte, bool) ([]byte, error)
	switch tool {
	case "claude":
		sub, name, merge = ".claude", "settings.json", hooks.IntegrateClaude
	case "codex":
		sub, name, merge = ".codex", "hooks.json", hooks.IntegrateCodex
	case "gemini":
		sub, name, merge = ".gemini", "settings.json", hooks.IntegrateGemini
	case "cursor":
		sub, name, merge = ".cursor", "hooks.json", hooks.IntegrateCursor
	case "openhands":
		sub, name, merge = ".openhands", "hooks.json", hooks.IntegrateOpenHands
	case "cline", "aider":
	default:
		return nil, fmt.Errorf("%w: integrate %q: want claude, codex, gemini, cursor, cline, openhands or aider", errUsage, tool)
	}
	p, err := openProject(tool, dir)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	switch tool {
	case "cline":
		return integrateCline(p, remove)
	case "aider":
		return integrateAider(p, remove)
	}
	path, rel := filepath.Join(dir, sub, name), sub+"/"+name
	unchanged := []api.IntegrateFile{{Path: path, Change: "unchanged"}}
	d, err := p.dir(sub, false)
	var old []byte
	mode := os.FileMode(0o644)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		var m os.FileMode
		old, m, err = p.read(d, name, rel)
		d.Close()
		if err != nil {
			return nil, err
		}
		if old != nil {
			mode = m
		}
	}
	if old == nil && remove {
		return unchanged, nil
	}
	out, err := merge(old, remove)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errUsage, path, err)
	}
	if old != nil && string(out) == string(old) {
		return unchanged, nil
	}
	if d, err = p.dir(sub, true); err != nil {
		return nil, err
	}
	defer d.Close()
	change := "updated"
	if old == nil {
		change = "created"
	}
	return []api.IntegrateFile{{Path: path, Change: change}}, p.replace(d, name, out, mode)
}

func integrateAider(p *projFS, remove bool) ([]api.IntegrateFile, error) {
	git, err := p.dir(".git", false)
	if err != nil {
		var lerr error
		if lerr = p.refuseLink(p.top, ".git", ".git"); lerr != nil {
			return nil, lerr
		}
		return nil, fmt.Errorf("%w: integrate aider: %s is not a git repository's top (no .git directory)", errUsage, p.path)
	}
	git.Close()
	path, rel := filepath.Join(p.path, ".git", "hooks", "post-commit"), ".git/hooks/post-commit"
	d, err := p.dir(".git/hooks", !remove)
	if errors.Is(err, os.ErrNotExist) && remove {
		return []api.IntegrateFile{{Path: path, Change: "unchanged"}}, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	old, m, err := p.read(d, "post-commit", rel)
	if err != nil {
		return nil, err
	}
	existed := old != nil
	out, keep := hooks.IntegratePostCommit(string(old), existed, remove)
	switch {
	case !keep && existed:
		if err := p.remove(d, "post-commit", rel); err != nil {
			return nil, err
		}
		return []api.IntegrateFile{{Path: path, Change: "removed"}}, nil
	case !keep || (existed && out == string(old)):
		return []api.IntegrateFile{{Path: path, Change: "unchanged"}}, nil
	}
	mode := os.FileMode(0o755)
	change := "created"
	if existed {
		mode, change = m|0o111, "updated"
	}
	return []api.IntegrateFile{{Path: path, Change: change}}, p.replace(d, "post-commit", []byte(out), mode)
}

// integrateCline writes (or removes) one hook file per event in
// .clinerules/hooks/. Every file is checked before any is written, so a
// foreign hook leaves the directory as it was.
func integrateCline(p *projFS, remove bool) ([]api.IntegrateFile, error) {
	const sub = ".clinerules/hooks"
	hookDir := filepath.Join(p.path, ".clinerules", "hooks")
	d, err := p.dir(sub, false)
	switch {
	case errors.Is(err, os.ErrNotExist):
		d = nil
	case err != nil:
		return nil, err
	default:
		defer d.Close()
	}
	type change struct {
		name string
		out  []byte
		keep bool
	}
	var changes []change
	var files []api.IntegrateFile
	for _, name := range hooks.ClineHooks {
		path := filepath.Join(hookDir, name)
		var old []byte
		if d != nil {
			if old, _, err = p.read(d, name, sub+"/"+name); err != nil {
				return nil, err
			}
		}
		existed := old != nil
		out, keep, err := hooks.IntegrateClineHook(old, existed, remove)
		if err != nil {
			return nil, fmt.Errorf("%w: integrate cline: %s %v", errUsage, path, err)
		}
		if keep != existed || (keep && string(out) != string(old)) {
			changes = append(changes, change{name, out, keep})
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
	if len(changes) > 0 && d == nil {
		if d, err = p.dir(sub, true); err != nil {
			return nil, err
		}
		defer d.Close()
	}
	for _, c := range changes {
		if !c.keep {
			if err := p.remove(d, c.name, sub+"/"+c.name); err != nil {
				return nil, err
			}
			continue
		}
		if err := p.replace(d, c.name, c.out, 0o755); err != nil {
			return nil, err
		}
	}
	if remove && len(changes) > 0 {
		// The directories go too when nothing else is in them (rmdir
		// fails on a directory that is not empty, and that is fine).
		if rules, err := p.dir(".clinerules", false); err == nil {
			unix.Unlinkat(int(rules.Fd()), "hooks", unix.AT_REMOVEDIR)
			rules.Close()
			unix.Unlinkat(int(p.top.Fd()), ".clinerules", unix.AT_REMOVEDIR)
		}
	}
	return files, nil
}
