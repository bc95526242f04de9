package mls_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/welcome"
	"github.com/regroup-mls/regroup/ports"
)

func suite(t testing.TB) *ciphersuite.Suite {
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func record(b ports.KeyPackageBundle) ports.KeyPackageRecord {
	return ports.KeyPackageRecord{Ref: b.Ref, KeyPackage: b.KeyPackage, InitPrivateKey: b.InitPrivateKey, EncryptionPrivateKey: b.EncryptionPrivateKey}
}

// pair makes a group of a and b at epoch 1.
func pair(t *testing.T, gid []byte) (a, b *installation) {
	t.Helper()
	ctx := context.Background()
	a, b = newInstallation(t, "inbox-a"), newInstallation(t, "inbox-b")
	if _, err := a.engine.CreateGroup(ctx, a.tx, gid, a.keyPackage(t), nil); err != nil {
		t.Fatal(err)
	}
	kp := b.keyPackage(t)
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.engine.MergePending(ctx, a.tx, gid); err != nil {
		t.Fatal(err)
	}
	st, err := b.engine.StageWelcome(ctx, b.tx, out.Welcome, record(kp))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.engine.InstallWelcome(ctx, b.tx, st.Handle); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// TestProposalsByReference: b proposes an Update on its own (the engine's
// port sends none, so the test drives b's stored state with package
// group); a caches it, and its next commit includes it by reference.
// CommitOutput and b's Processed report it by reference, from b, with the
// leaf the Update brings, which is b's leaf in the next epoch.
func TestProposalsByReference(t *testing.T) {
	ctx := context.Background()
	gid := []byte("by-reference")
	a, b := pair(t, gid)
	g, err := b.engine.LoadGroup(ctx, b.tx, gid)
	if err != nil {
		t.Fatal(err)
	}
	m, err := g.ProposeUpdate(framing.WirePublicMessage)
	if err != nil {
		t.Fatal(err)
	}
	// The state goes back in the one-blob encoding, which the engine reads.
	blob, err := g.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.tx.blobs.Put(ctx, "mls.group", hex.EncodeToString(gid), blob); err != nil {
		t.Fatal(err)
	}
	proposal, _ := codec.Marshal(m)
	p, err := a.engine.Process(ctx, a.tx, gid, proposal)
	if err != nil || p.Kind != ports.ProcessedProposal || p.Epoch != 1 || p.Sender.InboxID != "inbox-b" {
		t.Fatalf("a: b's proposal: %+v %v", p, err)
	}
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{ForcePath: true})
	if err != nil {
		t.Fatal(err)
	}
	pb, err := b.engine.Process(ctx, b.tx, gid, out.Commit)
	if err != nil {
		t.Fatal(err)
	}
	for what, props := range map[string][]ports.Proposal{"CommitOutput": out.Proposals, "Processed": pb.Proposals} {
		if len(props) != 1 {
			t.Fatalf("%s: %d proposals, want 1", what, len(props))
		}
		x := props[0]
		var next ports.Member
		for _, mm := range pb.Staged.Members {
			if mm.InboxID == "inbox-b" {
				next = mm
			}
		}
		if x.Type != ports.ProposalUpdate || !x.ByReference || x.Sender.InboxID != "inbox-b" ||
			!bytes.Equal(x.Updated.EncryptionKey, next.EncryptionKey) || x.Updated.LeafIndex != next.LeafIndex {
			t.Fatalf("%s: %+v, want b's update by reference to the leaf %+v", what, x, next)
		}
	}
	if _, err := b.engine.MergeStaged(ctx, b.tx, gid); err != nil {
		t.Fatal(err)
	}
	if _, err := a.engine.MergePending(ctx, a.tx, gid); err != nil {
		t.Fatal(err)
	}
	xa, _ := a.engine.Export(ctx, a.tx, gid, "x", nil, 32)
	xb, _ := b.engine.Export(ctx, b.tx, gid, "x", nil, 32)
	if !bytes.Equal(xa, xb) {
		t.Fatal("a and b disagree after the commit of b's update")
	}
}

// TestJOIN087UnsupportedGroupContextExtension (COMP-116): a Welcome into a group whose
// context holds an extension the receiving key package's leaf does not
// advertise fails with ErrUnsupported, not ErrInvalid, so the join can
// hold it. No honest committer builds one (it checks the joiner's
// support), so the test seals it by hand from the RFC's pieces.
func TestJOIN087UnsupportedGroupContextExtension(t *testing.T) {
	ctx := context.Background()
	s := suite(t)
	a, b := newInstallation(t, "inbox-a"), newInstallation(t, "inbox-b")
	akp, bkp := a.keyPackage(t), b.keyPackage(t)
	var ak, bk message.KeyPackage
	if err := codec.Unmarshal(akp.KeyPackage, &ak); err != nil {
		t.Fatal(err)
	}
	if err := codec.Unmarshal(bkp.KeyPackage, &bk); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(bk.LeafNode.Capabilities.Extensions, 0xff7b) {
		t.Fatal("b's key package advertises the extension the test needs it to lack")
	}
	tree := ratchettree.New(s, &ak.LeafNode)
	if _, err := tree.AddLeaf(&bk.LeafNode); err != nil {
		t.Fatal(err)
	}
	th, err := tree.TreeHash()
	if err != nil {
		t.Fatal(err)
	}
	cth := make([]byte, s.HashSize())
	joiner := make([]byte, s.HashSize())
	rand.Read(cth)
	rand.Read(joiner)
	gc := message.GroupContext{Version: message.MLS10, CipherSuite: s.ID(), GroupID: []byte("unsupported-gce"), Epoch: 1,
		TreeHash: th, ConfirmedTranscriptHash: cth, Extensions: message.Extensions{{Type: 0xff7b, Data: []byte("x")}}}
	gcBytes, _ := codec.Marshal(&gc)
	epoch, err := keyschedule.FromJoiner(s, joiner, make([]byte, s.HashSize()), gcBytes)
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := codec.Marshal(tree.Export())
	gi := &message.GroupInfo{GroupContext: gc, Extensions: message.Extensions{{Type: message.ExtRatchetTree, Data: rt}},
		ConfirmationTag: keyschedule.ConfirmationTag(s, epoch.ConfirmationKey, cth), Signer: 0}
	if err := gi.Sign(s, a.sig); err != nil {
		t.Fatal(err)
	}
	w, err := welcome.Seal(s, gi, joiner, epoch.WelcomeSecret, nil, []welcome.Recipient{{KeyPackage: &bk}})
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := codec.Marshal(&framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireWelcome, Welcome: w})
	_, err = b.engine.StageWelcome(ctx, b.tx, msg, record(bkp))
	if !errors.Is(err, ports.ErrUnsupported) || errors.Is(err, ports.ErrInvalid) {
		t.Fatalf("Welcome with an unadvertised group context extension: %v, want ErrUnsupported alone", err)
	}
	// The same Welcome without the extension is staged: the refusal came
	// from the extension and nothing else.
	gc.Extensions = message.Extensions{}
	gcBytes, _ = codec.Marshal(&gc)
	epoch, _ = keyschedule.FromJoiner(s, joiner, make([]byte, s.HashSize()), gcBytes)
	gi.GroupContext, gi.ConfirmationTag = gc, keyschedule.ConfirmationTag(s, epoch.ConfirmationKey, cth)
	if err := gi.Sign(s, a.sig); err != nil {
		t.Fatal(err)
	}
	w, _ = welcome.Seal(s, gi, joiner, epoch.WelcomeSecret, nil, []welcome.Recipient{{KeyPackage: &bk}})
	msg, _ = codec.Marshal(&framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireWelcome, Welcome: w})
	if _, err := b.engine.StageWelcome(ctx, b.tx, msg, record(bkp)); err != nil {
		t.Fatalf("the same Welcome without the extension: %v", err)
	}
}
