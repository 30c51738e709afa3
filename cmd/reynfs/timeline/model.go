// Package timeline is `reynfs timeline` (and `reynfs rewind -i`): a
// terminal picker over the workspace's history, in the Elm shape Bubble
// Tea v2 gives (a model, a pure Update, a pure View; the I/O runs in
// commands). It speaks only the daemon's control API, through Source, and
// never opens the store.
//
// A rewind is the moment a person is least patient, so the picker is
// built not to do harm by accident, as Claude Code's /rewind is: it opens
// on "(current)", where Enter does nothing; Enter elsewhere opens a
// confirm screen whose default is "never mind", which says what the
// rewind would change, which runs it would stop, what it cannot take back
// (processes' memory, anything outside the mount, the network) and how to
// resume the agent's conversation. A rewind is append-only and `u` undoes
// it, as lazygit's z does.
package timeline

import (
	"context"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/reynfs/reynfs/agents/api"
)

type mode int

const (
	modeList mode = iota
	modeConfirm
	modeDiff
	modeHelp
)

// The confirm screen's choices; never mind is the default.
const (
	choiceRewind = iota
	choiceRestore
	choiceNever
	nChoices
)

// Model is the picker's state.
type Model struct {
	ctx   context.Context
	src   Source
	now   func() time.Time
	color bool
	keys  keyMap

	width, height int

	head    uint64
	points  []Point
	rows    []row
	loaded  bool
	all     bool
	cursor  int // index in rows; 0 is (current)
	offset  int // first row shown
	filter  textinput.Model
	editing bool // typing in the filter

	sideFocus  bool
	sideCursor int
	changes    map[uint64]*changeSet
	epoch      int // counts the changes made from here: a diff from before one is stale

	mode     mode
	choice   int
	confirm  *confirmInfo
	diffText string
	diffPath string
	diffOff  int

	busy   bool
	status string
	errMsg string
}

// changeSet is the side pane's content for one point.
type changeSet struct {
	list    []Change
	err     error
	loading bool
}

// confirmInfo is what the confirm screen adds to the point's row.
type confirmInfo struct {
	pt      Point
	path    string // the path under the side pane's cursor ("" none)
	runs    []api.RunInfo
	runsErr error
	resume  []string
	loading bool
}

// New builds the picker over src. color false draws without colour
// (NO_COLOR); now is the clock ages are computed from.
func New(ctx context.Context, src Source, color bool, now func() time.Time) Model {
	ti := textinput.New()
	ti.Prompt = "/"
	ti.Placeholder = "filter labels and prompts"
	ti.CharLimit = 200
	// A steady cursor: a blinking one redraws twice a second for nothing.
	st := textinput.DefaultStyles(true)
	st.Cursor.Blink = false
	if !color {
		plain := textinput.StyleState{Placeholder: lipgloss.NewStyle().Faint(true)}
		st.Focused, st.Blurred = plain, plain
	}
	ti.SetStyles(st)
	return Model{ctx: ctx, src: src, color: color, now: now, keys: newKeyMap(), filter: ti,
		changes: map[uint64]*changeSet{}, width: 80, height: 24, choice: choiceNever}
}

// Messages the commands answer with.
type (
	pointsMsg struct {
		all  bool
		head uint64
		pts  []Point
		err  error
	}
	changesMsg struct {
		epoch int
		seq   uint64
		list  []Change
		err   error
	}
	fileDiffMsg struct {
		path, text string
		err        error
	}
	confirmMsg struct {
		seq     uint64
		runs    []api.RunInfo
		runsErr error
		resume  []string
	}
	doneMsg struct {
		msg string
		err error
	}
)

// Init loads the timeline.
func (m Model) Init() tea.Cmd { return m.load() }

func (m Model) load() tea.Cmd {
	src, ctx, all := m.src, m.ctx, m.all
	return func() tea.Msg {
		head, pts, err := src.Points(ctx, all)
		return pointsMsg{all: all, head: head, pts: pts, err: err}
	}
}

// Update is pure: it returns the next model and the I/O to run.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.scroll()
		return m, nil
	case pointsMsg:
		if msg.all != m.all {
			return m, nil // an answer to a toggle taken back since
		}
		if msg.err != nil {
			m.errMsg = msg.err.Error()
			return m, nil
		}
		m.loaded, m.head, m.points = true, msg.head, msg.pts
		m.relayout()
		return m, m.loadChanges()
	case changesMsg:
		if msg.epoch != m.epoch {
			return m, nil // computed against the workspace before a change
		}
		m.changes[msg.seq] = &changeSet{list: msg.list, err: msg.err}
		return m, nil
	case fileDiffMsg:
		if msg.err != nil {
			m.errMsg = msg.err.Error()
			m.mode = modeList
			return m, nil
		}
		m.diffText, m.diffPath, m.diffOff = msg.text, msg.path, 0
		return m, nil
	case confirmMsg:
		if m.confirm != nil && m.confirm.pt.Seq == msg.seq {
			m.confirm.runs, m.confirm.runsErr, m.confirm.resume, m.confirm.loading = msg.runs, msg.runsErr, msg.resume, false
		}
		return m, nil
	case doneMsg:
		m.busy = false
		m.status, m.errMsg = msg.msg, ""
		if msg.err != nil {
			m.status, m.errMsg = "", msg.err.Error()
		}
		// The workspace moved: every diff against it is stale.
		m.changes = map[uint64]*changeSet{}
		m.epoch++
		m.cursor, m.offset, m.sideCursor = 0, 0, 0
		return m, m.load()
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	if m.editing {
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(msg)
		return m, cmd
	}
	return m, nil
}

func (m Model) key(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	if k.String() == "ctrl+c" {
		return m, tea.Quit
	}
	switch m.mode {
	case modeHelp:
		m.mode = modeList // any key closes the help
		return m, nil
	case modeConfirm:
		return m.confirmKey(k)
	case modeDiff:
		return m.diffKey(k)
	}
	if m.editing {
		return m.filterKey(k)
	}
	if m.busy {
		if key.Matches(k, m.keys.Quit) {
			return m, tea.Quit
		}
		return m, nil // one change at a time
	}
	ks := m.keys
	switch {
	case key.Matches(k, ks.Quit):
		if k.String() == "esc" && m.filter.Value() != "" { // Esc first clears a filter
			m.filter.SetValue("")
			m.relayout()
			return m, m.loadChanges()
		}
		return m, tea.Quit
	case key.Matches(k, ks.Help):
		m.mode = modeHelp
	case key.Matches(k, ks.Tab):
		m.sideFocus = !m.sideFocus
	case key.Matches(k, ks.Up):
		return m.move(-1)
	case key.Matches(k, ks.Down):
		return m.move(1)
	case key.Matches(k, ks.PageUp):
		return m.move(-max(1, m.listHeight()-1))
	case key.Matches(k, ks.PageDown):
		return m.move(max(1, m.listHeight()-1))
	case key.Matches(k, ks.Top):
		return m.move(-len(m.rows))
	case key.Matches(k, ks.Bottom):
		return m.move(len(m.rows))
	case key.Matches(k, ks.Filter):
		m.editing = true
		return m, m.filter.Focus()
	case key.Matches(k, ks.All):
		m.all = !m.all
		m.cursor, m.offset = 0, 0
		return m, m.load()
	case key.Matches(k, ks.Undo):
		m.busy, m.status, m.errMsg = true, "undoing the last rewind…", ""
		src, ctx := m.src, m.ctx
		return m, func() tea.Msg { s, err := src.Undo(ctx); return doneMsg{s, err} }
	case key.Matches(k, ks.Diff):
		return m.openDiff()
	case key.Matches(k, ks.Enter):
		return m.openConfirm()
	}
	return m, nil
}

// move moves the cursor of the focused pane by d, clamped.
func (m Model) move(d int) (tea.Model, tea.Cmd) {
	if m.sideFocus {
		if cs := m.currentChanges(); cs != nil {
			m.sideCursor = clamp(m.sideCursor+d, 0, len(cs.list)-1)
		}
		return m, nil
	}
	old := m.cursor
	m.cursor = clamp(m.cursor+d, 0, len(m.rows)-1)
	m.scroll()
	if m.cursor != old {
		m.sideCursor = 0
	}
	return m, m.loadChanges()
}

func (m Model) filterKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "esc":
		m.editing = false
		m.filter.Blur()
		m.filter.SetValue("")
	case "enter":
		m.editing = false
		m.filter.Blur()
	case "up", "down":
		m.editing = false
		m.filter.Blur()
		return m.key(k)
	default:
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(k)
		m.relayout()
		return m, tea.Batch(cmd, m.loadChanges())
	}
	m.relayout()
	return m, m.loadChanges()
}

func (m Model) diffKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	ks := m.keys
	switch {
	case key.Matches(k, ks.Quit), key.Matches(k, ks.Diff), key.Matches(k, ks.Help):
		m.mode = modeList
	case key.Matches(k, ks.Up):
		m.diffOff = max(0, m.diffOff-1)
	case key.Matches(k, ks.Down):
		m.diffOff = clamp(m.diffOff+1, 0, max(0, strings.Count(m.diffText, "\n")-1))
	case key.Matches(k, ks.PageUp):
		m.diffOff = max(0, m.diffOff-m.height+3)
	case key.Matches(k, ks.PageDown):
		m.diffOff = clamp(m.diffOff+m.height-3, 0, max(0, strings.Count(m.diffText, "\n")-1))
	case key.Matches(k, ks.Top):
		m.diffOff = 0
	}
	return m, nil
}

func (m Model) confirmKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "left", "up", "h", "k", "shift+tab":
		m.choice = m.nextChoice(-1)
	case "right", "down", "l", "j", "tab":
		m.choice = m.nextChoice(1)
	case "esc", "q", "n":
		m.mode, m.confirm = modeList, nil
	case "enter":
		c := m.confirm
		choice := m.choice
		m.mode, m.confirm = modeList, nil
		if c == nil || choice == choiceNever {
			return m, nil
		}
		m.busy, m.errMsg = true, ""
		src, ctx, seq := m.src, m.ctx, c.pt.Seq
		if choice == choiceRestore {
			m.status = "restoring " + c.path + "…"
			path := c.path
			return m, func() tea.Msg { s, err := src.Restore(ctx, path, seq); return doneMsg{s, err} }
		}
		m.status = "rewinding…"
		return m, func() tea.Msg { s, err := src.Rewind(ctx, seq); return doneMsg{s, err} }
	}
	return m, nil
}

// nextChoice steps through the choices, skipping "restore only this
// path" when no path is under the side pane's cursor.
func (m Model) nextChoice(d int) int {
	c := m.choice
	for range nChoices {
		c = (c + d + nChoices) % nChoices
		if c != choiceRestore || (m.confirm != nil && m.confirm.path != "") {
			return c
		}
	}
	return m.choice
}

func (m Model) openConfirm() (tea.Model, tea.Cmd) {
	r, ok := m.selected()
	if !ok || r.current {
		return m, nil // Enter on (current) does nothing
	}
	c := &confirmInfo{pt: r.pt, loading: true}
	// Restoring one path is offered for the path under the side pane's
	// cursor once the user went there (Tab), never by default.
	if cs := m.currentChanges(); m.sideFocus && cs != nil && m.sideCursor < len(cs.list) {
		c.path = cs.list[m.sideCursor].Path
	}
	m.mode, m.confirm, m.choice = modeConfirm, c, choiceNever
	src, ctx, seq := m.src, m.ctx, r.pt.Seq
	return m, func() tea.Msg {
		runs, err := src.Runs(ctx)
		return confirmMsg{seq: seq, runs: runs, runsErr: err, resume: src.Resume(ctx, seq)}
	}
}

func (m Model) openDiff() (tea.Model, tea.Cmd) {
	r, ok := m.selected()
	cs := m.currentChanges()
	if !ok || r.current || cs == nil || m.sideCursor >= len(cs.list) || cs.list[m.sideCursor].Dir {
		return m, nil
	}
	path := cs.list[m.sideCursor].Path
	m.mode, m.diffText, m.diffPath, m.diffOff = modeDiff, "", path, 0
	src, ctx, seq := m.src, m.ctx, r.pt.Seq
	return m, func() tea.Msg {
		text, err := src.FileDiff(ctx, seq, path)
		return fileDiffMsg{path: path, text: text, err: err}
	}
}

// loadChanges fetches the side pane of the selected point, once.
func (m Model) loadChanges() tea.Cmd {
	r, ok := m.selected()
	if !ok || r.current {
		return nil
	}
	seq := r.pt.Seq
	if _, ok := m.changes[seq]; ok {
		return nil
	}
	m.changes[seq] = &changeSet{loading: true}
	src, ctx, epoch := m.src, m.ctx, m.epoch
	return func() tea.Msg {
		list, err := src.Changes(ctx, seq)
		return changesMsg{epoch: epoch, seq: seq, list: list, err: err}
	}
}

func (m Model) selected() (row, bool) {
	if m.cursor < 0 || m.cursor >= len(m.rows) {
		return row{}, false
	}
	return m.rows[m.cursor], true
}

func (m Model) currentChanges() *changeSet {
	r, ok := m.selected()
	if !ok || r.current {
		return nil
	}
	return m.changes[r.pt.Seq]
}

// relayout rebuilds the rows, keeping the cursor on the same point when
// it is still shown, else on (current).
func (m *Model) relayout() {
	var keep uint64
	if r, ok := m.selected(); ok && !r.current {
		keep = r.pt.Seq
	}
	m.rows = buildRows(m.points, m.filter.Value())
	m.cursor = 0
	for i, r := range m.rows {
		if !r.current && r.pt.Seq == keep {
			m.cursor = i
		}
	}
	m.scroll()
}

// scroll keeps the cursor's row on screen.
func (m *Model) scroll() {
	h := max(1, m.listHeight())
	if m.cursor < m.offset {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+h {
		m.offset = m.cursor - h + 1
	}
	m.offset = clamp(m.offset, 0, max(0, len(m.rows)-h))
}

func clamp(v, lo, hi int) int {
	if hi < lo {
		return lo
	}
	return min(max(v, lo), hi)
}
