package tsmls_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
	"github.com/regroup-mls/regroup/interop/tsmls"
)

// joinExternal has m join by an external commit from a GroupInfo
// MLSMessage, removing its own earlier leaf when resync is set.
func (m *rgMember) joinExternal(t *testing.T, groupInfo []byte, resync *treemath.LeafIndex) []byte {
	t.Helper()
	gi := decode(t, groupInfo)
	if gi.GroupInfo == nil {
		t.Fatalf("wire format %d is not a GroupInfo", gi.WireFormat)
	}
	leaf := m.kp.KeyPackage.LeafNode
	g, commit, err := group.JoinExternal(m.s, &group.ExternalJoinOptions{GroupInfo: gi.GroupInfo, Leaf: &leaf,
		SignaturePriv: m.sigPriv, Resync: resync})
	if err != nil {
		t.Fatalf("%s joins by external commit: %v", m.name, err)
	}
	m.g = g
	return encode(t, commit)
}

// TestInteropTSMLSExternalAndUpdate plays external commits and Update
// proposals between regroup and ts-mls 1.6.4 on suite 3, with regroup's
// handshakes as PublicMessage and as PrivateMessage: regroup joins a
// ts-mls group by external commit, ts-mls joins by external commit from
// regroup's GroupInfo, ts-mls commits regroup's Update proposal (regroup
// installs its new leaf key), regroup commits a ts-mls Add proposal by
// reference, and regroup resyncs by an external commit that removes its
// old leaf; the epoch authenticators agree at every epoch
// and application messages go every way.
func TestInteropTSMLSExternalAndUpdate(t *testing.T) {
	d := startDriver(t)
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	for _, public := range []bool{true, false} {
		name := map[bool]string{true: "PublicMessage", false: "PrivateMessage"}[public]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
			defer cancel()
			sc := &scenario{t: t, ctx: ctx, public: public, wf: framing.WirePrivateMessage}
			if public {
				sc.wf = framing.WirePublicMessage
			}
			sc.runExternal(d, s, []byte("tsmls-external-"+name))
		})
	}
}

func (sc *scenario) runExternal(d *tsmls.Driver, s *ciphersuite.Suite, groupID []byte) {
	t, ctx := sc.t, sc.ctx
	alice, err := d.CreateGroup(ctx, groupID, []byte("alice (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	// 1. regroup joins the ts-mls group by external commit.
	gi, err := alice.GroupInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rob := newRGMember(t, s, "rob (regroup)")
	commit := rob.joinExternal(t, gi, nil)
	if p, err := alice.Process(ctx, commit); err != nil || p.Kind != "handshake" {
		t.Fatalf("ts-mls processes regroup's external commit: %+v %v", p, err)
	}
	sc.agree("regroup joined by external commit", 1, []*rgMember{rob}, []*tsmls.Member{alice})
	sc.messages("epoch 1", []*rgMember{rob}, []*tsmls.Member{alice})

	// 2. ts-mls joins by external commit from regroup's GroupInfo.
	rgi, err := rob.g.GroupInfo(true)
	if err != nil {
		t.Fatal(err)
	}
	tess, commit, err := d.ExternalJoin(ctx, encode(t, &framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireGroupInfo, GroupInfo: rgi}), []byte("tess (ts-mls)"))
	if err != nil {
		t.Fatalf("ts-mls joins by external commit from regroup's GroupInfo: %v", err)
	}
	rob.handle(t, "ts-mls external commit", commit)
	if _, err := alice.Process(ctx, commit); err != nil {
		t.Fatal(err)
	}
	everyone := []*tsmls.Member{alice, tess}
	sc.agree("ts-mls joined by external commit", 2, []*rgMember{rob}, everyone)
	sc.messages("epoch 2", []*rgMember{rob}, everyone)

	// 3. regroup proposes an Update; ts-mls commits it (by reference, with
	// a path) and regroup installs its new leaf key.
	oldKey := rob.g.Tree().Leaf(rob.g.Leaf()).EncryptionKey
	prop, err := rob.g.ProposeUpdate(sc.wf)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range everyone {
		if _, err := m.Process(ctx, encode(t, prop)); err != nil {
			t.Fatalf("ts-mls caches regroup's Update: %v", err)
		}
	}
	c, err := alice.Commit(ctx, nil, nil, sc.public)
	if err != nil {
		t.Fatalf("ts-mls commits regroup's Update: %v", err)
	}
	sc.checkPath("ts-mls commits the update", c.Commit)
	rob.handle(t, "ts-mls commits the update", c.Commit)
	if _, err := tess.Process(ctx, c.Commit); err != nil {
		t.Fatal(err)
	}
	if string(rob.g.Tree().Leaf(rob.g.Leaf()).EncryptionKey) == string(oldKey) {
		t.Fatal("regroup's leaf kept its encryption key after the committed Update")
	}
	sc.agree("ts-mls committed regroup's update", 3, []*rgMember{rob}, everyone)
	sc.messages("epoch 3", []*rgMember{rob}, everyone)
	// The next commit by ts-mls encrypts to regroup's new leaf key.
	c, err = alice.Commit(ctx, nil, nil, sc.public)
	if err != nil {
		t.Fatal(err)
	}
	rob.handle(t, "ts-mls path commit to the updated leaf", c.Commit)
	if _, err := tess.Process(ctx, c.Commit); err != nil {
		t.Fatal(err)
	}
	sc.agree("ts-mls path commit after the update", 4, []*rgMember{rob}, everyone)

	// 4. ts-mls proposes adding a second regroup member; regroup commits
	// the proposal by reference and the newcomer joins from its Welcome.
	rae := newRGMember(t, s, "rae (regroup)")
	tprop, err := tess.ProposeAdd(ctx, rae.mlsKeyPackage(t), sc.public)
	if err != nil {
		t.Fatalf("ts-mls proposes an add: %v", err)
	}
	if err := rob.g.HandleProposal(decode(t, tprop)); err != nil {
		t.Fatalf("regroup caches ts-mls's proposal: %v", err)
	}
	if _, err := alice.Process(ctx, tprop); err != nil {
		t.Fatal(err)
	}
	commit, welcome := rob.commit(t, &group.CommitOptions{WireFormat: sc.wf, TreeInWelcome: true})
	for _, m := range everyone {
		if _, err := m.Process(ctx, commit); err != nil {
			t.Fatalf("ts-mls processes the commit of its proposal by reference: %v", err)
		}
	}
	rae.join(t, welcome)
	sc.agree("regroup committed ts-mls's add by reference", 5, []*rgMember{rob, rae}, everyone)
	sc.messages("epoch 5", []*rgMember{rob, rae}, everyone)

	// 5. regroup resyncs: an external commit that removes its old leaf.
	gi, err = tess.GroupInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := rob.g.Leaf()
	commit = rob.joinExternal(t, gi, &old)
	for _, m := range everyone {
		if _, err := m.Process(ctx, commit); err != nil {
			t.Fatalf("ts-mls processes regroup's resync: %v", err)
		}
	}
	rae.handle(t, "regroup resync", commit)
	sc.agree("regroup resynced", 6, []*rgMember{rob, rae}, everyone)
	st, err := alice.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Members) != 4 {
		t.Fatalf("members after the resync: %v", st.Members)
	}
	sc.messages("epoch 6", []*rgMember{rob, rae}, everyone)
}

// TestTSMLSBareExternalPub records a deviation of ts-mls 1.6.4: its own
// GroupInfo carries external_pub as a bare key instead of the ExternalPub
// struct of RFC 9420 §12.4.3.2, and regroup rejects it as invalid rather
// than guessing (the driver re-signs GroupInfos with the RFC encoding).
func TestTSMLSBareExternalPub(t *testing.T) {
	d := startDriver(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := d.CreateGroup(ctx, []byte("bare-external-pub"), []byte("alice (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	native, err := alice.NativeGroupInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gi := decode(t, native).GroupInfo
	data, ok := gi.Extensions.Find(message.ExtExternalPub)
	if !ok || len(data) != 32 {
		t.Fatalf("ts-mls external_pub of %d bytes; if ts-mls now writes the RFC struct, drop the driver's re-signing", len(data))
	}
	rob := newRGMember(t, s, "rob (regroup)")
	leaf := rob.kp.KeyPackage.LeafNode
	if _, _, err := group.JoinExternal(s, &group.ExternalJoinOptions{GroupInfo: gi, Leaf: &leaf, SignaturePriv: rob.sigPriv}); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("external join from a bare external_pub: %v, want ErrInvalid", err)
	}
}
