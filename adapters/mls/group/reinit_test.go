package group_test

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// joinSuccessor has c join a reinitialized group or branch from w with
// pred as the predecessor.
func joinSuccessor(t *testing.T, s *ciphersuite.Suite, w *message.Welcome, c *client, pred *group.Group) (*group.Group, error) {
	t.Helper()
	m := wire(t, welcomeMessage(w))
	return group.Join(s, m.Welcome, &group.JoinOptions{KeyPackage: c.kp, InitPriv: c.initPr, EncryptionPriv: c.encPriv,
		SignaturePriv: c.sigPriv, Predecessor: pred})
}

// TestReInit (§11.2, §12.1.5): bob commits alice's ReInit to another
// group id and cipher suite; the old group then sends nothing more; bob
// creates the successor, whose first commit injects the reinit
// resumption PSK, and alice joins it from the Welcome.
func TestReInit(t *testing.T) {
	s, ga, gb, _ := pair(t)
	s1, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519AES128GCMSHA256Ed25519)
	ri := &message.ReInit{GroupID: []byte("g2"), Version: message.MLS10, CipherSuite: s1.ID(),
		Extensions: message.Extensions{{Type: message.ExtRequiredCapabilities, Data: []byte{0, 0, 0}}}}
	pm, err := ga.Propose(&message.Proposal{Type: message.ProposalReInit, ReInit: ri}, framing.WirePublicMessage)
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, pm, gb)
	p := commitAll(t, gb, nil, ga)
	if len(p.Proposals) != 1 || p.Proposals[0].Proposal.Type != message.ProposalReInit {
		t.Fatalf("reinit commit proposals: %+v", p.Proposals)
	}
	for _, g := range []*group.Group{ga, gb} {
		if g.ReInit() == nil || string(g.ReInit().GroupID) != "g2" {
			t.Fatal("the ReInit is not recorded")
		}
		if _, err := g.Protect([]byte("x")); !errors.Is(err, group.ErrReInitialized) {
			t.Fatalf("protect after reinit: %v", err)
		}
		if _, err := g.Commit(nil); !errors.Is(err, group.ErrReInitialized) {
			t.Fatalf("commit after reinit: %v", err)
		}
		if _, err := g.Propose(&message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: 1}}, framing.WirePublicMessage); !errors.Is(err, group.ErrReInitialized) {
			t.Fatalf("propose after reinit: %v", err)
		}
	}
	a2, b2 := newClient(t, s1, "alice"), newClient(t, s1, "bob")
	leaf := b2.kp.LeafNode
	n, w, err := gb.Reinitialize(&group.SuccessorOptions{Leaf: &leaf, EncryptionPriv: b2.encPriv, SignaturePriv: b2.sigPriv,
		KeyPackages: []*message.KeyPackage{a2.kp}, TreeInWelcome: true})
	if err != nil {
		t.Fatalf("reinitialize: %v", err)
	}
	gc := n.GroupContext()
	if gc.Epoch != 1 || gc.CipherSuite != s1.ID() || string(gc.GroupID) != "g2" || len(gc.Extensions) != 1 {
		t.Fatalf("successor context: %+v", gc)
	}
	na, err := joinSuccessor(t, s1, w, a2, ga)
	if err != nil {
		t.Fatalf("alice joins the successor: %v", err)
	}
	agree(t, "reinitialized", n, na)
	// Without the old group the reinit PSK is unknown.
	if _, err := joinSuccessor(t, s1, w, a2, nil); !errors.Is(err, group.ErrUnknownPSK) {
		t.Fatalf("join without the predecessor: %v", err)
	}
	// A group that did not end with a ReInit cannot be the predecessor.
	if _, err := joinSuccessor(t, s1, w, a2, fresh(t, s, ga)); err == nil {
		t.Fatal("join with a predecessor that has no ReInit")
	}
}

// fresh reloads g from its stored state: the same group and epoch, without
// the in-memory ReInit (COMP-302).
func fresh(t *testing.T, s *ciphersuite.Suite, g *group.Group) *group.Group {
	t.Helper()
	_ = s
	raw, err := g.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out, err := group.Load(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReInitRules (§12.1.5, §12.2): a ReInit together with another
// proposal, or to a version below the group's, is invalid; a group
// without a ReInit has nothing to reinitialize.
func TestReInitRules(t *testing.T) {
	s, ga, _, _ := pair(t)
	ri := func(v message.ProtocolVersion) *message.Proposal {
		return &message.Proposal{Type: message.ProposalReInit, ReInit: &message.ReInit{GroupID: []byte("n"), Version: v, CipherSuite: s.ID(), Extensions: message.Extensions{}}}
	}
	rm := &message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: 1}}
	if _, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{ri(message.MLS10), rm}}); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("reinit with a remove: %v", err)
	}
	if _, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{ri(0)}}); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("reinit to version 0: %v", err)
	}
	if _, _, err := ga.Reinitialize(&group.SuccessorOptions{}); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("reinitialize without a ReInit: %v", err)
	}
	if _, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{ri(message.MLS10)}}); err != nil {
		t.Fatalf("a lone reinit: %v", err)
	}
}

// TestBranch (§11.3): alice branches a subgroup with bob and carol's new
// key packages; its first commit injects the branch resumption PSK and
// both join it from the Welcome with the old group as predecessor. A
// branch that adds someone outside the old group is refused by joiners.
func TestBranch(t *testing.T) {
	s, ga, gb, _ := pair(t)
	c := newClient(t, s, "carol")
	p := commitAll(t, ga, &group.CommitOptions{TreeInWelcome: true, Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *c.kp}}}}, gb)
	gc := c.join(t, s, p.Welcome)
	a2, b2, c2 := newClient(t, s, "alice"), newClient(t, s, "bob"), newClient(t, s, "carol")
	leaf := a2.kp.LeafNode
	exts := message.Extensions{{Type: message.ExtRequiredCapabilities, Data: []byte{0, 0, 0}}}
	n, w, err := ga.Branch(&group.SuccessorOptions{GroupID: []byte("sub"), Extensions: exts, Leaf: &leaf, EncryptionPriv: a2.encPriv,
		SignaturePriv: a2.sigPriv, KeyPackages: []*message.KeyPackage{b2.kp, c2.kp}, Path: true})
	if err != nil {
		t.Fatalf("branch: %v", err)
	}
	if n.Epoch() != 1 || string(n.GroupContext().GroupID) != "sub" {
		t.Fatalf("branch context: %+v", n.GroupContext())
	}
	if w == nil {
		t.Fatal("no welcome")
	}
	tree := n.Tree().Export()
	nb, err := group.Join(s, wire(t, welcomeMessage(w)).Welcome, &group.JoinOptions{KeyPackage: b2.kp, InitPriv: b2.initPr,
		EncryptionPriv: b2.encPriv, SignaturePriv: b2.sigPriv, Predecessor: gb, Tree: tree})
	if err != nil {
		t.Fatalf("bob joins the branch: %v", err)
	}
	nc, err := group.Join(s, wire(t, welcomeMessage(w)).Welcome, &group.JoinOptions{KeyPackage: c2.kp, InitPriv: c2.initPr,
		EncryptionPriv: c2.encPriv, SignaturePriv: c2.sigPriv, Predecessor: gc, Tree: tree})
	if err != nil {
		t.Fatalf("carol joins the branch: %v", err)
	}
	agree(t, "branch", n, nb, nc)

	// Dave was never a member: bob refuses a branch that adds him.
	a3, b3, d := newClient(t, s, "alice"), newClient(t, s, "bob"), newClient(t, s, "dave")
	_, w, err = ga.Branch(&group.SuccessorOptions{GroupID: []byte("sub2"), Leaf: &a3.kp.LeafNode, EncryptionPriv: a3.encPriv,
		SignaturePriv: a3.sigPriv, KeyPackages: []*message.KeyPackage{b3.kp, d.kp}, TreeInWelcome: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := joinSuccessor(t, s, w, b3, gb); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("branch with a stranger: %v", err)
	}
}
