package group_test

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// TestPSKProposalRules (§12.1.4): a commit whose PreSharedKey proposal
// names a resumption PSK of usage reinit or branch, or carries a
// psk_nonce other than Nh bytes, is invalid; one of usage application with
// an Nh-byte nonce is accepted.
func TestPSKProposalRules(t *testing.T) {
	s, ga, _, _ := pair(t)
	nonce := make([]byte, s.HashSize())
	for name, id := range map[string]message.PreSharedKeyID{
		"usage reinit": {Type: message.PSKResumption, Usage: message.UsageReInit, GroupID: []byte("g"), Epoch: 1, Nonce: nonce},
		"usage branch": {Type: message.PSKResumption, Usage: message.UsageBranch, GroupID: []byte("g"), Epoch: 1, Nonce: nonce},
		"short nonce":  {Type: message.PSKResumption, Usage: message.UsageApplication, GroupID: []byte("g"), Epoch: 1, Nonce: nonce[1:]},
		"long nonce":   {Type: message.PSKResumption, Usage: message.UsageApplication, GroupID: []byte("g"), Epoch: 1, Nonce: append(nonce, 0)},
	} {
		_, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{{Type: message.ProposalPreSharedKey, PreSharedKey: &message.PreSharedKey{PSK: id}}}})
		if !errors.Is(err, group.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	ok := message.PreSharedKeyID{Type: message.PSKResumption, Usage: message.UsageApplication, GroupID: []byte("g"), Epoch: 1, Nonce: nonce}
	if _, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{{Type: message.ProposalPreSharedKey, PreSharedKey: &message.PreSharedKey{PSK: ok}}}}); err != nil {
		t.Fatalf("valid psk: %v", err)
	}
}

// TestExternalCommitWithPSKs (§12.4.3.2, §8.4): an external commit
// carries PreSharedKey proposals of an external PSK and of a resumption
// PSK its joiner kept from an earlier membership; the members derive the
// same epoch, and a member lacking the external PSK cannot follow.
func TestExternalCommitWithPSKs(t *testing.T) {
	s, ga, gb, _ := pair(t)
	store := group.MapPSKStore{"ext": []byte("an external psk")}
	// Alice and bob hold the external PSK after a restart with a store.
	load := func(g *group.Group, psks group.PSKStore) *group.Group {
		raw, err := g.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		out, err := group.Load(raw, psks)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	ga, gb = load(ga, store), load(gb, store)
	// Bob leaves by resync: he rejoins externally, keeping epoch 1's resumption PSK.
	bobOld := gb.Leaf()
	secret, ok := gb.ResumptionPSK(1)
	if !ok {
		t.Fatal("bob kept no resumption psk of epoch 1")
	}
	c := newClient(t, s, "bob")
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
	gc, msg, err := group.JoinExternal(s, &group.ExternalJoinOptions{GroupInfo: &sent, Leaf: &leaf, SignaturePriv: c.sigPriv,
		PSKs: store, Resync: &bobOld, Resumption: map[uint64][]byte{1: secret},
		PreSharedKeys: []message.PreSharedKeyID{
			{Type: message.PSKExternal, ID: []byte("ext")},
			{Type: message.PSKResumption, Usage: message.UsageApplication, GroupID: []byte("g"), Epoch: 1},
		}})
	if err != nil {
		t.Fatalf("external join with psks: %v", err)
	}
	if n := len(msg.Public.Content.Commit.Proposals); n != 4 {
		t.Fatalf("external commit has %d proposals, want ExternalInit, Remove and two PreSharedKey", n)
	}
	noPSK := load(ga, nil)
	if err := noPSK.HandleCommit(wire(t, msg)); !errors.Is(err, group.ErrUnknownPSK) {
		t.Fatalf("member without the external psk: %v", err)
	}
	if err := ga.HandleCommit(wire(t, msg)); err != nil {
		t.Fatalf("alice follows the external commit: %v", err)
	}
	agree(t, "external commit with psks", ga, gc)

	// Without the resumption secret the joiner cannot build the commit.
	gi, _ = ga.GroupInfo(true)
	leaf = newClient(t, s, "dave").kp.LeafNode
	if _, _, err := group.JoinExternal(s, &group.ExternalJoinOptions{GroupInfo: gi, Leaf: &leaf, SignaturePriv: c.sigPriv,
		PreSharedKeys: []message.PreSharedKeyID{{Type: message.PSKResumption, Usage: message.UsageApplication, GroupID: []byte("g"), Epoch: 1}}}); !errors.Is(err, group.ErrUnknownPSK) {
		t.Fatalf("unknown resumption psk: %v", err)
	}
}
