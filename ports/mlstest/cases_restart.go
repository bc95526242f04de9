package mlstest

import (
	"context"

	"github.com/regroup-mls/regroup/ports"
)

var restartCases = []testCase{
	{"Restart/PendingCommitMergedAfterRestart", testRestartPendingMerged},
	{"Restart/PendingCommitClearedAfterRestart", testRestartPendingCleared},
	{"Restart/StagedCommitMergedAfterRestart", testRestartStaged},
	{"Restart/JoinedMemberContinuesAfterRestart", testRestartJoined},
}

// testRestartPendingMerged: a's commit adding b is pending when a's
// process restarts; the new engine merges it and b joins from its Welcome.
func testRestartPendingMerged(e *env) {
	gid := groupID("restart-pending")
	a, b := e.newMember("a"), e.newMember("b")
	a.create(gid)
	kp := b.keyPackage()
	out := a.commit(gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	a.restart()
	if v := a.mustView(gid); v.Epoch != 0 {
		e.t.Fatalf("after the restart a is at epoch %d before merging, want 0", v.Epoch)
	}
	if v := a.mergePending(gid); !sameState(out.Staged, v) {
		e.t.Fatalf("merged after the restart:\n%s", diff(out.Staged, v))
	}
	b.join(out.Welcome, kp, a)
	agree(gid, 1, a, b)
	send(gid, a, "after a's restart", b)
	send(gid, b, "to a after its restart", a)
}

// testRestartPendingCleared: a pending commit cleared after a restart
// stays cleared across another restart: merging fails and the group stays
// at its epoch; a new commit can be built, merged and applied by b.
func testRestartPendingCleared(e *env) {
	gid, a, b := e.twoMembers("restart-cleared")
	a.commit(gid, ports.CommitOptions{ForcePath: true})
	a.restart()
	a.must("ClearPending", func(ctx context.Context, tx ports.Tx) error { return a.mls.ClearPending(ctx, tx, gid) })
	a.restart()
	err := a.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := a.mls.MergePending(ctx, tx, gid)
		return err
	})
	if err == nil {
		e.t.Fatal("MergePending merged a commit cleared before the restart")
	}
	agree(gid, 1, a, b)
	out, _ := a.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	b.applyCommit(gid, out.Commit)
	agree(gid, 2, a, b)
	send(gid, b, "after the cleared commit", a)
}

// testRestartStaged: b's commit is staged at a (processed, not merged)
// when a restarts; the new engine merges the staged commit and a and b
// agree.
func testRestartStaged(e *env) {
	gid, a, b := e.twoMembers("restart-staged")
	out := b.commit(gid, ports.CommitOptions{ForcePath: true})
	p, err := a.process(gid, out.Commit)
	if err != nil || p.Staged == nil {
		e.t.Fatalf("a: Process b's commit: %v", err)
	}
	a.restart()
	if v := a.mustView(gid); v.Epoch != 1 {
		e.t.Fatalf("after the restart a is at epoch %d before merging, want 1", v.Epoch)
	}
	if v := a.mergeStaged(gid); !sameState(*p.Staged, v) {
		e.t.Fatalf("merged after the restart:\n%s", diff(*p.Staged, v))
	}
	b.mergePending(gid)
	agree(gid, 2, a, b)
	send(gid, a, "after the restart", b)
	send(gid, b, "back to a", a)
}

// testRestartJoined: b restarts right after installing the Welcome and
// keeps reading and sending, and applies a's next commit; a message it
// read before restarting stays spent (its key deleted) after it.
func testRestartJoined(e *env) {
	gid, a, b := e.twoMembers("restart-joined")
	ct := a.encrypt(gid, "sent before b's restart", "")
	b.restart()
	b.receive(gid, ct, a, "sent before b's restart", "")
	send(gid, b, "after b's restart", a)
	out, _ := a.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	b.restart()
	_, err := b.process(gid, ct)
	e.wantClass("a message read before the restart, again", err, ports.ErrUndecryptable)
	b.applyCommit(gid, out.Commit)
	agree(gid, 2, a, b)
}
