package mlstest

import (
	"bytes"
	"context"
	"errors"

	"github.com/regroup-mls/regroup/ports"
)

var lifecycleCases = []testCase{
	{"Lifecycle/TwoMembersAgreeAtEveryEpoch", testTwoMembers},
	{"Lifecycle/ThreeMembersAgreeAtEveryEpoch", testThreeMembers},
	{"Lifecycle/ForcePathAddsUpdatePath", testForcePath},
	{"Lifecycle/WelcomeNeedsItsKeyPackage", testWelcomeOtherKeyPackage},
}

// testTwoMembers: a creates the group and adds b by Welcome; both hold
// epoch 1 with equal authenticators and tree hashes; application messages
// cross both ways; b's update with a path (ForcePath) changes the tree
// and both agree on epoch 2; a removes b, b reads its removal
// (RemovesSelf), its state turns inactive and Encrypt, Commit and Export
// fail with ErrInactive.
func testTwoMembers(e *env) {
	gid, a, b := e.twoMembers("two")
	send(gid, a, "hello b", b)
	send(gid, b, "hello a", a)
	send(gid, b, "again", a)

	before := a.mustView(gid)
	out := b.commit(gid, ports.CommitOptions{ForcePath: true})
	if out.Staged.Epoch != 2 {
		e.t.Fatalf("b's commit announces epoch %d, want 2", out.Staged.Epoch)
	}
	if bytes.Equal(out.Staged.TreeHash, before.TreeHash) {
		e.t.Fatal("a commit with ForcePath left the tree hash unchanged: it carries no UpdatePath")
	}
	va := a.applyCommit(gid, out.Commit)
	vb := b.mergePending(gid)
	if d := diff(va, vb); d != "" {
		e.t.Fatalf("after b's update: %s", d)
	}
	agree(gid, 2, a, b)
	send(gid, a, "after the update", b)
	send(gid, b, "after the update too", a)

	out, _ = a.commitAndMerge(gid, ports.CommitOptions{Remove: []uint32{leafOf(b, vb)}})
	if len(out.Staged.Members) != 1 || !out.Staged.Active {
		e.t.Fatalf("a's removal of b leads to %d members (active %v), want 1", len(out.Staged.Members), out.Staged.Active)
	}
	p, err := b.process(gid, out.Commit)
	if err != nil {
		e.t.Fatalf("b: Process its removal: %v", err)
	}
	if p.Kind != ports.ProcessedCommit || !p.RemovesSelf || p.Staged == nil || p.Staged.Active {
		e.t.Fatalf("b: its removal: kind %d, RemovesSelf %v, staged active %v", p.Kind, p.RemovesSelf, p.Staged != nil && p.Staged.Active)
	}
	vb = b.mergeStaged(gid)
	if vb.Active || vb.Epoch != 3 {
		e.t.Fatalf("b after its removal: active %v at epoch %d, want inactive at 3", vb.Active, vb.Epoch)
	}
	if v := b.mustView(gid); v.Active {
		e.t.Fatal("b: Group reports the group active after b's removal")
	}
	for name, op := range map[string]func(ctx context.Context, tx ports.Tx) error{
		"Encrypt": func(ctx context.Context, tx ports.Tx) error {
			_, err := b.mls.Encrypt(ctx, tx, gid, []byte("still here?"), nil)
			return err
		},
		"Commit": func(ctx context.Context, tx ports.Tx) error {
			_, err := b.mls.Commit(ctx, tx, gid, ports.CommitOptions{ForcePath: true})
			return err
		},
		"Export": func(ctx context.Context, tx ports.Tx) error {
			_, err := b.mls.Export(ctx, tx, gid, "mlstest", nil, 32)
			return err
		},
	} {
		if err := b.tx(op); !errors.Is(err, ports.ErrInactive) {
			e.t.Errorf("b: %s after its removal: %v, want ErrInactive", name, err)
		}
	}
	if v := agree(gid, 3, a); len(v[0].Members) != 1 {
		e.t.Fatalf("a after removing b has %d members", len(v[0].Members))
	}
}

// testThreeMembers: a adds b and c in one commit; all three agree at epoch
// 1 (authenticator, tree hash, members, exported secret); c updates with a
// path and all agree at epoch 2; b sets a group context extension and all
// agree at epoch 3; a removes b, a and c agree at epoch 4 while b reads
// its removal; messages reach every member at every epoch.
func testThreeMembers(e *env) {
	gid := groupID("three")
	a, b, c := e.newMember("a"), e.newMember("b"), e.newMember("c")
	a.create(gid)
	kb, kc := b.keyPackage(), c.keyPackage()
	out, va := a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kb.KeyPackage, kc.KeyPackage}})
	if len(va.Members) != 3 {
		e.t.Fatalf("a added two members in one commit and has %d", len(va.Members))
	}
	b.join(out.Welcome, kb, a)
	c.join(out.Welcome, kc, a)
	agree(gid, 1, a, b, c)
	send(gid, a, "epoch 1 from a", b, c)
	send(gid, b, "epoch 1 from b", a, c)
	send(gid, c, "epoch 1 from c", a, b)

	out = c.commit(gid, ports.CommitOptions{ForcePath: true})
	a.applyCommit(gid, out.Commit)
	b.applyCommit(gid, out.Commit)
	c.mergePending(gid)
	agree(gid, 2, a, b, c)
	send(gid, c, "epoch 2 from c", a, b)
	send(gid, b, "epoch 2 from b", a, c)

	ext := []ports.Extension{{Type: suiteExtension, Data: []byte("set by b")}}
	out = b.commit(gid, ports.CommitOptions{GroupContextExtensions: ext})
	a.applyCommit(gid, out.Commit)
	c.applyCommit(gid, out.Commit)
	b.mergePending(gid)
	if v := agree(gid, 3, a, b, c); !hasExtension(v[0], ext[0]) {
		e.t.Fatalf("after b set a group context extension, the extensions are %v", v[0].Extensions)
	}
	send(gid, a, "epoch 3 from a", b, c)

	out, _ = a.commitAndMerge(gid, ports.CommitOptions{Remove: []uint32{leafOf(b, va)}})
	c.applyCommit(gid, out.Commit)
	p, err := b.process(gid, out.Commit)
	if err != nil || !p.RemovesSelf {
		e.t.Fatalf("b: its removal: RemovesSelf %v, %v", p.RemovesSelf, err)
	}
	if v := b.mergeStaged(gid); v.Active {
		e.t.Fatal("b is still active after its removal")
	}
	views := agree(gid, 4, a, c)
	if len(views[0].Members) != 2 || !hasExtension(views[0], ext[0]) {
		e.t.Fatalf("after removing b the group has %d members and extensions %v", len(views[0].Members), views[0].Extensions)
	}
	send(gid, a, "epoch 4 from a", c)
	send(gid, c, "epoch 4 from c", a)
	ct := a.encrypt(gid, "not for b", "")
	if _, err := b.process(gid, ct); err == nil {
		e.t.Fatal("b, removed, read a message of the epoch after its removal")
	}
}

// testForcePath: an Add needs no UpdatePath, so ForcePath is what puts one
// in: the same Add with ForcePath leads to another tree (the committer's
// leaf and its direct path are replaced) than without it, and the member
// added by it joins and agrees.
func testForcePath(e *env) {
	gid := groupID("force-path")
	a, b := e.newMember("a"), e.newMember("b")
	a.create(gid)
	kp := b.keyPackage()
	plain := a.commit(gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	a.must("ClearPending", func(ctx context.Context, tx ports.Tx) error { return a.mls.ClearPending(ctx, tx, gid) })
	withPath, _ := a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}, ForcePath: true})
	if bytes.Equal(plain.Staged.TreeHash, withPath.Staged.TreeHash) {
		e.t.Fatal("an Add with ForcePath leads to the tree of the same Add without it: no UpdatePath was included")
	}
	b.join(withPath.Welcome, kp, a)
	agree(gid, 1, a, b)
	send(gid, b, "joined by a commit with a path", a)
}

func hasExtension(v ports.GroupView, want ports.Extension) bool {
	for _, x := range v.Extensions {
		if x.Type == want.Type && bytes.Equal(x.Data, want.Data) {
			return true
		}
	}
	return false
}

// testWelcomeOtherKeyPackage: a Welcome staged with the private keys of a
// key package it was not made for fails and installs nothing; staged with
// its own key package it installs.
func testWelcomeOtherKeyPackage(e *env) {
	gid := groupID("welcome-other")
	a, b := e.newMember("a"), e.newMember("b")
	a.create(gid)
	kp, other := b.keyPackage(), b.keyPackage()
	out, _ := a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	err := b.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := b.mls.StageWelcome(ctx, tx, out.Welcome, record(other))
		return err
	})
	if err == nil {
		e.t.Fatal("StageWelcome staged a Welcome with the keys of a key package it was not made for")
	}
	if _, err := b.view(gid); !errors.Is(err, ports.ErrGroupNotFound) {
		e.t.Fatalf("Group after a refused Welcome: %v, want ErrGroupNotFound", err)
	}
	b.join(out.Welcome, kp, a)
	agree(gid, 1, a, b)
}
