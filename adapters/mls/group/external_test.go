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

// TestPublicView: a view without secrets started from a GroupInfo follows
// PublicMessage commits (adds, paths, removals, external joins) to the same
// group context as the members, and refuses everything that needs secrets.
func TestPublicView(t *testing.T) {
	s, ga, gb, _ := pair(t)
	gi, err := ga.GroupInfo(true)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := group.NewPublic(s, gi, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s, "carol")
	steps := []*group.CommitOptions{
		{Path: true},
		{Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *c.kp}}}},
		{Proposals: []*message.Proposal{{Type: message.ProposalRemove, Remove: &message.Remove{Removed: 2}}}},
	}
	for i, o := range steps {
		p, err := ga.Commit(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []*group.Group{gb, ds} {
			if err := g.HandleCommit(wire(t, p.Message)); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		_ = ga.MergePending(p)
		a, d := ga.GroupContext(), ds.GroupContext()
		ab, _ := codec.Marshal(&a)
		db, _ := codec.Marshal(&d)
		if string(ab) != string(db) {
			t.Fatalf("step %d: the public view's group context differs", i)
		}
	}
	if ds.EpochAuthenticator() != nil || !ds.Public() {
		t.Fatal("a public view has an epoch authenticator")
	}
	if _, err := ds.Protect([]byte("x")); !errors.Is(err, group.ErrUnsupported) {
		t.Fatalf("protect on a public view: %v", err)
	}
	msg, _ := ga.Protect([]byte("secret"))
	if _, _, err := ds.Unprotect(wire(t, msg)); !errors.Is(err, group.ErrUndecryptable) {
		t.Fatalf("unprotect on a public view: %v", err)
	}
}
