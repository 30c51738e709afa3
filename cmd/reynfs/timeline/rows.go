package timeline

import (
	"sort"
	"strings"
	"unicode"
)

// row is one line of the list: the (current) row, or a point with its
// indentation in the graph column.
type row struct {
	current bool
	pt      Point
	depth   int // 0: on the current path; 1+: an abandoned branch, nested
}

// buildRows lays out the graph: "(current)" first, then the points of the
// current path newest first, each followed by the abandoned branches that
// forked from it, indented under it (newest first within a branch). A
// point's branch and fork come from its Parent links: an abandoned point
// hangs under the first point on the current path among its ancestors.
// filter keeps the points whose label, kind, agent or branch names match it fuzzily
// (the (current) row always stays, so Enter there is still a no-op).
func buildRows(pts []Point, filter string) []row {
	bySeq := make(map[uint64]*Point, len(pts))
	for i := range pts {
		bySeq[pts[i].Seq] = &pts[i]
	}
	// depth of an abandoned point: 1 under its fork, one more for each
	// branch that forked off an abandoned branch on the way.
	first := map[uint64]uint64{} // parent seq -> its oldest child: the one continuing its segment
	for _, p := range pts {
		if f, ok := first[p.Parent]; !ok || p.Seq < f {
			first[p.Parent] = p.Seq
		}
	}
	anchor := map[uint64]uint64{} // abandoned seq -> seq of its fork on the current path (0: none shown)
	depth := map[uint64]int{}
	var walk func(p *Point) (uint64, int)
	walk = func(p *Point) (uint64, int) {
		if p.Active {
			return p.Seq, 0
		}
		if a, ok := anchor[p.Seq]; ok {
			return a, depth[p.Seq]
		}
		par, ok := bySeq[p.Parent]
		a, d := uint64(0), 1
		if ok {
			a, d = walk(par)
			if d == 0 {
				d = 1
			} else if first[par.Seq] != p.Seq {
				d++ // a later fork off an abandoned branch
			}
		}
		anchor[p.Seq], depth[p.Seq] = a, d
		return a, d
	}
	under := map[uint64][]row{}
	for i := range pts {
		if !pts[i].Active {
			a, d := walk(&pts[i])
			under[a] = append(under[a], row{pt: pts[i], depth: d})
		}
	}
	for _, rs := range under {
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].pt.Seq > rs[j].pt.Seq })
	}
	rows := []row{{current: true}}
	add := func(r row) {
		if filter == "" || fuzzy(filter, r.pt.Label+" "+r.pt.Kind+" "+r.pt.Agent+" "+strings.Join(r.pt.Branches, " ")) {
			rows = append(rows, r)
		}
	}
	for _, p := range pts {
		if !p.Active {
			continue
		}
		add(row{pt: p})
		for _, r := range under[p.Seq] {
			add(r)
		}
	}
	for _, r := range under[0] { // abandoned before any point of the current path
		add(r)
	}
	return rows
}

// fuzzy reports whether the runes of pattern occur in s in order, case
// folded, as fzf and the bubbles list filter match; spaces in the
// pattern separate words that must each match.
func fuzzy(pattern, s string) bool {
	s = strings.ToLower(s)
	for _, w := range strings.Fields(strings.ToLower(pattern)) {
		rest := s
		for _, r := range w {
			i := strings.IndexFunc(rest, func(c rune) bool { return unicode.ToLower(c) == r })
			if i < 0 {
				return false
			}
			_, n := firstRune(rest[i:])
			rest = rest[i+n:]
		}
	}
	return true
}

func firstRune(s string) (rune, int) {
	for i, r := range s {
		if i == 0 {
			return r, len(string(r))
		}
	}
	return 0, 0
}
