package tsmls_test

import (
	"context"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/interop/tsmls"
)

// resumeScenario starts a driver and a scenario on suite 3 with
// PrivateMessage handshakes (ts-mls's reinit and branch helpers commit so).
func resumeScenario(t *testing.T) (*tsmls.Driver, *ciphersuite.Suite, *scenario) {
	t.Helper()
	d := startDriver(t)
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	t.Cleanup(cancel)
	return d, s, &scenario{t: t, ctx: ctx, wf: framing.WirePrivateMessage}
}

// joinSuccessor has m join a reinitialized group or branch from welcome,
// with old as the predecessor.
func (m *rgMember) joinSuccessor(t *testing.T, sc *tsmls.Successor, old *group.Group) {
	t.Helper()
	w := decode(t, sc.Welcome)
	var tree message.RatchetTree
	if err := codec.Unmarshal(sc.RatchetTree, &tree); err != nil {
		t.Fatalf("ts-mls ratchet tree: %v", err)
	}
	g, err := group.Join(m.s, w.Welcome, &group.JoinOptions{KeyPackage: m.kp.KeyPackage, InitPriv: m.kp.InitPriv,
		EncryptionPriv: m.kp.EncryptionPriv, SignaturePriv: m.sigPriv, Predecessor: old, Tree: tree})
	if err != nil {
		t.Fatalf("%s joins the successor from a ts-mls Welcome: %v", m.name, err)
	}
	m.g = g
}

// regroupWithTSMLS is a group regroup's rob created and added ts-mls's
// alice to, at epoch 1.
func regroupWithTSMLS(sc *scenario, d *tsmls.Driver, s *ciphersuite.Suite, gid []byte) (*rgMember, *tsmls.Member) {
	t, ctx := sc.t, sc.ctx
	rob := newRGMember(t, s, "rob (regroup)")
	leaf := rob.kp.KeyPackage.LeafNode
	g, err := group.Create(s, &group.CreateOptions{GroupID: gid, Leaf: &leaf, EncryptionPriv: rob.kp.EncryptionPriv, SignaturePriv: rob.sigPriv})
	if err != nil {
		t.Fatal(err)
	}
	rob.g = g
	akp, err := d.NewKeyPackage(ctx, []byte("alice (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := framing.Decode(akp.KP)
	if err != nil {
		t.Fatal(err)
	}
	_, welcome := rob.commit(t, &group.CommitOptions{TreeInWelcome: true, WireFormat: sc.wf,
		Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *m.KeyPackage}}}})
	alice, err := d.Join(ctx, akp, welcome)
	if err != nil {
		t.Fatalf("ts-mls joins regroup's group: %v", err)
	}
	sc.agree("regroup added ts-mls", 1, []*rgMember{rob}, []*tsmls.Member{alice})
	return rob, alice
}

// TestInteropTSMLSReInit (RFC 9420 §11.2, §12.1.5) against ts-mls 1.6.4,
// both ways: ts-mls commits a ReInit, regroup follows and ends its group,
// ts-mls creates the successor and regroup joins it with the reinit
// resumption PSK; then regroup commits a ReInit, creates the successor and
// ts-mls joins it. Both successors are at epoch 1 with equal epoch
// authenticators and carry messages.
func TestInteropTSMLSReInit(t *testing.T) {
	d, s, sc := resumeScenario(t)
	ctx := sc.ctx

	// ts-mls reinitializes.
	alice, err := d.CreateGroup(ctx, []byte("tsmls-reinit-a"), []byte("alice (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	rob := newRGMember(t, s, "rob (regroup)")
	c, err := alice.Commit(ctx, [][]byte{rob.mlsKeyPackage(t)}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	rob.join(t, c.Welcome)
	commit, err := alice.ReInit(ctx, []byte("tsmls-reinit-a2"))
	if err != nil {
		t.Fatalf("ts-mls commits a ReInit: %v", err)
	}
	rob.handle(t, "ts-mls's ReInit", commit)
	if ri := rob.g.ReInit(); ri == nil || string(ri.GroupID) != "tsmls-reinit-a2" {
		t.Fatalf("regroup did not record ts-mls's ReInit: %+v", ri)
	}
	sc.agree("ts-mls committed a ReInit", 2, []*rgMember{rob}, []*tsmls.Member{alice})
	akp, err := d.NewKeyPackage(ctx, []byte("alice (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	rob2 := newRGMember(t, s, "rob (regroup)")
	succ, err := alice.ReInitCreate(ctx, akp, [][]byte{rob2.mlsKeyPackage(t)}, []byte("tsmls-reinit-a2"))
	if err != nil {
		t.Fatalf("ts-mls creates the successor: %v", err)
	}
	rob2.joinSuccessor(t, succ, rob.g)
	alice2 := succ.Member
	sc.agree("regroup joined ts-mls's reinitialized group", 1, []*rgMember{rob2}, []*tsmls.Member{alice2})
	sc.messages("reinitialized by ts-mls", []*rgMember{rob2}, []*tsmls.Member{alice2})

	// regroup reinitializes.
	rob, alice = regroupWithTSMLS(sc, d, s, []byte("tsmls-reinit-b"))
	ri := &message.ReInit{GroupID: []byte("tsmls-reinit-b2"), Version: message.MLS10, CipherSuite: s.ID(), Extensions: message.Extensions{}}
	commit, _ = rob.commit(t, &group.CommitOptions{WireFormat: sc.wf, Proposals: []*message.Proposal{{Type: message.ProposalReInit, ReInit: ri}}})
	if _, err := alice.Process(ctx, commit); err != nil {
		t.Fatalf("ts-mls processes regroup's ReInit: %v", err)
	}
	sc.agree("regroup committed a ReInit", 2, []*rgMember{rob}, []*tsmls.Member{alice})
	akp, err = d.NewKeyPackage(ctx, []byte("alice (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := framing.Decode(akp.KP)
	if err != nil {
		t.Fatal(err)
	}
	rob2 = newRGMember(t, s, "rob (regroup)")
	leaf := rob2.kp.KeyPackage.LeafNode
	g, w, err := rob.g.Reinitialize(&group.SuccessorOptions{Leaf: &leaf, EncryptionPriv: rob2.kp.EncryptionPriv, SignaturePriv: rob2.sigPriv,
		KeyPackages: []*message.KeyPackage{m.KeyPackage}, TreeInWelcome: true})
	if err != nil {
		t.Fatal(err)
	}
	rob2.g = g
	alice2, err = alice.JoinReInit(ctx, akp, encode(t, &framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireWelcome, Welcome: w}))
	if err != nil {
		t.Fatalf("ts-mls joins regroup's reinitialized group: %v", err)
	}
	sc.agree("ts-mls joined regroup's reinitialized group", 1, []*rgMember{rob2}, []*tsmls.Member{alice2})
	sc.messages("reinitialized by regroup", []*rgMember{rob2}, []*tsmls.Member{alice2})
}

// TestInteropTSMLSBranch (RFC 9420 §11.3) against ts-mls 1.6.4, both ways:
// each side branches a subgroup with the other's new key package and the
// other joins it with the branch resumption PSK.
func TestInteropTSMLSBranch(t *testing.T) {
	d, s, sc := resumeScenario(t)
	ctx := sc.ctx
	rob, alice := regroupWithTSMLS(sc, d, s, []byte("tsmls-branch"))

	// regroup branches.
	akp, err := d.NewKeyPackage(ctx, []byte("alice (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := framing.Decode(akp.KP)
	if err != nil {
		t.Fatal(err)
	}
	rob2 := newRGMember(t, s, "rob (regroup)")
	leaf := rob2.kp.KeyPackage.LeafNode
	g, w, err := rob.g.Branch(&group.SuccessorOptions{GroupID: []byte("tsmls-branch-r"), Extensions: message.Extensions{}, Leaf: &leaf,
		EncryptionPriv: rob2.kp.EncryptionPriv, SignaturePriv: rob2.sigPriv, KeyPackages: []*message.KeyPackage{m.KeyPackage}, TreeInWelcome: true})
	if err != nil {
		t.Fatal(err)
	}
	rob2.g = g
	alice2, err := alice.JoinBranch(ctx, akp, encode(t, &framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireWelcome, Welcome: w}))
	if err != nil {
		t.Fatalf("ts-mls joins regroup's branch: %v", err)
	}
	sc.agree("ts-mls joined regroup's branch", 1, []*rgMember{rob2}, []*tsmls.Member{alice2})
	sc.messages("branched by regroup", []*rgMember{rob2}, []*tsmls.Member{alice2})

	// ts-mls branches.
	akp, err = d.NewKeyPackage(ctx, []byte("alice (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	rob3 := newRGMember(t, s, "rob (regroup)")
	succ, err := alice.Branch(ctx, akp, [][]byte{rob3.mlsKeyPackage(t)}, []byte("tsmls-branch-t"))
	if err != nil {
		t.Fatalf("ts-mls branches: %v", err)
	}
	rob3.joinSuccessor(t, succ, rob.g)
	sc.agree("regroup joined ts-mls's branch", 1, []*rgMember{rob3}, []*tsmls.Member{succ.Member})
}
