package mls_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// StageWelcome reads the Welcome's bytes without keeping them (its
// encrypted GroupInfo is read in place, not copied): overwriting them
// after staging changes nothing of the staged and installed group, which
// describes the members as the creator does and goes on exchanging
// messages and commits.
func TestStagedWelcomeKeepsNothingOfTheWelcomeBytes(t *testing.T) {
	ctx := context.Background()
	gid := []byte("welcome-view")
	a, b, out, kpb, va := welcomeToB(t, gid)
	msg := append([]byte{}, out.Welcome...)
	staged, err := b.engine.StageWelcome(ctx, b.tx, msg, ports.KeyPackageRecord{Ref: kpb.Ref, KeyPackage: kpb.KeyPackage,
		InitPrivateKey: kpb.InitPrivateKey, EncryptionPrivateKey: kpb.EncryptionPrivateKey})
	if err != nil {
		t.Fatal(err)
	}
	for i := range msg {
		msg[i] = 0xa5
	}
	vb, err := b.engine.InstallWelcome(ctx, b.tx, staged.Handle)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []ports.GroupView{staged.Group, vb} {
		if v.Epoch != va.Epoch || !bytes.Equal(v.TreeHash, va.TreeHash) || len(v.Members) != len(va.Members) {
			t.Fatalf("joined view: epoch %d, %d members; the creator's: epoch %d, %d members", v.Epoch, len(v.Members), va.Epoch, len(va.Members))
		}
		for i, m := range v.Members {
			w := va.Members[i]
			if !bytes.Equal(m.SignatureKey, w.SignatureKey) || !bytes.Equal(m.EncryptionKey, w.EncryptionKey) || m.InboxID != w.InboxID {
				t.Fatalf("member %d differs from the creator's view", i)
			}
		}
	}
	ct, err := b.engine.Encrypt(ctx, b.tx, gid, []byte("hello"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := a.engine.Process(ctx, a.tx, gid, ct); err != nil || string(p.Application) != "hello" {
		t.Fatalf("application: %v", err)
	}
	commit, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{ForcePath: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.engine.MergePending(ctx, a.tx, gid); err != nil {
		t.Fatal(err)
	}
	if _, err := b.engine.Process(ctx, b.tx, gid, commit.Commit); err != nil {
		t.Fatal(err)
	}
	if _, err := b.engine.MergeStaged(ctx, b.tx, gid); err != nil {
		t.Fatal(err)
	}
}

// COMP-570: the staged and the installed view of one Welcome share one
// member list; a view after a commit describes the committer's new leaf,
// and the lists returned before keep what they described.
func TestCOMP570ViewsShareTheMemberList(t *testing.T) {
	ctx := context.Background()
	gid := []byte("shared-members")
	a, b, out, kpb, _ := welcomeToB(t, gid)
	staged, err := b.engine.StageWelcome(ctx, b.tx, out.Welcome, ports.KeyPackageRecord{Ref: kpb.Ref, KeyPackage: kpb.KeyPackage,
		InitPrivateKey: kpb.InitPrivateKey, EncryptionPrivateKey: kpb.EncryptionPrivateKey})
	if err != nil {
		t.Fatal(err)
	}
	vb, err := b.engine.InstallWelcome(ctx, b.tx, staged.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if len(vb.Members) != 3 || &vb.Members[0] != &staged.Group.Members[0] {
		t.Fatal("the staged and the installed view describe the members twice")
	}
	before := vb.Members[0]
	commit, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{ForcePath: true})
	if err != nil {
		t.Fatal(err)
	}
	va, err := a.engine.MergePending(ctx, a.tx, gid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.engine.Process(ctx, b.tx, gid, commit.Commit); err != nil {
		t.Fatal(err)
	}
	after, err := b.engine.MergeStaged(ctx, b.tx, gid)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(after.Members[0].EncryptionKey, before.EncryptionKey) || !bytes.Equal(after.Members[0].EncryptionKey, va.Members[0].EncryptionKey) {
		t.Fatal("the view after the commit does not describe the committer's new leaf")
	}
	if !bytes.Equal(vb.Members[0].EncryptionKey, before.EncryptionKey) || vb.Members[0].LeafIndex != before.LeafIndex {
		t.Fatal("a view returned before the commit changed")
	}
	for i := range after.Members {
		if after.Members[i].LeafIndex != va.Members[i].LeafIndex || after.Members[i].InboxID != va.Members[i].InboxID ||
			!bytes.Equal(after.Members[i].SignatureKey, va.Members[i].SignatureKey) {
			t.Fatalf("member %d differs from the committer's view", i)
		}
	}
}

// welcomeToB has a create the group gid and add c and b; it returns the
// commit's output (b's Welcome), b's key package and a's view after it.
func welcomeToB(t *testing.T, gid []byte) (a, b *installation, out ports.CommitOutput, kpb ports.KeyPackageBundle, va ports.GroupView) {
	t.Helper()
	ctx := context.Background()
	a, b, c := newInstallation(t, "inbox-a"), newInstallation(t, "inbox-b"), newInstallation(t, "inbox-c")
	if _, err := a.engine.CreateGroup(ctx, a.tx, gid, a.keyPackage(t), nil); err != nil {
		t.Fatal(err)
	}
	kpb = b.keyPackage(t)
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: [][]byte{c.keyPackage(t).KeyPackage, kpb.KeyPackage}})
	if err != nil {
		t.Fatal(err)
	}
	if va, err = a.engine.MergePending(ctx, a.tx, gid); err != nil {
		t.Fatal(err)
	}
	return a, b, out, kpb, va
}
