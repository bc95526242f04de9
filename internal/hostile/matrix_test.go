package hostile_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/regroup-mls/regroup/ports/transportfault"
)

// skipped names the faults a scenario cannot yet hold its invariants
// under, with the reason, keyed by fault and scenario name. Every
// scenario holds under every fault.
var skipped = map[transportfault.Fault]map[string]string{}

// TestFaults runs every scenario under each fault alone (under the race
// detector, one scenario per fault unless REGROUP_HOSTILE_MIXES is set), at a rate of
// 0.3 per call it applies to, and checks the scenario's invariant (see
// scenarios). A run is reproduced with
// go test ./internal/hostile -run 'TestFaults/<fault>/<scenario>'.
func TestFaults(t *testing.T) {
	for i, f := range transportfault.All {
		t.Run(f.String(), func(t *testing.T) {
			for j, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					if raceBuild && os.Getenv("REGROUP_HOSTILE_MIXES") == "" && j != i%len(scenarios) {
						t.Skip("under the race detector the ordinary run covers each fault with one scenario; make hostile runs them all")
					}
					t.Parallel()
					if why, ok := skipped[f][sc.name]; ok {
						t.Skip(why)
					}
					t.Log("invariant: " + sc.invariant)
					n := newNet(t, "embedded", transportfault.Options{Seed: uint64(f), Faults: []transportfault.Fault{f}})
					sc.run(n)
					t.Logf("%v fired %d times", f, n.op.Fired(f))
				})
			}
		})
	}
}

// mixes is how many seeded random mixes TestMixes runs: 24 in the
// ordinary test run (6 under the race detector), REGROUP_HOSTILE_MIXES when set (make hostile and CI
// set 200).
func mixes() int {
	if v, err := strconv.Atoi(os.Getenv("REGROUP_HOSTILE_MIXES")); err == nil && v > 0 {
		return v
	}
	if raceBuild {
		return 6
	}
	return 24
}

// TestMixes runs the seeded random mixes (200 under make hostile): seed s arms three faults drawn
// by s, each firing at a call it applies to with probability 0.15, and
// runs scenario s mod 6 under them, checking its invariant. A
// mix is reproduced with go test ./internal/hostile -run 'TestMixes/seed=<s>$'.
func TestMixes(t *testing.T) {
	for s := 1; s <= mixes(); s++ {
		seed := uint64(s)
		faults := transportfault.Mix(seed, 3)
		sc := scenarios[s%len(scenarios)]
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			t.Parallel()
			if why := mixSkipped(sc.name, faults); why != "" {
				t.Skip(why)
			}
			t.Logf("%s under %v; invariant: %s", sc.name, faults, sc.invariant)
			sc.run(newNet(t, "embedded", transportfault.Options{Seed: seed, Faults: faults, Rate: 0.15}))
		})
	}
}

// mixSkipped names a combination of faults a scenario does not yet hold
// its invariant under, with the reason.
func mixSkipped(scenario string, faults []transportfault.Fault) string {
	for _, f := range faults {
		if why, ok := skipped[f][scenario]; ok {
			return why
		}
	}
	return ""
}
