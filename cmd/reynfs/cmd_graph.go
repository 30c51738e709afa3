package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
	"github.com/reynfs/reynfs/rewind"
)

// graphLines draws the generations as a tree, newest first (log --graph):
// the current path is the trunk in the first column, its newest
// generation marked @ and every other ○; each branch is drawn indented
// above the generation it forked from, joined to it by ├─╯, and branches
// of branches further in. A generation's parent is the previous
// generation on its own path (LogEntry.Parent), so the drawing needs
// nothing but log --all; bs names the rows that hold a branch's tip.
func graphLines(l *api.LogResult, bs []rewind.Branch) []string {
	bySeq := map[uint64]*api.LogEntry{}
	children := map[uint64][]uint64{}
	for i := range l.Gens {
		g := &l.Gens[i]
		bySeq[g.Seq] = g
	}
	for _, g := range l.Gens {
		if bySeq[g.Parent] != nil {
			children[g.Parent] = append(children[g.Parent], g.Seq)
		}
	}
	names := map[int][]string{}
	for _, b := range bs {
		n := b.Name
		if len(b.Names) > 0 {
			n += " " + strings.Join(b.Names, " ")
		}
		if b.Tip != 0 && b.Gen != 0 {
			if g := bySeq[b.Tip]; g == nil || g.ID != b.Gen {
				n += fmt.Sprintf(" (tip seq %d)", b.Tip)
			}
		}
		names[b.Gen] = append(names[b.Gen], n)
	}
	var newest func(s uint64) uint64 // the newest generation in s's subtree
	newest = func(s uint64) uint64 {
		m := s
		for _, c := range children[s] {
			m = max(m, newest(c))
		}
		return m
	}
	var out []string
	drawn := map[uint64]bool{}
	row := func(depth int, mark string, g *api.LogEntry) {
		label := ""
		if g.Label != "" {
			label = fmt.Sprintf(" %q", g.Label)
		}
		line := fmt.Sprintf("%s%s  g%-4d seq %-8d %-9s %s  +%d ~%d -%d%s", strings.Repeat("│ ", depth), mark, g.ID, g.Seq, g.Kind,
			g.Time.Local().Format(time.DateTime), g.Changed.Added, g.Changed.Modified, g.Changed.Removed, label)
		if ns := names[g.ID]; len(ns) > 0 && !g.Active {
			line += "  [" + strings.Join(ns, ", ") + "]"
		}
		if mark == "@" && l.Head > g.Seq {
			line += fmt.Sprintf("  (head seq %d)", l.Head)
		}
		out = append(out, line)
	}
	var draw func(tip, stop uint64, depth int, current bool)
	draw = func(tip, stop uint64, depth int, current bool) {
		var chain []uint64
		for s := tip; s != stop && bySeq[s] != nil && !drawn[s]; s = bySeq[s].Parent {
			chain = append(chain, s)
			drawn[s] = true
		}
		for i, s := range chain {
			var side []uint64
			for _, c := range children[s] {
				if !drawn[c] {
					side = append(side, c)
				}
			}
			slices.SortFunc(side, func(a, b uint64) int { return cmp.Compare(newest(b), newest(a)) })
			for _, c := range side {
				draw(newest(c), s, depth+1, false)
				out = append(out, strings.Repeat("│ ", depth)+"├─╯")
			}
			mark := "○"
			if current && i == 0 {
				mark = "@"
			}
			row(depth, mark, bySeq[s])
		}
	}
	for _, g := range l.Gens { // newest first: the first active one is the current state's
		if g.Active {
			draw(g.Seq, 0, 0, true)
			break
		}
	}
	for _, g := range l.Gens { // what hangs off nothing drawn (its parent went with a gc)
		if !drawn[g.Seq] {
			draw(newest(g.Seq), 0, 0, false)
		}
	}
	return out
}

// printGraph prints log --graph: the whole tree (log --all) and the
// branches' names.
func printGraph(ctx context.Context, o storeOptions, dir string) error {
	var lr api.LogReply
	if err := call(ctx, o, dir, api.LogParams{All: true}, &lr); err != nil {
		return err
	}
	var br api.BranchListResult
	if err := call(ctx, o, dir, api.BranchListParams{}, &br); err != nil {
		return err
	}
	for _, line := range graphLines(lr.Log, br.Branches) {
		termsafe.Println(line)
	}
	return nil
}
