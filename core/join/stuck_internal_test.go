package join

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// TestCOMP453_StuckReplacementRule: a stuck installation's held state
// (ReceiverOptions.ReplaceStuck true) yields to a Welcome of a later
// epoch at or past the stored cursor, without waiting for the cursor to
// reach the anchor (JOIN-092); a Welcome of the held epoch or earlier is
// still refused by JOIN-042, one below the cursor by JOIN-043, and
// without the stuck answer an active state still holds or refuses.
func TestCOMP453_StuckReplacementRule(t *testing.T) {
	held := func(stuck bool) heldGroup {
		return heldGroup{g: &ports.Group{Cursor: 10}, view: &ports.GroupView{Active: true, Epoch: 5}, stuck: stuck}
	}
	rule := func(err error) string {
		var r *Rejection
		var h *Hold
		switch {
		case errors.As(err, &r):
			return "reject " + r.Rule
		case errors.As(err, &h):
			return "hold " + h.Rule
		case err != nil:
			return err.Error()
		}
		return ""
	}
	for _, c := range []struct {
		name          string
		stuck         bool
		epoch, anchor uint64
		replace       bool
		want          string
	}{
		{"later epoch past the cursor", true, 6, 12, true, ""},
		{"later epoch at the cursor", true, 6, 10, true, ""},
		{"the held epoch", true, 5, 12, false, "reject JOIN-042"},
		{"below the cursor", true, 6, 9, false, "reject JOIN-043"},
		{"not stuck, past the cursor", false, 6, 12, false, "hold JOIN-092"},
		{"not stuck, at the cursor", false, 6, 10, false, "reject JOIN-042"},
	} {
		replace, err := decideReplace(held(c.stuck), c.epoch, nil, c.anchor)
		if replace != c.replace || rule(err) != c.want {
			t.Errorf("%s: replace %v, %q; want %v, %q", c.name, replace, rule(err), c.replace, c.want)
		}
	}
}
