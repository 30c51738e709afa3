package timeline

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
)

// The smallest terminal the picker draws in; below it, one line says so.
const (
	minWidth  = 24
	minHeight = 5
	// splitWidth is the narrowest terminal with both panes side by side;
	// narrower, Tab switches which one fills the screen.
	splitWidth = 72
)

// notReverted is what a rewind cannot take back (DESIGN "What rewind
// covers and what it does not"); 'reynfs rewind' prints the same.
const notReverted = "not reverted: running processes and their memory, network requests, files outside the mount"

type styles struct {
	title, dim, sel, err, added, modified, removed, button, buttonSel lipgloss.Style
}

func (m Model) styles() styles {
	s := styles{
		title:     lipgloss.NewStyle().Bold(true),
		dim:       lipgloss.NewStyle().Faint(true),
		sel:       lipgloss.NewStyle().Reverse(true),
		err:       lipgloss.NewStyle().Bold(true),
		button:    lipgloss.NewStyle(),
		buttonSel: lipgloss.NewStyle().Reverse(true).Bold(true),
	}
	s.added, s.modified, s.removed = lipgloss.NewStyle(), lipgloss.NewStyle(), lipgloss.NewStyle()
	if m.color {
		s.sel = lipgloss.NewStyle().Background(lipgloss.Color("24")).Foreground(lipgloss.Color("15"))
		s.err = s.err.Foreground(lipgloss.Color("9"))
		s.added = s.added.Foreground(lipgloss.Color("2"))
		s.modified = s.modified.Foreground(lipgloss.Color("3"))
		s.removed = s.removed.Foreground(lipgloss.Color("1"))
		s.buttonSel = s.buttonSel.Foreground(lipgloss.Color("12"))
	}
	return s
}

// View draws the model in the alternate screen.
func (m Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.WindowTitle = "reynfs timeline"
	return v
}

// render is the screen as text, at most width×height cells.
func (m Model) render() string {
	if m.width < minWidth || m.height < minHeight {
		return fit("reynfs timeline: terminal too small", m.width)
	}
	var body string
	switch m.mode {
	case modeHelp:
		body = m.helpView()
	case modeConfirm:
		body = m.confirmView()
	case modeDiff:
		body = m.diffView()
	default:
		body = m.mainView()
	}
	lines := strings.Split(body, "\n")
	if len(lines) > m.height {
		lines = lines[:m.height]
	}
	for i, l := range lines {
		lines[i] = fit(l, m.width)
	}
	return strings.Join(lines, "\n")
}

// listHeight is how many rows of the list fit: the screen less the
// header and the two footer lines (one on a short terminal).
func (m Model) listHeight() int {
	if m.height < 8 {
		return m.height - 2
	}
	return m.height - 3
}

func (m Model) mainView() string {
	st := m.styles()
	scope := "current path"
	if m.all {
		scope = "all branches"
	}
	header := st.title.Render("reynfs timeline") + st.dim.Render(fmt.Sprintf(" · head seq %d · %s", m.head, scope))
	h := m.listHeight()
	var left, right []string
	var lw, rw int
	switch {
	case m.width >= splitWidth:
		lw = m.width * 3 / 5
		rw = m.width - lw - 3
		left, right = m.listLines(lw, h), m.sideLines(rw, h)
	case m.sideFocus:
		rw = m.width
		right = m.sideLines(rw, h)
	default:
		lw = m.width
		left = m.listLines(lw, h)
	}
	out := []string{header}
	for i := range h {
		var l, r string
		if i < len(left) {
			l = left[i]
		}
		if i < len(right) {
			r = right[i]
		}
		switch {
		case left != nil && right != nil:
			out = append(out, pad(l, lw)+st.dim.Render(" │ ")+r)
		case left != nil:
			out = append(out, l)
		default:
			out = append(out, r)
		}
	}
	out = append(out, m.statusLine(st))
	if m.height >= 8 {
		hm := m.help()
		out = append(out, hm.ShortHelpView(m.keys.ShortHelp()))
	}
	return strings.Join(out, "\n")
}

// statusLine is the filter being typed, else what the last action said,
// after the filter in use, if any.
func (m Model) statusLine(st styles) string {
	if m.editing {
		return m.filter.View()
	}
	var msg string
	switch {
	case m.errMsg != "":
		msg = st.err.Render("error: " + termsafe.Text(m.errMsg))
	case m.status != "":
		msg = termsafe.Text(m.status)
	case !m.loaded:
		msg = st.dim.Render("loading the timeline…")
	}
	f := m.filter.Value()
	switch {
	case f == "":
		return msg
	case msg == "":
		return st.title.Render("/"+f) + st.dim.Render(" (esc clears)")
	}
	return st.title.Render("/"+f) + st.dim.Render(" · ") + msg
}

func (m Model) listLines(w, h int) []string {
	st := m.styles()
	var out []string
	for i := m.offset; i < len(m.rows) && len(out) < h; i++ {
		line := fit(m.rowText(m.rows[i], w), w)
		switch {
		case i == m.cursor && !m.sideFocus:
			line = st.sel.Render(pad(line, w))
		case i == m.cursor:
			line = st.title.Render("▸") + ansi.Cut(line, 1, w)
		case !m.rows[i].current && !m.rows[i].pt.Active:
			line = st.dim.Render(line)
		}
		out = append(out, line)
	}
	if m.loaded && len(m.rows) == 1 && m.filter.Value() != "" && len(out) < h {
		out = append(out, st.dim.Render(fit("  no point matches the filter", w)))
	}
	return out
}

// graphWidth is the width of the graph column: the deepest branch's.
func (m Model) graphWidth() int {
	w := 1
	for _, r := range m.rows {
		if r.depth > 0 {
			w = max(w, 2*r.depth)
		}
	}
	return w
}

// rowText is one row: graph, id, kind, age, label, counts, agent.
func (m Model) rowText(r row, w int) string {
	if r.current {
		return fmt.Sprintf("%s  %-5s (current)  seq %d", pad("@", m.graphWidth()), "", m.head)
	}
	p := r.pt
	graph := "○"
	if r.depth > 0 { // an abandoned branch, hanging under its fork
		graph = strings.Repeat("  ", r.depth-1) + "╰○"
	}
	graph = pad(graph, m.graphWidth())
	counts := fmt.Sprintf("+%d ~%d -%d", p.Added, p.Modified, p.Removed)
	fixed := fmt.Sprintf("%s  %-5s %-9s %4s ", graph, fmt.Sprintf("g%d", p.ID), p.Kind, age(m.now(), p.Time))
	tail := "  " + counts
	if p.Agent != "" {
		tail += "  " + termsafe.Text(p.Agent)
	}
	label := termsafe.Text(p.Label)
	if len(p.Branches) > 0 { // an abandoned branch's tip: what checkout takes
		label = termsafe.Text("["+strings.Join(p.Branches, " ")+"] ") + label
	}
	if label == "" {
		label = "-"
	}
	room := w - ansi.StringWidth(fixed) - ansi.StringWidth(tail)
	if room < 8 { // narrow: the label matters more than the counts
		return fixed + label
	}
	return fixed + pad(fit(label, room), room) + tail
}

func (m Model) sideLines(w, h int) []string {
	st := m.styles()
	r, ok := m.selected()
	if !ok || r.current {
		return []string{fit("(current) is where the workspace is now:", w), fit("a rewind here changes nothing.", w)}
	}
	cs := m.changes[r.pt.Seq]
	title := fmt.Sprintf("rewinding to g%d (seq %d) would:", r.pt.ID, r.pt.Seq)
	out := []string{st.title.Render(fit(title, w))}
	switch {
	case cs == nil || cs.loading:
		return append(out, st.dim.Render("comparing with now…"))
	case cs.err != nil:
		return append(out, st.err.Render(fit("error: "+termsafe.Text(cs.err.Error()), w)))
	case len(cs.list) == 0:
		return append(out, "change nothing (the same tree as now)")
	}
	first := 0
	if h > 2 && m.sideCursor >= h-1 {
		first = m.sideCursor - (h - 2)
	}
	for i := first; i < len(cs.list) && len(out) < h; i++ {
		c := cs.list[i]
		letter, s := "M", st.modified
		switch c.Kind {
		case "added":
			letter, s = "A", st.added
		case "removed":
			letter, s = "D", st.removed
		}
		name := termsafe.Text(c.Path)
		if c.Dir {
			name += "/"
		}
		line := s.Render(letter) + " " + fit(name, w-2)
		if i == m.sideCursor && m.sideFocus {
			line = st.sel.Render(pad(letter+" "+fit(name, w-2), w))
		}
		out = append(out, line)
	}
	return out
}

func (m Model) confirmView() string {
	st := m.styles()
	c := m.confirm
	p := c.pt
	label := p.Label // shown with %q, which escapes control characters
	if label == "" {
		label = "(no label)"
	}
	out := []string{
		st.title.Render(fmt.Sprintf("Rewind the whole workspace to g%d (seq %d)?", p.ID, p.Seq)),
		"",
		fmt.Sprintf("  %s · %s ago · %q", p.Kind, age(m.now(), p.Time), label),
	}
	if cs := m.changes[p.Seq]; cs != nil && !cs.loading && cs.err == nil {
		var a, mo, d int
		for _, ch := range cs.list {
			switch ch.Kind {
			case "added":
				a++
			case "removed":
				d++
			default:
				mo++
			}
		}
		out = append(out, fmt.Sprintf("  it would change %s: %d added back, %d changed, %d removed", plural(len(cs.list), "path"), a, mo, d))
	} else {
		out = append(out, st.dim.Render("  counting what it would change…"))
	}
	switch {
	case c.loading:
		out = append(out, st.dim.Render("  looking for runs it would stop…"))
	case c.runsErr != nil:
		out = append(out, st.err.Render("  runs: "+termsafe.Text(c.runsErr.Error())))
	case len(c.runs) == 0:
		out = append(out, "  no run of 'reynfs run' is going: none to stop")
	default:
		for _, r := range c.runs {
			what := "cancel (kill)"
			switch r.OnRewind {
			case "freeze":
				what = "freeze, then thaw after the swap"
			case "keep":
				what = "leave running (--on-rewind keep)"
			}
			who := ""
			if r.Agent != "" {
				who = ", agent " + termsafe.Text(r.Agent)
			}
			out = append(out, fmt.Sprintf("  would %s run %s (pid %d%s)", what, termsafe.Text(r.ID), r.Pid, who))
		}
	}
	out = append(out, "  "+notReverted)
	for _, r := range c.resume {
		out = append(out, "  "+termsafe.Text(r))
	}
	out = append(out, st.dim.Render("  nothing is deleted: the present stays as a branch ('a'), and u undoes the rewind"), "")
	names := [nChoices]string{"rewind", "restore only this path", "never mind"}
	if c.path != "" {
		names[choiceRestore] = "restore only " + termsafe.Text(c.path)
	}
	var buttons []string
	for i, n := range names {
		if i == choiceRestore && c.path == "" {
			continue
		}
		s := st.button
		if i == m.choice {
			s = st.buttonSel
		}
		buttons = append(buttons, s.Render("[ "+n+" ]"))
	}
	out = append(out, "  "+strings.Join(buttons, "  "), "", st.dim.Render("  ←/→ choose · enter confirm · esc never mind"))
	return strings.Join(out, "\n")
}

func (m Model) diffView() string {
	st := m.styles()
	r, _ := m.selected()
	out := []string{st.title.Render(fmt.Sprintf("%s: what rewinding to g%d would change", termsafe.Text(m.diffPath), r.pt.ID))}
	if m.diffText == "" {
		out = append(out, st.dim.Render("loading the diff… (empty: no text change)"))
	}
	lines := strings.Split(strings.TrimSuffix(m.diffText, "\n"), "\n")
	for i := m.diffOff; i < len(lines) && len(out) < m.height-1; i++ {
		// The diff shows file contents: an ESC in them must not drive
		// the terminal under the TUI's frame.
		l := termsafe.Text(strings.ReplaceAll(lines[i], "\t", "    "))
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			l = st.title.Render(fit(l, m.width))
		case strings.HasPrefix(l, "+"):
			l = st.added.Render(fit(l, m.width))
		case strings.HasPrefix(l, "-"):
			l = st.removed.Render(fit(l, m.width))
		}
		out = append(out, l)
	}
	for len(out) < m.height-1 {
		out = append(out, "")
	}
	return strings.Join(append(out, st.dim.Render("↑/↓ scroll · d or esc back")), "\n")
}

func (m Model) helpView() string {
	st := m.styles()
	hm := m.help()
	return strings.Join([]string{
		st.title.Render("reynfs timeline: pick a point to rewind the workspace to"),
		"",
		"Newest first. @ is (current), where the workspace is now; ○ are generations;",
		"indented rows are abandoned branches (with a), under the point they forked from.",
		"The right pane lists what a rewind to the highlighted point would change now:",
		"A added back, M changed, D removed. Enter asks before anything changes.",
		"Nothing is deleted: u rewinds to just before the last rewind, and u again undoes that.",
		"",
		hm.FullHelpView(m.keys.FullHelp()),
		"",
		st.dim.Render("any key closes this help"),
	}, "\n")
}

// help is bubbles' key help, uncoloured under NO_COLOR.
func (m Model) help() help.Model {
	hm := help.New()
	hm.SetWidth(m.width)
	if !m.color {
		key, desc := lipgloss.NewStyle().Bold(true), lipgloss.NewStyle()
		sep := lipgloss.NewStyle().Faint(true)
		hm.Styles = help.Styles{ShortKey: key, ShortDesc: desc, ShortSeparator: sep, Ellipsis: sep,
			FullKey: key, FullDesc: desc, FullSeparator: sep}
	}
	return hm
}

// age is how long ago t was, in one unit.
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case t.IsZero():
		return "?"
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// fit cuts s to w cells, with an ellipsis when it is cut.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	return ansi.Truncate(s, w, "…")
}

// pad fills s with spaces to w cells.
func pad(s string, w int) string {
	if n := ansi.StringWidth(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}
