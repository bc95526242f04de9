package group_test

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// externalSender is a signer outside the group.
type externalSender struct {
	priv, pub []byte
}

func newExternalSender(t testing.TB, s *ciphersuite.Suite) externalSender {
	t.Helper()
	priv, pub, err := s.GenerateSignatureKey()
	if err != nil {
		t.Fatal(err)
	}
	return externalSender{priv: priv, pub: pub}
}

// withExternalSenders has alice commit a GroupContextExtensions proposal
// installing senders as external_senders; bob follows.
func withExternalSenders(t *testing.T, ga, gb *group.Group, senders ...externalSender) {
	t.Helper()
	var es message.ExternalSenders
	for i, s := range senders {
		es = append(es, message.ExternalSender{SignatureKey: s.pub,
			Credential: message.Credential{Type: message.CredentialBasic, Identity: []byte{'d', 's', byte('0' + i)}}})
	}
	data, err := codec.Marshal(es)
	if err != nil {
		t.Fatal(err)
	}
	gce := &message.Proposal{Type: message.ProposalGroupContextExtensions, GroupContextExtensions: &message.GroupContextExtensions{
		Extensions: message.Extensions{{Type: message.ExtExternalSenders, Data: data}}}}
	commitAll(t, ga, &group.CommitOptions{Proposals: []*message.Proposal{gce}}, gb)
}

// commitAll has g commit opts, the others follow, and g merges.
func commitAll(t *testing.T, g *group.Group, opts *group.CommitOptions, others ...*group.Group) *group.Pending {
	t.Helper()
	p, err := g.Commit(opts)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	for _, o := range others {
		if err := o.HandleCommit(wire(t, p.Message)); err != nil {
			t.Fatalf("follow commit: %v", err)
		}
	}
	if err := g.MergePending(p); err != nil {
		t.Fatal(err)
	}
	agree(t, "commit", append([]*group.Group{g}, others...)...)
	return p
}

// deliver hands m to every group and fails on the first refusal.
func deliver(t *testing.T, m *framing.MLSMessage, gs ...*group.Group) {
	t.Helper()
	for _, g := range gs {
		if _, err := g.Process(wire(t, m)); err != nil {
			t.Fatalf("process: %v", err)
		}
	}
}

// TestExternalSenderProposals (§12.1.8, §12.1.8.1): an external sender of
// the external_senders extension proposes an Add and then a Remove; the
// members cache them, a commit includes them by reference, and the added
// member joins from the Welcome.
func TestExternalSenderProposals(t *testing.T) {
	s, ga, gb, _ := pair(t)
	ds := newExternalSender(t, s)
	withExternalSenders(t, ga, gb, newExternalSender(t, s), ds)
	if es, err := ga.ExternalSenders(); err != nil || len(es) != 2 {
		t.Fatalf("external senders: %v %v", es, err)
	}
	c := newClient(t, s, "carol")
	gid := ga.GroupContext().GroupID
	add, err := group.ExternalProposal(s, gid, ga.Epoch(), 1, ds.priv, &message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *c.kp}})
	if err != nil {
		t.Fatal(err)
	}
	if add.Public.MembershipTag != nil {
		t.Fatal("external proposal carries a membership tag")
	}
	deliver(t, add, ga, gb)
	p := commitAll(t, ga, &group.CommitOptions{TreeInWelcome: true}, gb)
	if len(p.Proposals) != 1 || p.Proposals[0].Sender.Type != framing.SenderExternal || !p.Proposals[0].ByReference {
		t.Fatalf("commit proposals: %+v", p.Proposals)
	}
	gc := c.join(t, s, p.Welcome)
	agree(t, "after external add", ga, gb, gc)

	rm, err := group.ExternalProposal(s, gid, ga.Epoch(), 1, ds.priv, &message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: uint32(gb.Leaf())}})
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, rm, ga, gb, gc)
	p = commitAll(t, ga, nil, gc)
	if n := len(ga.Members()); n != 2 {
		t.Fatalf("after external remove: %d members", n)
	}
}

// TestNewMemberProposal (§12.1.8): a joiner signs its own Add with its
// KeyPackage's key (sender type new_member_proposal); a member commits it
// by reference and the joiner joins from the Welcome.
func TestNewMemberProposal(t *testing.T) {
	s, ga, gb, _ := pair(t)
	c := newClient(t, s, "carol")
	m, err := group.NewMemberProposal(s, ga.GroupContext().GroupID, ga.Epoch(), c.kp, c.sigPriv)
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, m, ga, gb)
	p := commitAll(t, ga, &group.CommitOptions{TreeInWelcome: true}, gb)
	if len(p.Proposals) != 1 || p.Proposals[0].Sender.Type != framing.SenderNewMemberProposal {
		t.Fatalf("commit proposals: %+v", p.Proposals)
	}
	agree(t, "after joiner-signed add", ga, gb, c.join(t, s, p.Welcome))
}

// signAs frames a proposal or commit from sender, signed with priv,
// bypassing the constructors' own checks.
func signAs(t *testing.T, s *ciphersuite.Suite, g *group.Group, sender framing.Sender, priv []byte, ct framing.ContentType, p *message.Proposal) *framing.MLSMessage {
	t.Helper()
	c := &framing.FramedContent{GroupID: g.GroupContext().GroupID, Epoch: g.Epoch(), Sender: sender, AuthenticatedData: []byte{}, ContentType: ct}
	if ct == framing.ContentProposal {
		c.Proposal = p
	} else {
		c.Commit = &message.Commit{Proposals: []message.ProposalOrRef{}}
	}
	ac, err := framing.Sign(s, framing.WirePublicMessage, c, priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ct == framing.ContentCommit {
		ac.Auth.ConfirmationTag = make([]byte, s.HashSize())
	}
	pm, err := framing.NewPublicMessage(s, ac, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WirePublicMessage, Public: pm}
}

// TestExternalProposalRules (§6.1, §12.1.8): each rule that admits a
// proposal from outside the group refuses what breaks it, and the
// group's state stays as it was.
func TestExternalProposalRules(t *testing.T) {
	s, ga, gb, _ := pair(t)
	ds, other := newExternalSender(t, s), newExternalSender(t, s)
	c := newClient(t, s, "carol")
	add := &message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *c.kp}}
	ext := func(i uint32) framing.Sender { return framing.Sender{Type: framing.SenderExternal, SenderIndex: i} }
	newMember := framing.Sender{Type: framing.SenderNewMemberProposal}

	// Without external_senders no external sender is admitted.
	if _, err := ga.Process(wire(t, signAs(t, s, ga, ext(0), ds.priv, framing.ContentProposal, add))); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("external proposal without external_senders: %v", err)
	}
	withExternalSenders(t, ga, gb, ds)
	update := &message.Proposal{Type: message.ProposalUpdate, Update: &message.Update{LeafNode: c.kp.LeafNode}}
	extInit := &message.Proposal{Type: message.ProposalExternalInit, ExternalInit: &message.ExternalInit{KEMOutput: []byte{1}}}
	for name, m := range map[string]*framing.MLSMessage{
		"sender index past the extension":  signAs(t, s, ga, ext(1), ds.priv, framing.ContentProposal, add),
		"signed by another key":            signAs(t, s, ga, ext(0), other.priv, framing.ContentProposal, add),
		"update from an external sender":   signAs(t, s, ga, ext(0), ds.priv, framing.ContentProposal, update),
		"externalinit from external":       signAs(t, s, ga, ext(0), ds.priv, framing.ContentProposal, extInit),
		"commit from an external sender":   signAs(t, s, ga, ext(0), ds.priv, framing.ContentCommit, nil),
		"new member proposing a remove":    signAs(t, s, ga, newMember, c.sigPriv, framing.ContentProposal, &message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: 1}}),
		"new member add under another key": signAs(t, s, ga, newMember, ds.priv, framing.ContentProposal, add),
		"new member commit":                signAs(t, s, ga, newMember, c.sigPriv, framing.ContentCommit, nil),
	} {
		if _, err := ga.Process(wire(t, m)); !errors.Is(err, group.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// None of the refused proposals was cached: an empty commit carries none.
	p, err := ga.Commit(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Proposals) != 0 {
		t.Fatalf("a refused proposal was cached: %+v", p.Proposals)
	}
	// The constructors refuse what receivers would.
	if _, err := group.ExternalProposal(s, []byte("g"), 1, 0, ds.priv, update); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("ExternalProposal of an update: %v", err)
	}
	// A GroupContextExtensions proposal with an undecodable external_senders is invalid.
	bad := &message.Proposal{Type: message.ProposalGroupContextExtensions, GroupContextExtensions: &message.GroupContextExtensions{
		Extensions: message.Extensions{{Type: message.ExtExternalSenders, Data: []byte{0x05, 0x01}}}}}
	if _, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{bad}}); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("malformed external_senders: %v", err)
	}
}

// FuzzExternalProposal feeds hostile PublicMessages from outside senders
// to a group with external_senders: each is cached or refused, never a
// panic, and the epoch stays.
func FuzzExternalProposal(f *testing.F) {
	s, ga, gb, _ := pair(f)
	priv, pub, err := s.GenerateSignatureKey()
	if err != nil {
		f.Fatal(err)
	}
	es, _ := codec.Marshal(message.ExternalSenders{{SignatureKey: pub, Credential: message.Credential{Type: message.CredentialBasic, Identity: []byte("ds")}}})
	p, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{{Type: message.ProposalGroupContextExtensions,
		GroupContextExtensions: &message.GroupContextExtensions{Extensions: message.Extensions{{Type: message.ExtExternalSenders, Data: es}}}}}})
	if err != nil {
		f.Fatal(err)
	}
	if err := gb.HandleCommit(p.Message); err != nil {
		f.Fatal(err)
	}
	c := newClient(f, s, "carol")
	gid, epoch := gb.GroupContext().GroupID, gb.Epoch()
	for _, m := range []func() (*framing.MLSMessage, error){
		func() (*framing.MLSMessage, error) {
			return group.ExternalProposal(s, gid, epoch, 0, priv, &message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: 0}})
		},
		func() (*framing.MLSMessage, error) { return group.NewMemberProposal(s, gid, epoch, c.kp, c.sigPriv) },
	} {
		msg, err := m()
		if err != nil {
			f.Fatal(err)
		}
		b, _ := codec.Marshal(msg)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := framing.Decode(in)
		if err != nil {
			return
		}
		_, _ = gb.Process(m)
		if gb.Epoch() != epoch {
			t.Fatal("a proposal changed the epoch")
		}
	})
}
