package mlstest

import (
	"bytes"
	"context"
	"errors"

	"github.com/regroup-mls/regroup/ports"
)

var repairCases = []testCase{
	{"Inactive/ProcessAfterRemovalHasOneClass", testInactiveClasses},
	{"Restart/PendingCommitRepublishedAfterRestart", testPendingRepublished},
	{"External/GroupInfoAndExternalCommit", testExternalJoin},
	{"External/ResyncReplacesOwnLeaf", testExternalResync},
}

// testInactiveClasses (COMP-113): after a removed b, every Process failure is of
// exactly one class and names ErrInactive as its reason: a message of
// an epoch before the removal is older (b keeps no past keys once
// removed), one of the removal's epoch undecryptable, one of a later epoch
// future. b's view keeps the public epoch and the removal record.
func testInactiveClasses(e *env) {
	gid, a, b := e.twoMembers("inactive")
	late := a.encrypt(gid, "sent before b's removal", "")
	out, va := a.commitAndMerge(gid, ports.CommitOptions{Remove: []uint32{leafOf(b, a.mustView(gid))}})
	b.applyCommitRemoved(gid, out.Commit)
	vb := b.mustView(gid)
	if vb.Active || vb.Epoch != 2 || vb.Removal == nil || !bytes.Equal(vb.Removal.TreeHash, va.TreeHash) || vb.Removal.Epoch != 2 {
		e.t.Fatalf("b after its removal: active %v epoch %d removal %+v", vb.Active, vb.Epoch, vb.Removal)
	}
	same := a.encrypt(gid, "epoch 2", "")
	commit, _ := a.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	future := a.encrypt(gid, "epoch 3", "")
	_, err := b.process(gid, late)
	e.wantEpoch("a message of epoch 1 after the removal at 2", err, ports.EpochOlder, 1, 2)
	inactive(e, "older", err)
	for what, msg := range map[string][]byte{"application message": same, "commit": commit.Commit} {
		_, err = b.process(gid, msg)
		e.wantClass(what+" of the removal's epoch", err, ports.ErrUndecryptable)
		inactive(e, what, err)
	}
	_, err = b.process(gid, future)
	e.wantEpoch("a message of epoch 3", err, ports.EpochFuture, 3, 2)
	inactive(e, "future", err)
	b.unchanged("messages after the removal", gid, vb)
}

func inactive(e *env, what string, err error) {
	e.t.Helper()
	if !errors.Is(err, ports.ErrInactive) {
		e.t.Fatalf("%s: %v does not name ErrInactive as its reason", what, err)
	}
}

// applyCommitRemoved processes and merges a commit that removes m.
func (m *member) applyCommitRemoved(gid, commit []byte) {
	m.e.t.Helper()
	p, err := m.process(gid, commit)
	if err != nil || !p.RemovesSelf {
		m.e.t.Fatalf("%s: its removal: RemovesSelf %v, %v", m.name, p.RemovesSelf, err)
	}
	if v := m.mergeStaged(gid); v.Active || v.Removal == nil {
		m.e.t.Fatalf("%s: merged its removal: active %v, removal %v", m.name, v.Active, v.Removal)
	}
}

// testPendingRepublished (COMP-110): a's commit adding c is pending when a
// restarts; PendingCommit hands back the same commit, Welcome and
// GroupInfo; a publishes it again, reads it back as its own and merges
// it; b and c follow.
func testPendingRepublished(e *env) {
	gid, a, b := e.twoMembers("republish")
	c := e.newMember("c")
	kc := c.keyPackage()
	out := a.commit(gid, ports.CommitOptions{Add: [][]byte{kc.KeyPackage}})
	a.restart()
	pc, ok := a.mls.(ports.MLSPendingCommits)
	if !ok {
		e.t.Skip("engine does not implement ports.MLSPendingCommits")
	}
	var got ports.CommitOutput
	a.must("PendingCommit", func(ctx context.Context, tx ports.Tx) (err error) {
		got, err = pc.PendingCommit(ctx, tx, gid)
		return err
	})
	if !bytes.Equal(got.Commit, out.Commit) || !bytes.Equal(got.Welcome, out.Welcome) || !bytes.Equal(got.GroupInfo, out.GroupInfo) {
		e.t.Fatal("PendingCommit after a restart differs from what Commit returned")
	}
	if d := diff(out.Staged, got.Staged); d != "" || len(got.Proposals) != 1 || !bytes.Equal(got.Proposals[0].KeyPackage, kc.KeyPackage) {
		e.t.Fatalf("PendingCommit's state or proposals differ (%d proposals):\n%s", len(got.Proposals), d)
	}
	a.processOwn(gid, got)
	a.mergeStaged(gid)
	b.applyCommit(gid, got.Commit)
	c.join(got.Welcome, kc, a)
	agree(gid, 2, a, b, c)
	err := a.tx(func(ctx context.Context, tx ports.Tx) error { _, err := pc.PendingCommit(ctx, tx, gid); return err })
	if !errors.Is(err, ports.ErrNotFound) {
		e.t.Fatalf("PendingCommit after the merge: %v, want ErrNotFound", err)
	}
}

// external returns the member's engine as a [ports.MLSExternal], or skips.
func external(e *env, m *member) ports.MLSExternal {
	e.t.Helper()
	x, ok := m.mls.(ports.MLSExternal)
	if !ok {
		e.t.Skip("engine does not implement ports.MLSExternal")
	}
	return x
}

func (m *member) groupInfo(gid []byte) []byte {
	m.e.t.Helper()
	var gi []byte
	m.must("GroupInfo", func(ctx context.Context, tx ports.Tx) (err error) {
		gi, err = external(m.e, m).GroupInfo(ctx, tx, gid)
		return err
	})
	return gi
}

func (m *member) joinExternal(gi []byte, opts ports.ExternalJoinOptions) ports.CommitOutput {
	m.e.t.Helper()
	var out ports.CommitOutput
	m.must("JoinExternal", func(ctx context.Context, tx ports.Tx) (err error) {
		out, err = external(m.e, m).JoinExternal(ctx, tx, gi, opts)
		return err
	})
	return out
}

// testExternalJoin (COMP-118): c joins from a's GroupInfo by external commit; a and
// b read it as a new_member_commit whose sender is c's new leaf; all
// three agree. A GroupInfo with a flipped byte is invalid.
func testExternalJoin(e *env) {
	gid, a, b := e.twoMembers("external")
	c := e.newMember("c")
	gi := a.groupInfo(gid)
	err := c.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := external(e, c).JoinExternal(ctx, tx, flip(gi, len(gi)-1), ports.ExternalJoinOptions{KeyPackage: c.keyPackage()})
		return err
	})
	if !errors.Is(err, ports.ErrInvalid) {
		e.t.Fatalf("JoinExternal from a tampered GroupInfo: %v, want ErrInvalid", err)
	}
	out := c.joinExternal(gi, ports.ExternalJoinOptions{KeyPackage: c.keyPackage()})
	for _, m := range []*member{a, b} {
		p, err := m.process(gid, out.Commit)
		if err != nil {
			m.e.t.Fatalf("%s: Process c's external commit: %v", m.name, err)
		}
		if p.SenderType != ports.SenderNewMemberCommit || !bytes.Equal(p.Sender.SignatureKey, c.pub) || p.Sender.InboxID != c.inbox {
			e.t.Fatalf("%s: c's external commit: sender type %d, sender %x %q", m.name, p.SenderType, p.Sender.SignatureKey, p.Sender.InboxID)
		}
		m.mergeStaged(gid)
	}
	c.mergePending(gid)
	agree(gid, 2, a, b, c)
	send(gid, c, "joined from outside", a, b)
}

// testExternalResync (COMP-118): b, whose state fell behind (it missed a's commit),
// rejoins by external commit with Resync: the commit removes b's old leaf
// and adds its new one; a applies it; b's state is replaced and both
// agree.
func testExternalResync(e *env) {
	gid, a, b := e.twoMembers("resync")
	old := leafOf(b, a.mustView(gid))
	a.commitAndMerge(gid, ports.CommitOptions{ForcePath: true}) // b misses it
	out := b.joinExternal(a.groupInfo(gid), ports.ExternalJoinOptions{KeyPackage: b.keyPackage(), Resync: true})
	p, err := a.process(gid, out.Commit)
	if err != nil {
		e.t.Fatalf("a: Process b's resync: %v", err)
	}
	var removed bool
	for _, x := range p.Proposals {
		removed = removed || (x.Type == ports.ProposalRemove && x.Removed.LeafIndex == old && bytes.Equal(x.Removed.SignatureKey, b.pub))
	}
	if !removed || len(p.Staged.Members) != 2 {
		e.t.Fatalf("b's resync: proposals %+v, %d members", p.Proposals, len(p.Staged.Members))
	}
	a.mergeStaged(gid)
	b.mergePending(gid)
	agree(gid, 3, a, b)
	send(gid, b, "back in step", a)
}
