package group

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/keypackage"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

type member struct {
	b   *keypackage.Bundle
	sig []byte
}

func newMember(t *testing.T, s *ciphersuite.Suite, name string) member {
	t.Helper()
	sig, _, err := s.GenerateSignatureKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := keypackage.New(s, &keypackage.Options{Credential: message.Credential{Type: message.CredentialBasic, Identity: []byte(name)},
		SignaturePriv: sig, Lifetime: message.Lifetime{NotAfter: 1 << 62}})
	if err != nil {
		t.Fatal(err)
	}
	return member{b: b, sig: sig}
}

func (m member) join(t *testing.T, s *ciphersuite.Suite, w *message.Welcome, pred *Group) (*Group, error) {
	t.Helper()
	return Join(s, w, &JoinOptions{KeyPackage: m.b.KeyPackage, InitPriv: m.b.InitPriv, EncryptionPriv: m.b.EncryptionPriv,
		SignaturePriv: m.sig, Predecessor: pred})
}

// TestSuccessorChecks (§11.2, §11.3): a Welcome whose GroupSecrets name
// the right reinit or branch resumption PSK is still refused when the new
// group is not the successor the PSK claims: a reinitialized group whose
// group id or extensions differ from the ReInit, a branch in another
// cipher suite.
func TestSuccessorChecks(t *testing.T) {
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	s1, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519AES128GCMSHA256Ed25519)
	a, b := newMember(t, s, "alice"), newMember(t, s, "bob")
	ga, err := Create(s, &CreateOptions{GroupID: []byte("old"), Leaf: &a.b.KeyPackage.LeafNode, EncryptionPriv: a.b.EncryptionPriv, SignaturePriv: a.sig})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ga.Commit(&CommitOptions{TreeInWelcome: true, Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *b.b.KeyPackage}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ga.MergePending(p); err != nil {
		t.Fatal(err)
	}
	gb, err := b.join(t, s, p.Welcome, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A branch in another suite.
	a2, b2 := newMember(t, s1, "alice"), newMember(t, s1, "bob")
	_, w, err := ga.successor(s1, []byte("sub"), nil, message.UsageBranch, &SuccessorOptions{Leaf: &a2.b.KeyPackage.LeafNode,
		EncryptionPriv: a2.b.EncryptionPriv, SignaturePriv: a2.sig, KeyPackages: []*message.KeyPackage{b2.b.KeyPackage}, TreeInWelcome: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b2.join(t, s1, w, gb); !errors.Is(err, ErrInvalid) {
		t.Fatalf("branch in another suite: %v", err)
	}
	// End the group with a ReInit.
	ri := &message.ReInit{GroupID: []byte("new"), Version: message.MLS10, CipherSuite: s.ID(), Extensions: message.Extensions{}}
	pm, err := ga.Propose(&message.Proposal{Type: message.ProposalReInit, ReInit: ri}, framing.WirePublicMessage)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gb.Process(pm); err != nil {
		t.Fatal(err)
	}
	p, err = ga.Commit(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := gb.HandleCommit(p.Message); err != nil {
		t.Fatal(err)
	}
	if err := ga.MergePending(p); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		gid  string
		exts message.Extensions
	}{
		"another group id":   {"other", message.Extensions{}},
		"other extensions":   {"new", message.Extensions{{Type: message.ExtRequiredCapabilities, Data: []byte{0, 0, 0}}}},
		"the ReInit's group": {"new", message.Extensions{}},
	} {
		a3, b3 := newMember(t, s, "alice"), newMember(t, s, "bob")
		_, w, err := ga.successor(s, []byte(c.gid), c.exts, message.UsageReInit, &SuccessorOptions{Leaf: &a3.b.KeyPackage.LeafNode,
			EncryptionPriv: a3.b.EncryptionPriv, SignaturePriv: a3.sig, KeyPackages: []*message.KeyPackage{b3.b.KeyPackage}, TreeInWelcome: true})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b3.join(t, s, w, gb)
		if c.gid == "new" && len(c.exts) == 0 {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
