package mlstest

import (
	"context"
	"errors"

	"github.com/regroup-mls/regroup/ports"
)

var txCases = []testCase{
	{"JOIN-046/FailedTxLeavesNoGroup", testTxCreate},
	{"JOIN-046/FailedTxLeavesNoMergedCommit", testTxCommit},
	{"JOIN-046/FailedTxLeavesNoProcessedCommit", testTxProcess},
	{"JOIN-046/FailedTxLeavesNoInstalledWelcome", testTxWelcome},
	{"JOIN-046/FailedTxLeavesNoRatchetStep", testTxEncrypt},
}

// errAbort is what the cases' transactions return to roll back.
var errAbort = errors.New("mlstest: abort the transaction")

// abort runs fn in a transaction that then fails, and requires Tx to
// report fn's failure.
func (m *member) abort(step string, fn func(ctx context.Context, tx ports.Tx) error) {
	m.e.t.Helper()
	err := m.tx(func(ctx context.Context, tx ports.Tx) error {
		if err := fn(ctx, tx); err != nil {
			m.e.t.Fatalf("%s: %s: %v", m.name, step, err)
		}
		return errAbort
	})
	if !errors.Is(err, errAbort) {
		m.e.t.Fatalf("%s: a transaction whose function failed returned %v", m.name, err)
	}
}

// testTxCreate: a group created in a transaction that fails does not
// exist afterwards.
func testTxCreate(e *env) {
	a := e.newMember("a")
	gid := groupID("tx-create")
	kp := a.keyPackage()
	a.abort("CreateGroup", func(ctx context.Context, tx ports.Tx) error {
		_, err := a.mls.CreateGroup(ctx, tx, gid, kp, nil)
		return err
	})
	if _, err := a.view(gid); !errors.Is(err, ports.ErrGroupNotFound) {
		e.t.Fatalf("Group after a rolled-back CreateGroup: %v, want ErrGroupNotFound", err)
	}
	a.create(gid)
}

// testTxCommit: a commit built and merged in a transaction that fails
// leaves the group at its epoch with nothing pending; the next commit
// works and b applies it.
func testTxCommit(e *env) {
	gid, a, b := e.twoMembers("tx-commit")
	before := a.mustView(gid)
	a.abort("Commit and MergePending", func(ctx context.Context, tx ports.Tx) error {
		if _, err := a.mls.Commit(ctx, tx, gid, ports.CommitOptions{ForcePath: true}); err != nil {
			return err
		}
		_, err := a.mls.MergePending(ctx, tx, gid)
		return err
	})
	if v := a.mustView(gid); !sameState(before, v) {
		e.t.Fatalf("a rolled-back merge changed the group:\n%s", diff(before, v))
	}
	if err := a.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := a.mls.MergePending(ctx, tx, gid)
		return err
	}); err == nil {
		e.t.Fatal("MergePending merged a commit built in a rolled-back transaction")
	}
	out, _ := a.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	b.applyCommit(gid, out.Commit)
	agree(gid, 2, a, b)
}

// testTxProcess: b's commit processed and merged in a transaction that
// fails leaves a at its epoch, and the same commit then applies.
func testTxProcess(e *env) {
	gid, a, b := e.twoMembers("tx-process")
	out := b.commit(gid, ports.CommitOptions{ForcePath: true})
	before := a.mustView(gid)
	a.abort("Process and MergeStaged", func(ctx context.Context, tx ports.Tx) error {
		if _, err := a.mls.Process(ctx, tx, gid, out.Commit); err != nil {
			return err
		}
		_, err := a.mls.MergeStaged(ctx, tx, gid)
		return err
	})
	if v := a.mustView(gid); !sameState(before, v) {
		e.t.Fatalf("a rolled-back Process and merge changed the group:\n%s", diff(before, v))
	}
	a.applyCommit(gid, out.Commit)
	b.mergePending(gid)
	agree(gid, 2, a, b)
}

// testTxWelcome: a Welcome staged and installed in a transaction that
// fails leaves no group; staging it again installs it.
func testTxWelcome(e *env) {
	gid := groupID("tx-welcome")
	a, b := e.newMember("a"), e.newMember("b")
	a.create(gid)
	kp := b.keyPackage()
	out, _ := a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	b.abort("StageWelcome and InstallWelcome", func(ctx context.Context, tx ports.Tx) error {
		st, err := b.mls.StageWelcome(ctx, tx, out.Welcome, record(kp))
		if err != nil {
			return err
		}
		_, err = b.mls.InstallWelcome(ctx, tx, st.Handle)
		return err
	})
	if _, err := b.view(gid); !errors.Is(err, ports.ErrGroupNotFound) {
		e.t.Fatalf("Group after a rolled-back InstallWelcome: %v, want ErrGroupNotFound", err)
	}
	b.join(out.Welcome, kp, a)
	agree(gid, 1, a, b)
}

// testTxEncrypt: an application message encrypted in a transaction that
// fails leaves the sender's ratchet where it was, also in an engine that
// keeps state between calls: the next message takes the same key, so b,
// having read that message, cannot open the rolled-back one. An engine
// that kept the rolled-back step would have moved to the next key and
// left the rolled-back message readable.
func testTxEncrypt(e *env) {
	gid, a, b := e.twoMembers("tx-encrypt")
	var aborted []byte
	a.abort("Encrypt", func(ctx context.Context, tx ports.Tx) (err error) {
		aborted, err = a.mls.Encrypt(ctx, tx, gid, []byte("rolled back"), nil)
		return err
	})
	send(gid, a, "after the rollback", b)
	_, err := b.process(gid, aborted)
	e.wantClass("the rolled-back message, whose key the next one used", err, ports.ErrUndecryptable)
	send(gid, b, "back to a", a)
}
