package group_test

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// TestPSKCommits (§8.4, §12.1.4): commits injecting an external PSK and a
// resumption PSK of an earlier epoch give both members the same epoch; a
// member without the external PSK cannot follow.
func TestPSKCommits(t *testing.T) {
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	a, b := newClient(t, s, "alice"), newClient(t, s, "bob")
	store := group.MapPSKStore{"shared": []byte("a pre-shared secret")}
	leaf := a.kp.LeafNode
	ga, err := group.Create(s, &group.CreateOptions{GroupID: []byte("psk"), Leaf: &leaf, EncryptionPriv: a.encPriv, SignaturePriv: a.sigPriv, PSKs: store})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ga.Commit(&group.CommitOptions{TreeInWelcome: true, Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *b.kp}}}})
	if err != nil {
		t.Fatal(err)
	}
	_ = ga.MergePending(p)
	wm := wire(t, welcomeMessage(p.Welcome))
	gb, err := group.Join(s, wm.Welcome, &group.JoinOptions{KeyPackage: b.kp, InitPriv: b.initPr, EncryptionPriv: b.encPriv, SignaturePriv: b.sigPriv, PSKs: store})
	if err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, s.HashSize())
	for _, id := range []message.PreSharedKeyID{
		{Type: message.PSKExternal, ID: []byte("shared"), Nonce: nonce},
		{Type: message.PSKResumption, Usage: message.UsageApplication, GroupID: []byte("psk"), Epoch: 1, Nonce: nonce},
	} {
		p, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{{Type: message.ProposalPreSharedKey, PreSharedKey: &message.PreSharedKey{PSK: id}}}})
		if err != nil {
			t.Fatalf("commit psk type %d: %v", id.Type, err)
		}
		if err := gb.HandleCommit(wire(t, p.Message)); err != nil {
			t.Fatalf("process psk type %d: %v", id.Type, err)
		}
		_ = ga.MergePending(p)
		agree(t, "psk commit", ga, gb)
	}
	// Bob restarts without the PSK store and cannot follow an external PSK.
	raw, _ := gb.Marshal()
	gb2, _ := group.Load(raw, nil)
	p, _ = ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{{Type: message.ProposalPreSharedKey,
		PreSharedKey: &message.PreSharedKey{PSK: message.PreSharedKeyID{Type: message.PSKExternal, ID: []byte("shared"), Nonce: nonce}}}}})
	if err := gb2.HandleCommit(wire(t, p.Message)); !errors.Is(err, group.ErrUnknownPSK) {
		t.Fatalf("missing psk: %v", err)
	}
}
