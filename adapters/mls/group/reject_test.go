package group_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// pair returns alice's group and bob's after alice added bob.
func pair(t testing.TB) (*ciphersuite.Suite, *group.Group, *group.Group, *client) {
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	a, b := newClient(t, s, "alice"), newClient(t, s, "bob")
	leaf := a.kp.LeafNode
	ga, err := group.Create(s, &group.CreateOptions{GroupID: []byte("g"), Leaf: &leaf, EncryptionPriv: a.encPriv, SignaturePriv: a.sigPriv})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ga.Commit(&group.CommitOptions{TreeInWelcome: true,
		Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *b.kp}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ga.MergePending(p); err != nil {
		t.Fatal(err)
	}
	return s, ga, b.join(t, s, p.Welcome), b
}

// TestCommitRejections (§12.4.2): a tampered commit, a commit naming a
// proposal the receiver never saw and a stale pending commit are refused,
// and staging leaves the group unchanged.
func TestCommitRejections(t *testing.T) {
	_, ga, gb, _ := pair(t)
	p, err := ga.Commit(&group.CommitOptions{Path: true})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := codec.Marshal(p.Message)
	for _, i := range []int{len(raw) - 1, len(raw) / 2, 40} {
		bad := append([]byte(nil), raw...)
		bad[i] ^= 0x01
		m, err := framing.Decode(bad)
		if err != nil {
			continue // a flip that breaks the encoding is rejected earlier
		}
		if _, err := gb.StageCommit(m); !errors.Is(err, group.ErrInvalid) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	staged, err := gb.StageCommit(wire(t, p.Message))
	if err != nil {
		t.Fatal(err)
	}
	if gb.Epoch() != 1 {
		t.Fatal("staging changed the epoch")
	}
	if err := gb.MergePending(staged); err != nil || gb.Epoch() != 2 {
		t.Fatalf("merge staged: %v", err)
	}
	if err := gb.MergePending(staged); !errors.Is(err, group.ErrWrongEpoch) {
		t.Fatalf("merging twice: %v", err)
	}
	if err := ga.MergePending(p); err != nil {
		t.Fatal(err)
	}

	// Alice proposes privately to herself only, then commits by reference.
	if _, err := ga.Propose(&message.Proposal{Type: message.ProposalGroupContextExtensions,
		GroupContextExtensions: &message.GroupContextExtensions{Extensions: message.Extensions{}}}, framing.WirePublicMessage); err != nil {
		t.Fatal(err)
	}
	p, err = ga.Commit(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gb.StageCommit(wire(t, p.Message)); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("unknown proposal reference: %v", err)
	}
}

// TestRemovedMemberAndSelfRemove (§12.2): a commit may not remove its own
// committer.
func TestRemovedMemberAndSelfRemove(t *testing.T) {
	_, ga, _, _ := pair(t)
	_, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{{Type: message.ProposalRemove, Remove: &message.Remove{Removed: uint32(ga.Leaf())}}}})
	if !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("self remove: %v", err)
	}
}

// FuzzStageCommit feeds hostile commits to a member: every one must be
// rejected with an error or staged, never panic, and never change the group.
func FuzzStageCommit(f *testing.F) {
	_, ga, gb, _ := pair(f)
	for _, o := range []*group.CommitOptions{{Path: true}, {}, {Proposals: []*message.Proposal{{Type: message.ProposalRemove, Remove: &message.Remove{Removed: 1}}}}} {
		p, err := ga.Commit(o)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := codec.Marshal(p.Message)
		f.Add(b)
	}
	epoch := gb.Epoch()
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := framing.Decode(in)
		if err != nil || m.WireFormat != framing.WirePublicMessage {
			return
		}
		_, _ = gb.StageCommit(m)
		_ = gb.HandleProposal(m)
		if gb.Epoch() != epoch {
			t.Fatal("staging changed the group")
		}
	})
}

// FuzzJoin feeds hostile Welcomes to a joiner: errors, never panics.
func FuzzJoin(f *testing.F) {
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	a, b := newClient(f, s, "alice"), newClient(f, s, "bob")
	leaf := a.kp.LeafNode
	ga, err := group.Create(s, &group.CreateOptions{GroupID: []byte("g"), Leaf: &leaf, EncryptionPriv: a.encPriv, SignaturePriv: a.sigPriv})
	if err != nil {
		f.Fatal(err)
	}
	for _, withTree := range []bool{true, false} {
		p, err := ga.Commit(&group.CommitOptions{TreeInWelcome: withTree, Path: !withTree,
			Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *b.kp}}}})
		if err != nil {
			f.Fatal(err)
		}
		w, _ := codec.Marshal(&framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireWelcome, Welcome: p.Welcome})
		f.Add(w)
	}
	tree := ga.Tree().Export()
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := framing.Decode(in)
		if err != nil || m.Welcome == nil {
			return
		}
		_, _ = group.Join(s, m.Welcome, &group.JoinOptions{KeyPackage: b.kp, InitPriv: b.initPr, EncryptionPriv: b.encPriv, SignaturePriv: b.sigPriv, Tree: tree})
	})
}

// TestMessageClassification: messages of other epochs are *EpochError,
// ciphertexts that do not open are ErrUndecryptable.
func TestMessageClassification(t *testing.T) {
	_, ga, gb, _ := pair(t)
	msg, err := ga.Protect([]byte("hi"))
	if err != nil {
		t.Fatal(err)
	}
	bad := *msg.Private
	bad.Ciphertext = append([]byte(nil), bad.Ciphertext...)
	bad.Ciphertext[0] ^= 1
	if _, _, err := gb.Unprotect(&framing.MLSMessage{Version: msg.Version, WireFormat: msg.WireFormat, Private: &bad}); !errors.Is(err, group.ErrUndecryptable) {
		t.Fatalf("corrupted ciphertext: %v", err)
	}
	p, _ := ga.Commit(&group.CommitOptions{Path: true})
	_ = ga.MergePending(p)
	late, _ := ga.Protect([]byte("later"))
	var ee *group.EpochError
	if _, _, err := gb.Unprotect(late); !errors.As(err, &ee) || ee.MessageEpoch != 2 || ee.GroupEpoch != 1 || !errors.Is(err, group.ErrWrongEpoch) {
		t.Fatalf("future epoch: %v", err)
	}
}

// TestPastEpochs: with one past epoch retained, an application message of
// the previous epoch still opens after a commit, also after a restart;
// without retention it is an *EpochError.
func TestPastEpochs(t *testing.T) {
	_, ga, gb, _ := pair(t)
	gb.SetPastEpochs(1)
	early, err := ga.Protect([]byte("sent before the commit"))
	if err != nil {
		t.Fatal(err)
	}
	early2, _ := ga.Protect([]byte("second"))
	p, _ := ga.Commit(&group.CommitOptions{Path: true})
	if err := gb.HandleCommit(wire(t, p.Message)); err != nil {
		t.Fatal(err)
	}
	if data, _, err := gb.Unprotect(wire(t, early)); err != nil || string(data) != "sent before the commit" {
		t.Fatalf("late message: %q %v", data, err)
	}
	b, err := gb.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	gb2, err := group.Load(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := gb2.Unprotect(wire(t, early)); !errors.Is(err, group.ErrUndecryptable) {
		t.Fatalf("replayed late message after restart: %v", err)
	}
	if data, _, err := gb2.Unprotect(wire(t, early2)); err != nil || string(data) != "second" {
		t.Fatalf("late message after restart: %q %v", data, err)
	}
	gb2.SetPastEpochs(0)
	if _, _, err := gb2.Unprotect(wire(t, early2)); !errors.Is(err, group.ErrWrongEpoch) {
		t.Fatalf("without retention: %v", err)
	}
}

// FuzzLoad feeds corrupted group states to Load: errors, never panics.
func FuzzLoad(f *testing.F) {
	_, ga, gb, _ := pair(f)
	for _, g := range []*group.Group{ga, gb} {
		b, err := g.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		g, err := group.Load(in, nil)
		if err != nil {
			return
		}
		_, _ = g.Protect([]byte("x"))
		_, _ = g.Export("l", nil, 16)
	})
}

// TestProposalListRules (§12.2): adding a member already in the group and
// proposing the same PSK twice are refused when committing.
func TestProposalListRules(t *testing.T) {
	s, ga, _, b := pair(t)
	_, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *b.kp}}}})
	if !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("re-adding bob: %v", err)
	}
	psk := message.PreSharedKeyID{Type: message.PSKExternal, ID: []byte("k"), Nonce: make([]byte, s.HashSize())}
	two := []*message.Proposal{
		{Type: message.ProposalPreSharedKey, PreSharedKey: &message.PreSharedKey{PSK: psk}},
		{Type: message.ProposalPreSharedKey, PreSharedKey: &message.PreSharedKey{PSK: psk}},
	}
	if _, err := ga.Commit(&group.CommitOptions{Proposals: two}); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("duplicate PSK: %v", err)
	}
}

// TestNilInputs: missing inputs are errors, not panics.
func TestNilInputs(t *testing.T) {
	s, ga, _, _ := pair(t)
	if _, err := group.Join(s, nil, nil); !errors.Is(err, group.ErrInvalid) {
		t.Error(err)
	}
	if _, err := group.Create(s, nil); !errors.Is(err, group.ErrInvalid) {
		t.Error(err)
	}
	if _, _, err := group.JoinExternal(s, nil); !errors.Is(err, group.ErrInvalid) {
		t.Error(err)
	}
	if _, err := group.NewPublic(s, nil, nil); !errors.Is(err, group.ErrInvalid) {
		t.Error(err)
	}
	if err := ga.HandleCommit(nil); !errors.Is(err, group.ErrInvalid) {
		t.Error(err)
	}
	if err := ga.HandleProposal(&framing.MLSMessage{}); !errors.Is(err, group.ErrInvalid) {
		t.Error(err)
	}
	if err := ga.MergePending(nil); !errors.Is(err, group.ErrWrongEpoch) {
		t.Error(err)
	}
}

// TestProcessAndPendingRestart: Process dispatches by content type and
// carries authenticated_data; a pending commit survives Marshal and
// LoadPending and merges on both sides to the same epoch.
func TestProcessAndPendingRestart(t *testing.T) {
	_, ga, gb, _ := pair(t)
	msg, err := ga.ProtectWithAuthenticatedData([]byte("data"), []byte("aad"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := gb.Process(wire(t, msg))
	if err != nil || string(r.Application) != "data" || string(r.AuthenticatedData) != "aad" || r.Sender.LeafIndex != 0 {
		t.Fatalf("application: %+v %v", r, err)
	}
	prop, _ := gb.ProposeUpdate(framing.WirePrivateMessage)
	if r, err = ga.Process(wire(t, prop)); err != nil || r.Proposal == nil {
		t.Fatalf("proposal: %v", err)
	}
	p, err := ga.Commit(&group.CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := gb.Marshal() // bob restarts with his pending update key
	if gb, err = group.Load(rb, nil); err != nil {
		t.Fatal(err)
	}
	p2, err := group.LoadPending(raw, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ga.MergePending(p2); err != nil {
		t.Fatal(err)
	}
	r, err = gb.Process(wire(t, p.Message))
	if err != nil || r.Pending == nil {
		t.Fatalf("commit: %v", err)
	}
	staged, _ := r.Pending.Marshal()
	p3, err := group.LoadPending(staged, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := gb.MergePending(p3); err != nil {
		t.Fatal(err)
	}
	agree(t, "after restarts", ga, gb)
}

// TestCommitFiltersCachedProposals (§12.2): a committer leaves out its own
// cached Update and the Update of a member it removes in the same commit.
func TestCommitFiltersCachedProposals(t *testing.T) {
	_, ga, gb, _ := pair(t)
	own, _ := ga.ProposeUpdate(framing.WirePublicMessage)
	if err := gb.HandleProposal(wire(t, own)); err != nil {
		t.Fatal(err)
	}
	theirs, _ := gb.ProposeUpdate(framing.WirePublicMessage)
	if err := ga.HandleProposal(wire(t, theirs)); err != nil {
		t.Fatal(err)
	}
	p, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{{Type: message.ProposalRemove, Remove: &message.Remove{Removed: uint32(gb.Leaf())}}}})
	if err != nil {
		t.Fatalf("commit with filtered proposals: %v", err)
	}
	if n := len(p.Message.Public.Content.Commit.Proposals); n != 1 {
		t.Fatalf("commit carries %d proposals, want only the removal", n)
	}
	if err := gb.HandleCommit(wire(t, p.Message)); !errors.Is(err, group.ErrRemoved) {
		t.Fatalf("bob processes his removal: %v", err)
	}
}

// TestPastEpochLeavesSurviveRestart: a past epoch is stored as the leaves
// that differ from the current tree. Across a removal whose leaf went to a
// new member, members added and removed again (the tree grew, then shrank)
// and a restart, each late message opens under its own epoch's leaf, and
// re-encoding the loaded state gives the same bytes.
func TestPastEpochLeavesSurviveRestart(t *testing.T) {
	s, ga, gb, b := pair(t)
	ga.SetPastEpochs(4)
	commit := func(props ...*message.Proposal) *group.Pending {
		t.Helper()
		p, err := ga.Commit(&group.CommitOptions{Proposals: props, TreeInWelcome: true, Path: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := ga.MergePending(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	add := func(c *client) *message.Proposal {
		return &message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *c.kp}}
	}
	remove := func(l uint32) *message.Proposal {
		return &message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: l}}
	}
	fromB, _ := gb.Protect([]byte("b, epoch 1"))
	c, d, e := newClient(t, s, "carol"), newClient(t, s, "dave"), newClient(t, s, "erin")
	p := commit(remove(1), add(c)) // carol takes bob's leaf 1
	gc := c.join(t, s, p.Welcome)
	fromC, _ := gc.Protect([]byte("carol, epoch 2"))
	p = commit(add(d), add(e)) // the tree grows to four leaves
	gd := d.join(t, s, p.Welcome)
	fromD, _ := gd.Protect([]byte("dave, epoch 3"))
	commit(remove(2), remove(3)) // and shrinks back to two
	if ga.Tree().LeafCount() != 2 {
		t.Fatalf("tree of %d leaves, want 2 after the removals", ga.Tree().LeafCount())
	}
	commit(add(newClient(t, s, "frank"))) // a leaf no past epoch had
	state, err := ga.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := group.Load(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := loaded.Marshal()
	if err != nil || !bytes.Equal(again, state) {
		t.Fatalf("re-encoding the loaded state differs (%v)", err)
	}
	for _, m := range []struct {
		msg  *framing.MLSMessage
		from *client
	}{{fromB, b}, {fromC, c}, {fromD, d}} {
		r, err := loaded.Process(wire(t, m.msg))
		if err != nil {
			t.Fatalf("late message from %s after restart: %v", m.from.name, err)
		}
		if r.SenderLeaf == nil || !bytes.Equal(r.SenderLeaf.SignatureKey, m.from.kp.LeafNode.SignatureKey) {
			t.Fatalf("late message from %s names leaf %+v", m.from.name, r.SenderLeaf)
		}
	}
}

// TestRemovedMemberKeepsNoPastEpochs (COMP-113): a member that merges its
// own removal erases the keys of the past epochs it kept, so a late
// message of one of them is of a wrong epoch, not one it could still open.
func TestRemovedMemberKeepsNoPastEpochs(t *testing.T) {
	_, ga, gb, _ := pair(t)
	gb.SetPastEpochs(2)
	early, _ := ga.Protect([]byte("sent at epoch 1"))
	p, _ := ga.Commit(&group.CommitOptions{Path: true})
	if err := gb.HandleCommit(wire(t, p.Message)); err != nil {
		t.Fatal(err)
	}
	_ = ga.MergePending(p)
	p, err := ga.Commit(&group.CommitOptions{Proposals: []*message.Proposal{{Type: message.ProposalRemove, Remove: &message.Remove{Removed: uint32(gb.Leaf())}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := gb.HandleCommit(wire(t, p.Message)); !errors.Is(err, group.ErrRemoved) {
		t.Fatalf("removal: %v", err)
	}
	b, _ := gb.Marshal()
	gb2, err := group.Load(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]*group.Group{"in memory": gb, "reloaded": gb2} {
		if _, _, err := g.Unprotect(wire(t, early)); !errors.Is(err, group.ErrWrongEpoch) {
			t.Fatalf("%s: a message of epoch 1 after the removal: %v, want ErrWrongEpoch", name, err)
		}
	}
}
