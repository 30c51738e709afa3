package api

// MountInfo is what 'reynfs mount --json' and 'reynfs unmount --json'
// print (no method returns it: mounting starts the daemon that serves the
// API): where the workspace is mounted, or was.
type MountInfo struct {
	Mounted    bool   `json:"mounted"`
	Dir        string `json:"dir"`        // the project directory
	Mountpoint string `json:"mountpoint"` // DIR itself unless mounted --at elsewhere
	Store      string `json:"store"`
	// Cleaned: unmount found the daemon dead and detached its stale
	// mount; it says how.
	Cleaned string `json:"cleaned,omitempty"`
	// Head is where the store stood when the daemon unmounted.
	Head *Head `json:"head,omitempty"`
}

// ExportInfo is what 'reynfs export --json' prints: the export method's
// result and the directory written.
type ExportInfo struct {
	SeqResult
	Dir string `json:"dir"`
}

// IntegrateInfo is what 'reynfs integrate TOOL --json' prints: the files
// of the tool's project config it looked at and what it did to each, so a
// setup script can tell a first integration from a repeated one.
type IntegrateInfo struct {
	Tool    string          `json:"tool"`
	Removed bool            `json:"removed,omitempty"` // --remove
	Files   []IntegrateFile `json:"files"`
}

// IntegrateFile is one config or hook file and what integrate did to it:
// created, updated, removed or unchanged.
type IntegrateFile struct {
	Path   string `json:"path"`
	Change string `json:"change"`
}
