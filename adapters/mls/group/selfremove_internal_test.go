package group

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/keypackage"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// TestSelfRemoveListRules (draft SelfRemove, §12.2): a commit's list is
// invalid when it holds a SelfRemove and a Remove of the same leaf, two
// SelfRemoves of one leaf, the committer's own SelfRemove, or a SelfRemove
// included by value.
func TestSelfRemoveListRules(t *testing.T) {
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	var kps []*keypackage.Bundle
	var sigs [][]byte
	for _, name := range []string{"alice", "bob", "carol"} {
		sig, _, _ := s.GenerateSignatureKey()
		b, err := keypackage.New(s, &keypackage.Options{Credential: message.Credential{Type: message.CredentialBasic, Identity: []byte(name)},
			SignaturePriv: sig, Lifetime: message.Lifetime{NotAfter: 1 << 62}, CapabilityProposals: []message.ProposalType{message.ProposalSelfRemove}})
		if err != nil {
			t.Fatal(err)
		}
		kps, sigs = append(kps, b), append(sigs, sig)
	}
	g, err := Create(s, &CreateOptions{GroupID: []byte("l"), Leaf: &kps[0].KeyPackage.LeafNode, EncryptionPriv: kps[0].EncryptionPriv, SignaturePriv: sigs[0]})
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.Commit(&CommitOptions{Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *kps[1].KeyPackage}},
		{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *kps[2].KeyPackage}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.MergePending(p); err != nil {
		t.Fatal(err)
	}
	selfRemove := func(l uint32) cached {
		return cached{ref: []byte{byte(l)}, proposal: &message.Proposal{Type: message.ProposalSelfRemove, SelfRemove: &message.SelfRemove{}},
			sender: framing.Sender{Type: framing.SenderMember, LeafIndex: l}}
	}
	remove := cached{ref: []byte{9}, proposal: &message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: 1}},
		sender: framing.Sender{Type: framing.SenderMember, LeafIndex: 2}}
	for name, props := range map[string][]cached{
		"SelfRemove and Remove of one leaf": {selfRemove(1), remove},
		"two SelfRemoves of one leaf":       {selfRemove(1), selfRemove(1)},
		"the committer's own SelfRemove":    {selfRemove(0)},
		"a SelfRemove by value":             {{proposal: selfRemove(1).proposal, sender: selfRemove(1).sender}},
	} {
		if _, err := g.apply(g.tree.Clone(), treemath.LeafIndex(0), props, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := g.apply(g.tree.Clone(), treemath.LeafIndex(0), []cached{selfRemove(1)}, false); err != nil {
		t.Fatalf("a lone SelfRemove: %v", err)
	}
}

// TestExternalCommitReferences (draft SelfRemove, RFC 9420 §12.2): an
// external commit may name by reference only pending SelfRemove
// proposals.
func TestExternalCommitReferences(t *testing.T) {
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	sig, _, _ := s.GenerateSignatureKey()
	b, err := keypackage.New(s, &keypackage.Options{Credential: message.Credential{Type: message.CredentialBasic, Identity: []byte("a")},
		SignaturePriv: sig, Lifetime: message.Lifetime{NotAfter: 1 << 62}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := Create(s, &CreateOptions{GroupID: []byte("r"), Leaf: &b.KeyPackage.LeafNode, EncryptionPriv: b.EncryptionPriv, SignaturePriv: sig})
	if err != nil {
		t.Fatal(err)
	}
	member := framing.Sender{Type: framing.SenderMember}
	g.proposals = []cached{
		{ref: []byte{1}, proposal: &message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: 0}}, sender: member},
		{ref: []byte{2}, proposal: &message.Proposal{Type: message.ProposalSelfRemove, SelfRemove: &message.SelfRemove{}}, sender: member},
	}
	external := framing.Sender{Type: framing.SenderNewMemberCommit}
	ref := func(r byte) *message.Commit {
		return &message.Commit{Proposals: []message.ProposalOrRef{{Type: message.ProposalReference, Reference: []byte{r}}}}
	}
	if _, err := g.resolve(ref(1), external); !errors.Is(err, ErrInvalid) {
		t.Fatalf("external commit naming a Remove by reference: %v", err)
	}
	if _, err := g.resolve(ref(2), external); err != nil {
		t.Fatalf("external commit naming a SelfRemove by reference: %v", err)
	}
}
