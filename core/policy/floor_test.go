package policy_test

import (
	"testing"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/policy"
)

// TestCOMP390_RaiseFloor: a change that lists a new viewer or moves the
// role policy version away from version 1 raises an absent, malformed or
// lower minimum protocol version to policy.ViewerProtocolVersion; a
// floor at or above it, and a change that gives no viewer rules, are left
// as they are.
func TestCOMP390_RaiseFloor(t *testing.T) {
	base := metadata.Dictionary{}.Set(metadata.ComponentPolicyVersion, metadata.EncodePolicyVersion(1))
	viewers := func(d metadata.Dictionary, v ...string) metadata.Dictionary {
		return d.Set(metadata.ComponentViewerList, metadata.EncodeInboxList(v))
	}
	floor := func(d metadata.Dictionary, v string) metadata.Dictionary {
		return d.Set(metadata.ComponentMinProtocol, []byte(v))
	}
	want := policy.ViewerProtocolVersion.String()
	for _, c := range []struct {
		name          string
		before, after metadata.Dictionary
		floor         string // "" when the component must stay as it is
	}{
		{"first viewer, no floor", base, viewers(base, "v"), want},
		{"first viewer, floor 1.6.0", floor(base, "1.6.0"), viewers(floor(base, "1.6.0"), "v"), want},
		{"first viewer, malformed floor", floor(base, "x"), viewers(floor(base, "x"), "v"), want},
		{"another viewer, floor 1.6.0", viewers(floor(base, "1.6.0"), "v"), viewers(floor(base, "1.6.0"), "v", "w"), want},
		{"policy version 2", floor(base, "1.6.0"), floor(base.Set(metadata.ComponentPolicyVersion, metadata.EncodePolicyVersion(2)), "1.6.0"), want},
		{"first viewer, floor already later", floor(base, "2.0.0"), viewers(floor(base, "2.0.0"), "v"), ""},
		{"viewer dropped", viewers(floor(base, "1.6.0"), "v", "w"), viewers(floor(base, "1.6.0"), "v"), ""},
		{"rename", floor(base, "1.6.0"), floor(base, "1.6.0").Set(metadata.ComponentName, []byte("n")), ""},
		{"policy version 1 stated", metadata.Dictionary{}, base, ""},
	} {
		got, raised := policy.RaiseFloor(c.before, c.after)
		if raised != (c.floor != "") {
			t.Fatalf("%s: raised %v", c.name, raised)
		}
		if !raised {
			continue
		}
		v, ok, err := got.MinProtocolVersion()
		if !ok || err != nil || v.String() != c.floor {
			t.Fatalf("%s: floor %v %v %v, want %s", c.name, v, ok, err, c.floor)
		}
	}
}
