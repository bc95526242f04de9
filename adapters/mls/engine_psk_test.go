package mls_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/ports"
)

// TestJOIN027_WelcomeWithPSKs: a Welcome whose GroupSecrets name a PSK is
// reported with HasPSKs and nothing is staged.
func TestJOIN027_WelcomeWithPSKs(t *testing.T) {
	ctx := context.Background()
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	a, b := newInstallation(t, "inbox-a"), newInstallation(t, "inbox-b")
	kpa, kpb := a.keyPackage(t), b.keyPackage(t)
	var ka, kb message.KeyPackage
	_ = codec.Unmarshal(kpa.KeyPackage, &ka)
	_ = codec.Unmarshal(kpb.KeyPackage, &kb)
	store := group.MapPSKStore{"psk": []byte("secret")}
	g, err := group.Create(s, &group.CreateOptions{GroupID: []byte("g"), Leaf: &ka.LeafNode, EncryptionPriv: kpa.EncryptionPrivateKey, SignaturePriv: a.sig, PSKs: store})
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.Commit(&group.CommitOptions{TreeInWelcome: true, Proposals: []*message.Proposal{
		{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: kb}},
		{Type: message.ProposalPreSharedKey, PreSharedKey: &message.PreSharedKey{PSK: message.PreSharedKeyID{Type: message.PSKExternal, ID: []byte("psk"), Nonce: make([]byte, 32)}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := codec.Marshal(&framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireWelcome, Welcome: p.Welcome})
	staged, err := b.engine.StageWelcome(ctx, b.tx, w, ports.KeyPackageRecord{KeyPackage: kpb.KeyPackage, InitPrivateKey: kpb.InitPrivateKey, EncryptionPrivateKey: kpb.EncryptionPrivateKey})
	if err != nil || !staged.HasPSKs || staged.Handle != "" {
		t.Fatalf("welcome with a PSK: %+v %v", staged, err)
	}
}

// TestEngineRestart: a new Engine over the same blobs continues the group.
func TestEngineRestart(t *testing.T) {
	ctx := context.Background()
	a := newInstallation(t, "inbox-a")
	gid := []byte("restart")
	if _, err := a.engine.CreateGroup(ctx, a.tx, gid, a.keyPackage(t), nil); err != nil {
		t.Fatal(err)
	}
	before, _ := a.engine.Export(ctx, a.tx, gid, "l", nil, 16)
	again, err := mls.New(mls.Options{SignaturePrivateKey: a.sig})
	if err != nil {
		t.Fatal(err)
	}
	after, err := again.Export(ctx, a.tx, gid, "l", nil, 16)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("state lost across restart: %v", err)
	}
	if _, err := again.Commit(ctx, a.tx, gid, ports.CommitOptions{ForcePath: true}); err != nil {
		t.Fatal(err)
	}
	// The pending commit is stored too: a third engine merges it.
	third, _ := mls.New(mls.Options{SignaturePrivateKey: a.sig})
	v, err := third.MergePending(ctx, a.tx, gid)
	if err != nil || v.Epoch != 1 {
		t.Fatalf("merge after restart: %v", err)
	}
}
