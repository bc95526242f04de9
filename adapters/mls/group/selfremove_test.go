package group_test

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// capableClient is newClient with the draft SelfRemove proposal type in
// its leaf's capabilities.
func capableClient(t *testing.T, s *ciphersuite.Suite, name string) *client {
	t.Helper()
	c := newClient(t, s, name)
	c.kp.LeafNode.Capabilities.Proposals = []message.ProposalType{message.ProposalSelfRemove}
	if err := c.kp.LeafNode.Sign(s, c.sigPriv, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.kp.Sign(s, c.sigPriv); err != nil {
		t.Fatal(err)
	}
	return c
}

// capableTrio is a self-remove-capable group of alice, bob and carol.
func capableTrio(t *testing.T) (*ciphersuite.Suite, []*group.Group) {
	t.Helper()
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	a, b, c := capableClient(t, s, "alice"), capableClient(t, s, "bob"), capableClient(t, s, "carol")
	leaf := a.kp.LeafNode
	ga, err := group.Create(s, &group.CreateOptions{GroupID: []byte("sr"), Leaf: &leaf, EncryptionPriv: a.encPriv, SignaturePriv: a.sigPriv})
	if err != nil {
		t.Fatal(err)
	}
	p := commitAll(t, ga, &group.CommitOptions{TreeInWelcome: true, Proposals: []*message.Proposal{
		{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *b.kp}}, {Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *c.kp}}}})
	return s, []*group.Group{ga, b.join(t, s, p.Welcome), c.join(t, s, p.Welcome)}
}

// TestSelfRemove (draft-ietf-mls-extensions, SelfRemove): in a
// self-remove-capable group bob proposes his own removal; alice's next
// commit includes it by reference with a path, carol follows, and bob's
// staging of the commit reports his removal.
func TestSelfRemove(t *testing.T) {
	_, gs := capableTrio(t)
	ga, gb, gc := gs[0], gs[1], gs[2]
	if !ga.SelfRemoveCapable() {
		t.Fatal("group of capable members is not self-remove-capable")
	}
	m, err := gb.ProposeSelfRemove()
	if err != nil {
		t.Fatal(err)
	}
	if m.WireFormat != framing.WirePublicMessage {
		t.Fatalf("SelfRemove sent as wire format %d", m.WireFormat)
	}
	if _, err := gb.ProposeSelfRemove(); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("a second SelfRemove in the epoch: %v", err)
	}
	deliver(t, m, ga, gc)
	p, err := ga.Commit(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Proposals) != 1 || p.Proposals[0].Proposal.Type != message.ProposalSelfRemove || !p.Proposals[0].ByReference {
		t.Fatalf("commit proposals: %+v", p.Proposals)
	}
	if p.Message.Public.Content.Commit.Path == nil {
		t.Fatal("a SelfRemove commit without a path")
	}
	if err := gc.HandleCommit(wire(t, p.Message)); err != nil {
		t.Fatal(err)
	}
	staged, err := gb.StageCommit(wire(t, p.Message))
	if err != nil || !staged.RemovesSelf {
		t.Fatalf("bob stages his removal: %v", err)
	}
	if err := ga.MergePending(p); err != nil {
		t.Fatal(err)
	}
	agree(t, "after SelfRemove", ga, gc)
	if n := len(ga.Members()); n != 2 {
		t.Fatalf("%d members after SelfRemove", n)
	}
}

// TestSelfRemoveRules (draft SelfRemove): the proposal needs a
// self-remove-capable group, travels only as a PublicMessage, enters a
// commit only by reference, and never as the committer's own.
func TestSelfRemoveRules(t *testing.T) {
	_, ga, gb, _ := pair(t) // members without the capability
	if _, err := gb.ProposeSelfRemove(); !errors.Is(err, group.ErrUnsupported) {
		t.Fatalf("SelfRemove in a group that is not capable: %v", err)
	}
	sr := &message.Proposal{Type: message.ProposalSelfRemove, SelfRemove: &message.SelfRemove{}}
	m, err := gb.Propose(sr, framing.WirePublicMessage)
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, m, ga)
	if _, err := ga.Commit(nil); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("commit of a SelfRemove in a group that is not capable: %v", err)
	}

	_, gs := capableTrio(t)
	ga, gb = gs[0], gs[1]
	if _, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{sr}}); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("SelfRemove by value: %v", err)
	}
	priv, err := gb.Propose(sr, framing.WirePrivateMessage)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ga.Process(wire(t, priv)); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("SelfRemove as a PrivateMessage: %v", err)
	}
	// Alice's own SelfRemove stays out of her commit.
	if _, err := ga.ProposeSelfRemove(); err != nil {
		t.Fatal(err)
	}
	p, err := ga.Commit(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Proposals) != 0 {
		t.Fatalf("the committer's own SelfRemove was committed: %+v", p.Proposals)
	}
}

// TestSelfRemoveInExternalCommit (draft SelfRemove): a joiner of a
// self-remove-capable group includes the pending SelfRemove by reference
// in its external commit; the members follow and the proposer reads its
// removal. A pending proposal that is not a verified SelfRemove is
// refused.
func TestSelfRemoveInExternalCommit(t *testing.T) {
	s, gs := capableTrio(t)
	ga, gb, gc := gs[0], gs[1], gs[2]
	m, err := gb.ProposeSelfRemove()
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, m, ga, gc)
	gi, err := ga.GroupInfo(true)
	if err != nil {
		t.Fatal(err)
	}
	d := capableClient(t, s, "dave")
	leaf := d.kp.LeafNode
	// A tampered SelfRemove (its signature broken) is refused.
	bad := wire(t, m)
	bad.Public.Auth.Signature = append([]byte(nil), bad.Public.Auth.Signature...)
	bad.Public.Auth.Signature[0] ^= 1
	if _, _, err := group.JoinExternal(s, &group.ExternalJoinOptions{GroupInfo: gi, Leaf: &leaf, SignaturePriv: d.sigPriv,
		SelfRemoves: []*framing.MLSMessage{bad}}); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("external join with a tampered SelfRemove: %v", err)
	}
	p, err := group.JoinExternalPending(s, &group.ExternalJoinOptions{GroupInfo: gi, Leaf: &leaf, SignaturePriv: d.sigPriv,
		SelfRemoves: []*framing.MLSMessage{wire(t, m)}})
	if err != nil {
		t.Fatalf("external join with bob's SelfRemove: %v", err)
	}
	if n := len(p.Proposals); n != 2 || !p.Proposals[1].ByReference || p.Proposals[1].Proposal.Type != message.ProposalSelfRemove {
		t.Fatalf("external commit proposals: %+v", p.Proposals)
	}
	gd, err := p.Joined()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*group.Group{ga, gc} {
		if err := g.HandleCommit(wire(t, p.Message)); err != nil {
			t.Fatalf("follow the external commit: %v", err)
		}
	}
	staged, err := gb.StageCommit(wire(t, p.Message))
	if err != nil || !staged.RemovesSelf {
		t.Fatalf("bob reads his removal by an external commit: %v", err)
	}
	agree(t, "external commit with a SelfRemove", ga, gc, gd)
	if n := len(ga.Members()); n != 3 {
		t.Fatalf("%d members after dave joined and bob left", n)
	}
}
