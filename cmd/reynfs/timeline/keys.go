package timeline

import "charm.land/bubbles/v2/key"

// keyMap is the picker's keys; bubbles' help renders it for ?.
type keyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Enter, Tab, Diff, Filter, All, Undo     key.Binding
	Help, Quit                              key.Binding
}

func newKeyMap() keyMap {
	b := func(keys []string, k, help string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, help))
	}
	return keyMap{
		Up:       b([]string{"up", "k"}, "↑/k", "up"),
		Down:     b([]string{"down", "j"}, "↓/j", "down"),
		PageUp:   b([]string{"pgup", "ctrl+b"}, "pgup", "page up"),
		PageDown: b([]string{"pgdown", "ctrl+f", "space"}, "pgdn", "page down"),
		Top:      b([]string{"g", "home"}, "g", "newest"),
		Bottom:   b([]string{"G", "end"}, "G", "oldest"),
		Enter:    b([]string{"enter"}, "enter", "rewind here… (asks first)"),
		Tab:      b([]string{"tab"}, "tab", "switch pane"),
		Diff:     b([]string{"d"}, "d", "diff of the file"),
		Filter:   b([]string{"/"}, "/", "filter"),
		All:      b([]string{"a"}, "a", "all branches"),
		Undo:     b([]string{"u"}, "u", "undo last rewind"),
		Help:     b([]string{"?"}, "?", "help"),
		Quit:     b([]string{"q", "esc"}, "q", "quit"),
	}
}

// ShortHelp is the footer line.
func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Enter, k.Tab, k.Diff, k.Filter, k.All, k.Undo, k.Help, k.Quit}
}

// FullHelp is the ? screen.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom},
		{k.Enter, k.Tab, k.Diff, k.Filter},
		{k.All, k.Undo, k.Help, k.Quit},
	}
}
