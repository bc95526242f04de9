package join_test

import (
	"testing"

	"github.com/regroup-mls/regroup/core/join"
)

// JOIN-066: a failure below the join anchor, or at it (the commit that
// added this installation), is never reported as missed; one after it
// is. Checked at the boundary and against an independent list.
func TestJOIN066_MissedExcludesPreAnchorMessages(t *testing.T) {
	cases := []struct {
		anchor, seq uint64
		want        bool
	}{
		{100, 1, false},
		{100, 99, false},
		{100, 100, false}, // the adding commit
		{100, 101, true},
		{0, 1, true}, // a group this installation created
	}
	for _, c := range cases {
		if got := join.Reportable(c.anchor, c.seq); got != c.want {
			t.Errorf("Reportable(anchor %d, seq %d) = %v, want %v", c.anchor, c.seq, got, c.want)
		}
	}
	m := join.Missed{Anchor: 50}
	for _, seq := range []uint64{10, 49, 50, 51, 80} {
		m.Add(seq)
	}
	if m.Count != 2 || m.Excluded != 3 {
		t.Fatalf("missed %d, excluded %d; want 2 and 3", m.Count, m.Excluded)
	}
}
