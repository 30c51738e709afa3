package api

import (
	"runtime/debug"

	"github.com/reynfs/reynfs/journal"
)

// VersionParams asks which reynfs answers: after an upgrade the daemon of
// a mount made earlier still runs the old binary until it is remounted.
type VersionParams struct{}

func (VersionParams) Method() string { return "version" }
func (VersionParams) readOnly() bool { return true }

// VersionResult is the build of reynfs that answered.
type VersionResult struct {
	Reply
	Build
}

// Build describes one reynfs binary: what a bug report needs.
type Build struct {
	// Version is the module version ("(devel)" for a build from a
	// checkout, whose commit says more).
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"` // vcs.revision of the build
	Dirty   bool   `json:"dirty,omitempty"`  // built with uncommitted changes
	Time    string `json:"commit_time,omitempty"`
	Go      string `json:"go"` // the Go toolchain that built it
	// StoreFormat is the store format version it reads and writes; a
	// store of another is refused (exit 4).
	StoreFormat int    `json:"store_format"`
	Protocol    string `json:"protocol"` // the control API version, major.minor
}

// ThisBuild describes the running binary, from the build information Go
// embeds (module version, VCS revision) and reynfs's own versions.
func ThisBuild() Build {
	b := Build{Version: "(unknown)", StoreFormat: journal.StoreFormat, Protocol: Version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Version, b.Go = bi.Main.Version, bi.GoVersion
	if b.Version == "" {
		b.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Dirty = s.Value == "true"
		case "vcs.time":
			b.Time = s.Value
		}
	}
	return b
}
