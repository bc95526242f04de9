package group_test

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// TestExternalCommits (§12.4.3.2): a new client joins by external commit
// from a GroupInfo, both members follow, then it resyncs by an external
// commit that removes its old leaf; every epoch agrees and messages flow.
func TestExternalCommits(t *testing.T) {
	s, ga, gb, _ := pair(t)
	c := newClient(t, s, "carol")
	join := func(resync *treemath.LeafIndex) *group.Group {
		gi, err := ga.GroupInfo(true)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := codec.Marshal(gi)
		var sent message.GroupInfo
		if err := codec.Unmarshal(b, &sent); err != nil {
			t.Fatal(err)
		}
		leaf := c.kp.LeafNode
		gc, msg, err := group.JoinExternal(s, &group.ExternalJoinOptions{GroupInfo: &sent, Leaf: &leaf, SignaturePriv: c.sigPriv, Resync: resync})
		if err != nil {
			t.Fatalf("external join: %v", err)
		}
		for _, g := range []*group.Group{ga, gb} {
			if err := g.HandleCommit(wire(t, msg)); err != nil {
				t.Fatalf("process external commit: %v", err)
			}
		}
		agree(t, "external commit", ga, gb, gc)
		return gc
	}
	gc := join(nil)
	if gc.Leaf() != 2 {
		t.Fatalf("joiner took leaf %d, want the leftmost blank 2", gc.Leaf())
	}
	old := gc.Leaf()
	gc = join(&old)
	if n := len(gc.Tree().Members()); n != 3 {
		t.Fatalf("after resync the group has %d members, want 3", n)
	}
	msg, err := gc.Protect([]byte("back"))
	if err != nil {
		t.Fatal(err)
	}
	if data, _, err := ga.Unprotect(wire(t, msg)); err != nil || string(data) != "back" {
		t.Fatalf("message after resync: %q %v", data, err)
	}
	// Resync of someone else's leaf is refused.
	gi, _ := ga.GroupInfo(true)
	bob := treemath.LeafIndex(1)
	leaf := c.kp.LeafNode
	if _, _, err := group.JoinExternal(s, &group.ExternalJoinOptions{GroupInfo: gi, Leaf: &leaf, SignaturePriv: c.sigPriv, Resync: &bob}); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("resync of bob's leaf: %v", err)
	}
}
