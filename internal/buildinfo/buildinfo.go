// Package buildinfo reports what this binary was built from: the module
// version (a tag when built from a module proxy or with -ldflags), the
// VCS revision and time and whether the tree was modified, and the Go
// version. `hepcache version`, `--version` and hepcache_build_info use it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version and Revision may be set at link time (make build and the
// packages do: -ldflags "-X .../buildinfo.Version=1.2.3 -X
// .../buildinfo.Revision=<commit>"); else the module version and the VCS
// stamp of the build are used.
var Version, Revision = "", ""

// Info describes the build.
type Info struct {
	Version   string // "1.2.3", or "devel" for a plain go build
	Revision  string // VCS commit, "" if unknown
	Time      string // commit time, RFC 3339
	Modified  bool   // built from a tree with uncommitted changes
	GoVersion string
}

// Get returns the build's information.
func Get() Info {
	in := Info{Version: Version, Revision: Revision, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if in.Version == "" {
			in.Version = "devel"
		}
		return in
	}
	if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = strings.TrimPrefix(bi.Main.Version, "v")
	}
	if in.Version == "" {
		in.Version = "devel"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if in.Revision == "" {
				in.Revision = s.Value
			}
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String renders the build in one line: "hepcache 1.2.3 (abc1234def56,
// 2026-11-24T12:00:00Z, modified) go1.26.8".
func (in Info) String() string {
	var b strings.Builder
	b.WriteString("hepcache ")
	b.WriteString(in.Version)
	var parts []string
	if in.Revision != "" {
		parts = append(parts, in.Revision[:min(12, len(in.Revision))])
	}
	if in.Time != "" {
		parts = append(parts, in.Time)
	}
	if in.Modified {
		parts = append(parts, "modified")
	}
	if len(parts) > 0 {
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	b.WriteString(" " + in.GoVersion)
	return b.String()
}
