package group_test

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// TestRequiredCapabilities (§11.1, §12.1.7): a GroupContextExtensions
// proposal with an extension a member does not support is refused; once
// required_capabilities names a credential type, an Add whose leaf lacks it
// is refused, and one that has it is accepted.
func TestRequiredCapabilities(t *testing.T) {
	s, ga, gb, _ := pair(t)
	gce := func(ext message.Extensions) []*message.Proposal {
		return []*message.Proposal{{Type: message.ProposalGroupContextExtensions, GroupContextExtensions: &message.GroupContextExtensions{Extensions: ext}}}
	}
	if _, err := ga.Commit(&group.CommitOptions{Proposals: gce(message.Extensions{{Type: 0xff42, Data: nil}})}); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("unsupported extension: %v", err)
	}
	rc, _ := codec.Marshal(&message.RequiredCapabilities{ExtensionTypes: []message.ExtensionType{}, ProposalTypes: []message.ProposalType{},
		CredentialTypes: []message.CredentialType{message.CredentialBasic}})
	p, err := ga.Commit(&group.CommitOptions{Proposals: gce(message.Extensions{{Type: message.ExtRequiredCapabilities, Data: rc}})})
	if err != nil {
		t.Fatal(err)
	}
	if err := gb.HandleCommit(wire(t, p.Message)); err != nil {
		t.Fatal(err)
	}
	_ = ga.MergePending(p)
	c := newClient(t, s, "carol")
	kp := *c.kp
	kp.LeafNode.Capabilities.Credentials = []message.CredentialType{message.CredentialX509}
	kp.LeafNode.Credential = message.Credential{Type: message.CredentialX509, Certificates: [][]byte{{1}}}
	if err := kp.LeafNode.Sign(s, c.sigPriv, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := kp.Sign(s, c.sigPriv); err != nil {
		t.Fatal(err)
	}
	add := func(k *message.KeyPackage) error {
		_, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *k}}}})
		return err
	}
	if err := add(&kp); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("add without the required credential type: %v", err)
	}
	// §7.3: a leaf whose credential type the members do not support.
	kp.LeafNode.Capabilities.Credentials = []message.CredentialType{message.CredentialBasic, message.CredentialX509}
	_ = kp.LeafNode.Sign(s, c.sigPriv, nil, 0)
	_ = kp.Sign(s, c.sigPriv)
	if err := add(&kp); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("add with a credential type no member supports: %v", err)
	}
	if err := add(c.kp); err != nil {
		t.Fatalf("add with it: %v", err)
	}
}
