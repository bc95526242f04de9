// Package buildinfo reports what a regroup binary was built from, for
// `-version` flags and the build-info metric: the module version (a tag
// for `go install …@vX.Y.Z`, "(devel)" for a checkout), the VCS revision
// and whether the tree was modified, and the Go version.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Info is a binary's build information.
type Info struct {
	// Version is the main module's version: a tag, a pseudo-version, or
	// "(devel)" for a build from a checkout.
	Version string
	// Revision is the VCS commit, "unknown" when the build recorded none;
	// Modified reports uncommitted changes in the built tree.
	Revision string
	Modified bool
	// GoVersion is the toolchain's version.
	GoVersion string
}

// Read returns the running binary's build information.
func Read() Info {
	in := Info{Version: "(devel)", Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	if v := bi.Main.Version; v != "" {
		in.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one-line form `regroup --version` prints after the
// program's name.
func (in Info) String() string {
	rev := in.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if in.Modified {
		rev += "+modified"
	}
	return fmt.Sprintf("%s (revision %s, %s)", in.Version, rev, in.GoVersion)
}
