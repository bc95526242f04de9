package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

// A test binary has build information: a version (at least "(devel)")
// and this toolchain's Go version, both in the one-line form.
func TestRead(t *testing.T) {
	in := Read()
	if in.Version == "" || in.GoVersion != runtime.Version() || in.Revision == "" {
		t.Fatalf("%+v", in)
	}
	s := Info{Version: "v0.1.0", Revision: "0123456789abcdef", Modified: true, GoVersion: "go1.26"}.String()
	if s != "v0.1.0 (revision 0123456789ab+modified, go1.26)" || !strings.Contains(in.String(), in.GoVersion) {
		t.Fatalf("%q", s)
	}
}
