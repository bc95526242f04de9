package mlstest

import (
	"context"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

var failureCases = []testCase{
	{"FORK-073/OlderEpochCommitIsWrongEpochOlder", testOlderEpoch},
	{"FORK-073/FutureEpochMessageIsWrongEpochFuture", testFutureEpoch},
	{"Process/GarbledPrivateMessageIsUndecryptable", testGarbled},
	{"Process/ReplayedApplicationMessageIsUndecryptable", testReplay},
	{"Process/MessageOfForkedGroupIsUndecryptable", testForked},
	{"Process/BadMembershipTagIsInvalid", testBadTag},
	{"Process/UnknownGroupIsGroupNotFound", testUnknownGroup},
	{"Process/UnknownProtocolVersionIsInvalid", testUnknownVersion},
	{"Process/GarbageNeverPanicsAndChangesNothing", testGarbage},
}

// classes are the failure classes of Process.
var classes = []error{ports.ErrWrongEpoch, ports.ErrUndecryptable, ports.ErrInvalid}

// classOf returns the one class err wraps, or an error saying why it is
// not exactly one. A *WrongEpochError must carry the relation its epoch
// numbers imply.
func classOf(err error) (error, error) {
	var found []error
	for _, c := range classes {
		if errors.Is(err, c) {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("error %q wraps %d of ErrWrongEpoch, ErrUndecryptable, ErrInvalid, want exactly one", err, len(found))
	}
	if found[0] == ports.ErrWrongEpoch {
		var we *ports.WrongEpochError
		if !errors.As(err, &we) {
			return nil, fmt.Errorf("error %q wraps ErrWrongEpoch but is no *ports.WrongEpochError", err)
		}
		want := ports.EpochEqual
		switch {
		case we.MessageEpoch < we.GroupEpoch:
			want = ports.EpochOlder
		case we.MessageEpoch > we.GroupEpoch:
			want = ports.EpochFuture
		}
		if we.Relation != want {
			return nil, fmt.Errorf("message epoch %d against group epoch %d reported as %s, want %s", we.MessageEpoch, we.GroupEpoch, we.Relation, want)
		}
	}
	return found[0], nil
}

// wantClass requires err to wrap exactly the class want.
func (e *env) wantClass(step string, err, want error) {
	e.t.Helper()
	if err == nil {
		e.t.Fatalf("%s: Process succeeded, want an error wrapping %v", step, want)
	}
	got, why := classOf(err)
	if why != nil {
		e.t.Fatalf("%s: %v", step, why)
	}
	if got != want {
		e.t.Fatalf("%s: error %q is %v, want %v", step, err, got, want)
	}
}

// wantEpoch requires err to be a *WrongEpochError with these fields,
// inside a *ProcessError carrying the message epoch (COMP-117).
func (e *env) wantEpoch(step string, err error, rel ports.EpochRelation, msgEpoch, groupEpoch uint64) {
	e.t.Helper()
	e.wantClass(step, err, ports.ErrWrongEpoch)
	var we *ports.WrongEpochError
	errors.As(err, &we)
	if we.Relation != rel || we.MessageEpoch != msgEpoch || we.GroupEpoch != groupEpoch {
		e.t.Fatalf("%s: %s message epoch %d group epoch %d, want %s %d %d", step, we.Relation, we.MessageEpoch, we.GroupEpoch, rel, msgEpoch, groupEpoch)
	}
	var pe *ports.ProcessError
	if !errors.As(err, &pe) || pe.MessageEpoch != msgEpoch {
		e.t.Fatalf("%s: the failure is no *ports.ProcessError carrying message epoch %d: %v", step, msgEpoch, err)
	}
}

// unchanged requires m's view of the group to equal before.
func (m *member) unchanged(step string, gid []byte, before ports.GroupView) {
	m.e.t.Helper()
	if v := m.mustView(gid); !sameState(before, v) || v.Active != before.Active {
		m.e.t.Fatalf("%s: %s changed the group:\n%s", m.name, step, diff(before, v))
	}
}

// flip returns msg with the byte at i inverted.
func flip(msg []byte, i int) []byte {
	out := append([]byte(nil), msg...)
	out[i] ^= 0xff
	return out
}

// testOlderEpoch: a commit replayed after it was applied, and the losing
// commit of a race (built for the epoch the winner left), are wrong-epoch
// failures with relation older and the two epoch numbers; neither
// changes the group.
func testOlderEpoch(e *env) {
	gid, a, b := e.twoMembers("older")
	first := b.commit(gid, ports.CommitOptions{ForcePath: true})
	a.applyCommit(gid, first.Commit)
	b.mergePending(gid)
	before := a.mustView(gid)
	_, err := a.process(gid, first.Commit)
	e.wantEpoch("replayed commit of epoch 1 at epoch 2", err, ports.EpochOlder, 1, 2)
	a.unchanged("a replayed commit", gid, before)

	winner := a.commit(gid, ports.CommitOptions{ForcePath: true})
	loser := b.commit(gid, ports.CommitOptions{ForcePath: true})
	a.mergePending(gid)
	b.must("ClearPending", func(ctx context.Context, tx ports.Tx) error { return b.mls.ClearPending(ctx, tx, gid) })
	b.applyCommit(gid, winner.Commit)
	before = a.mustView(gid)
	_, err = a.process(gid, loser.Commit)
	e.wantEpoch("losing commit of epoch 2 at epoch 3", err, ports.EpochOlder, 2, 3)
	a.unchanged("a losing commit", gid, before)
	agree(gid, 3, a, b)
}

// testFutureEpoch: b, one epoch behind, gets a's second commit before its
// first, and an application message of that later epoch: both are
// wrong-epoch failures with relation future; b then applies the commits in
// order and catches up.
func testFutureEpoch(e *env) {
	gid, a, b := e.twoMembers("future")
	first, _ := a.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	second, _ := a.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	app := a.encrypt(gid, "from epoch 3", "")
	before := b.mustView(gid)
	_, err := b.process(gid, second.Commit)
	e.wantEpoch("commit of epoch 2 at epoch 1", err, ports.EpochFuture, 2, 1)
	_, err = b.process(gid, app)
	e.wantEpoch("application message of epoch 3 at epoch 1", err, ports.EpochFuture, 3, 1)
	b.unchanged("future messages", gid, before)
	b.applyCommit(gid, first.Commit)
	b.applyCommit(gid, second.Commit)
	b.receive(gid, app, a, "from epoch 3", "")
	agree(gid, 3, a, b)
}

// testGarbled: a PrivateMessage whose ciphertext was altered is
// undecryptable, and the failure does not spend the message's key.
func testGarbled(e *env) {
	gid, a, b := e.twoMembers("garbled")
	ct := a.encrypt(gid, "intact", "aad")
	before := b.mustView(gid)
	_, err := b.process(gid, flip(ct, len(ct)-1))
	e.wantClass("PrivateMessage with its last ciphertext byte flipped", err, ports.ErrUndecryptable)
	b.unchanged("a garbled message", gid, before)
	b.receive(gid, ct, a, "intact", "aad")
}

// testReplay: an application message decrypts once; its key is then
// deleted (RFC 9420 §9.2), so the same message again is undecryptable.
func testReplay(e *env) {
	gid, a, b := e.twoMembers("replay")
	ct := a.encrypt(gid, "once", "")
	b.receive(gid, ct, a, "once", "")
	_, err := b.process(gid, ct)
	e.wantClass("the same application message again", err, ports.ErrUndecryptable)
	send(gid, a, "the next one", b)
}

// testForked: a PrivateMessage of another group under the same group id
// and epoch (a fork: same id, other keys) is undecryptable; a commit of
// that fork fails with one class; neither changes the group.
func testForked(e *env) {
	gid, a, b := e.twoMembers("forked")
	c := e.newMember("c")
	c.create(gid)
	c.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	ct := c.encrypt(gid, "from the fork", "")
	before := b.mustView(gid)
	_, err := b.process(gid, ct)
	e.wantClass("PrivateMessage of a forked group at the same epoch", err, ports.ErrUndecryptable)
	fork := c.commit(gid, ports.CommitOptions{ForcePath: true})
	_, err = b.process(gid, fork.Commit)
	if err == nil {
		e.t.Fatal("b staged a commit of a forked group at its epoch")
	}
	if _, why := classOf(err); why != nil {
		e.t.Fatalf("commit of a forked group at the same epoch: %v", why)
	}
	b.unchanged("messages of a fork", gid, before)
	send(gid, a, "still fine", b)
}

// testBadTag: b's commit with its membership tag altered is invalid and
// changes nothing; the intact commit then applies.
func testBadTag(e *env) {
	gid, a, b := e.twoMembers("bad-tag")
	out := b.commit(gid, ports.CommitOptions{ForcePath: true})
	before := a.mustView(gid)
	_, err := a.process(gid, flip(out.Commit, len(out.Commit)-1))
	e.wantClass("commit with its membership tag's last byte flipped", err, ports.ErrInvalid)
	a.unchanged("a commit with a bad membership tag", gid, before)
	a.applyCommit(gid, out.Commit)
	b.mergePending(gid)
	agree(gid, 2, a, b)
}

// testUnknownGroup: every operation on a group the engine holds no state
// for fails with ErrGroupNotFound.
func testUnknownGroup(e *env) {
	gid, a, _ := e.twoMembers("known")
	ct := a.encrypt(gid, "for members only", "")
	c := e.newMember("c")
	ops := map[string]func(ctx context.Context, tx ports.Tx) error{
		"Group": func(ctx context.Context, tx ports.Tx) error { _, err := c.mls.Group(ctx, tx, gid); return err },
		"Process": func(ctx context.Context, tx ports.Tx) error {
			_, err := c.mls.Process(ctx, tx, gid, ct)
			return err
		},
		"Encrypt": func(ctx context.Context, tx ports.Tx) error {
			_, err := c.mls.Encrypt(ctx, tx, gid, []byte("x"), nil)
			return err
		},
		"Commit": func(ctx context.Context, tx ports.Tx) error {
			_, err := c.mls.Commit(ctx, tx, gid, ports.CommitOptions{ForcePath: true})
			return err
		},
		"Export": func(ctx context.Context, tx ports.Tx) error {
			_, err := c.mls.Export(ctx, tx, gid, "x", nil, 32)
			return err
		},
		"MergePending": func(ctx context.Context, tx ports.Tx) error { _, err := c.mls.MergePending(ctx, tx, gid); return err },
		"MergeStaged":  func(ctx context.Context, tx ports.Tx) error { _, err := c.mls.MergeStaged(ctx, tx, gid); return err },
	}
	for name, op := range ops {
		if err := c.tx(op); !errors.Is(err, ports.ErrGroupNotFound) {
			e.t.Errorf("%s on an unknown group: %v, want ErrGroupNotFound", name, err)
		}
	}
}

// testUnknownVersion: an application message and a commit whose MLSMessage
// version is not mls10 (RFC 9420 §6) are invalid and change nothing.
func testUnknownVersion(e *env) {
	if !e.caps.RejectsUnknownVersion {
		e.t.Skip("harness does not declare Caps.RejectsUnknownVersion: the engine processes an MLSMessage whatever its version field says")
	}
	gid, a, b := e.twoMembers("version")
	ct := a.encrypt(gid, "intact", "")
	out, _ := a.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	before := b.mustView(gid)
	for what, msg := range map[string][]byte{"application message": ct, "commit": out.Commit} {
		bad := append([]byte{0x00, 0x02}, msg[2:]...)
		_, err := b.process(gid, bad)
		e.wantClass(what+" of version 2", err, ports.ErrInvalid)
	}
	b.unchanged("messages of an unknown version", gid, before)
	b.receive(gid, ct, a, "intact", "")
	b.applyCommit(gid, out.Commit)
	agree(gid, 2, a, b)
}
