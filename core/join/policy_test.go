package join_test

import (
	"testing"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

// TestCOMP386_WelcomeWithUnknownPolicyVersion: a Welcome to a group that
// states a role policy version this client does not know is rejected for
// good under COMP-386; one that states version 1 joins, and one that
// also needs a later client is held first (JOIN-057), since an upgrade
// may bring the version.
func TestCOMP386_WelcomeWithUnknownPolicyVersion(t *testing.T) {
	version := func(v uint16) func(metadata.Dictionary) metadata.Dictionary {
		return func(d metadata.Dictionary) metadata.Dictionary {
			return d.Set(metadata.ComponentPolicyVersion, metadata.EncodePolicyVersion(v))
		}
	}
	for _, tc := range []struct {
		name string
		edit func(metadata.Dictionary) metadata.Dictionary
		want string
	}{
		{"version 1", version(1), "joined"},
		{"version 7", version(7), "rejected COMP-386"},
		{"version 7 behind a later minimum version", func(d metadata.Dictionary) metadata.Dictionary {
			return laterVersion(version(7)(d))
		}, "held JOIN-057"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "sqlite")
			a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
			_, seq := a.newGroup(groupSpec{edit: tc.edit}).join(j, addSpec{})
			j.process()
			j.want(seq, tc.want)
		})
	}
}

// TestCOMP387_WelcomeViewerList: a Welcome whose group lists the joiner
// as a viewer joins; one whose viewer list names an inbox that holds no
// leaf or an admin, or that is a DM's, is rejected (JOIN-060): no commit
// after the join could be valid.
func TestCOMP387_WelcomeViewerList(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(c *corpus) uint64
		want string
	}{
		{"the joiner as a viewer", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{edit: viewerList(j.inbox())}).join(j, addSpec{})
			return seq
		}, "joined"},
		{"a viewer that holds no leaf", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{edit: viewerList("nobody")}).join(j, addSpec{})
			return seq
		}, "rejected JOIN-060"},
		{"a super admin as a viewer", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{edit: viewerList(c.a.inbox())}).join(j, addSpec{})
			return seq
		}, "rejected JOIN-060"},
		{"a DM with a viewer list", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{ct: ports.ConversationDM, dmPeer: j.inbox(), edit: viewerList(j.inbox())}).join(j, addSpec{})
			return seq
		}, "rejected JOIN-060"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "sqlite")
			c := &corpus{w: w, a: w.newInst("adder", instOptions{})}
			seq := tc.run(c)
			c.j.process()
			c.j.want(seq, tc.want)
		})
	}
}

func viewerList(inboxes ...string) func(metadata.Dictionary) metadata.Dictionary {
	return func(d metadata.Dictionary) metadata.Dictionary {
		return d.Set(metadata.ComponentViewerList, metadata.EncodeInboxList(inboxes))
	}
}
