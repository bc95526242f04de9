package main

import (
	"slices"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// honest fails unless every member holds the group active at one epoch
// and epoch authenticator, with the same installations and exactly the
// inboxes want, and none of them holds it forked.
func honest(t *testing.T, id []byte, want []string, ms ...*world.Member) {
	t.Helper()
	world.Agree(t, id, ms...)
	var first []string
	for i, m := range ms {
		mem, err := m.Conv(id).Members(m.W.Ctx)
		if err != nil {
			t.Fatalf("%s: members: %v", m.Name, err)
		}
		var keys, inboxes []string
		for _, x := range mem {
			keys = append(keys, string(x.InstallationKey))
			if !slices.Contains(inboxes, x.InboxID) {
				inboxes = append(inboxes, x.InboxID)
			}
		}
		slices.Sort(inboxes)
		w := slices.Clone(want)
		slices.Sort(w)
		if !slices.Equal(inboxes, w) {
			t.Fatalf("%s holds the inboxes %q, want %q", m.Name, inboxes, w)
		}
		if i == 0 {
			first = keys
		} else if !slices.Equal(keys, first) {
			t.Fatalf("%s holds other installations than %s", m.Name, ms[0].Name)
		}
		if st := m.ForkState(id); st == ports.ForkForked {
			t.Fatalf("%s holds the group forked", m.Name)
		}
	}
}

// eventually reads the member's events until saw holds of those read so
// far, for at most 20 s, and reports whether it did: a report expected
// may take a while to be handed over on a loaded machine.
func eventually(m *world.Member, saw func([]any) bool) bool {
	var out []any
	deadline := time.After(20 * time.Second)
	for !saw(out) {
		select {
		case e := <-m.C.Events():
			out = append(out, e)
		case <-deadline:
			return false
		}
	}
	return true
}

// drain returns the events the member's client reported so far: those
// it hands out before it stays quiet for 200 ms.
func drain(m *world.Member) []any {
	var out []any
	for {
		select {
		case e := <-m.C.Events():
			out = append(out, e)
		case <-time.After(200 * time.Millisecond):
			return out
		}
	}
}
