package mlstest

import (
	"bytes"
	"context"
	"errors"

	"github.com/regroup-mls/regroup/ports"
)

var clientCases = []testCase{
	{"Own/OwnCommitReadBackIsStagedAndMerged", testOwnCommit},
	{"Own/OtherWinnerIsMergedAfterClearPending", testOtherWinner},
	{"FORK-073/OwnCommitWithoutPendingIsWrongEpochEqual", testOwnWithoutPending},
	{"FORK-062/ReaddCommitRemovesSelf", testReadd},
	{"Process/MergeStagedMergesOnlyTheLastProcess", testMergeOnlyLast},
	{"CreateGroup/ExistingGroupIsAlreadyExists", testCreateExisting},
	{"Process/LateMessageReportsItsEpoch", testLateEpoch},
	{"Members/CarryCredentialCapabilitiesAndKeys", testMembers},
	{"Process/CommitReportsItsProposals", testProposals},
}

// processOwn processes the member's own commit read back from the topic
// and requires the engine to recognise it.
func (m *member) processOwn(gid []byte, out ports.CommitOutput) ports.Processed {
	m.e.t.Helper()
	p, err := m.process(gid, out.Commit)
	if err != nil {
		m.e.t.Fatalf("%s: Process of its own commit read back: %v", m.name, err)
	}
	if p.Kind != ports.ProcessedCommit || !p.Own || p.Staged == nil {
		m.e.t.Fatalf("%s: its own commit: kind %d, Own %v, staged %v", m.name, p.Kind, p.Own, p.Staged != nil)
	}
	if d := diff(out.Staged, *p.Staged); d != "" {
		m.e.t.Fatalf("%s: own commit staged another state than Commit announced:\n%s", m.name, d)
	}
	return p
}

// testOwnCommit (COMP-110): a's commit, published and read back from the topic, is
// its own: Process stages it (Own) and MergeStaged merges it, so the
// client records its winning commit as applied rather than rejected
// (FORK-002); b applies the same commit and both agree.
func testOwnCommit(e *env) {
	gid, a, b := e.twoMembers("own")
	out := a.commit(gid, ports.CommitOptions{ForcePath: true})
	p := a.processOwn(gid, out)
	if p.Epoch != 1 || p.SenderType != ports.SenderMember || !bytes.Equal(p.Sender.SignatureKey, a.pub) {
		e.t.Fatalf("own commit: epoch %d, sender type %d, sender %x; want 1, member, a", p.Epoch, p.SenderType, p.Sender.SignatureKey)
	}
	if v := a.mergeStaged(gid); !sameState(out.Staged, v) {
		e.t.Fatalf("a merged its own staged commit into another state:\n%s", diff(out.Staged, v))
	}
	b.applyCommit(gid, out.Commit)
	agree(gid, 2, a, b)
	send(gid, a, "after my own commit", b)
	err := a.tx(func(ctx context.Context, tx ports.Tx) error { _, err := a.mls.MergePending(ctx, tx, gid); return err })
	if err == nil {
		e.t.Fatal("MergePending found a pending commit after its merge through MergeStaged")
	}
}

// testOtherWinner (COMP-110): a's commit loses to b's: a processes b's commit while
// its own is pending, clears its own and merges b's; a's own commit, read
// after, is of an older epoch.
func testOtherWinner(e *env) {
	gid, a, b := e.twoMembers("other-winner")
	mine := a.commit(gid, ports.CommitOptions{ForcePath: true})
	winner, _ := b.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	p, err := a.process(gid, winner.Commit)
	if err != nil || p.Own || p.Staged == nil {
		e.t.Fatalf("a: Process of b's winning commit while its own is pending: Own %v, %v", p.Own, err)
	}
	a.must("ClearPending", func(ctx context.Context, tx ports.Tx) error { return a.mls.ClearPending(ctx, tx, gid) })
	a.mergeStaged(gid)
	agree(gid, 2, a, b)
	_, err = a.process(gid, mine.Commit)
	e.wantEpoch("a's losing commit read after the winner", err, ports.EpochOlder, 1, 2)
}

// testOwnWithoutPending (FORK-073, COMP-111): a's own commit of the current epoch, read back
// after a cleared it (or replaced it with another), cannot be applied by
// a while b applies it: Process reports it as a wrong-epoch failure of
// relation equal (FORK-073 keeps that as a divergence signal).
func testOwnWithoutPending(e *env) {
	gid, a, _ := e.twoMembers("own-cleared")
	first := a.commit(gid, ports.CommitOptions{ForcePath: true})
	a.must("ClearPending", func(ctx context.Context, tx ports.Tx) error { return a.mls.ClearPending(ctx, tx, gid) })
	before := a.mustView(gid)
	_, err := a.process(gid, first.Commit)
	e.wantEpoch("own commit read back after ClearPending", err, ports.EpochEqual, 1, 1)
	a.commit(gid, ports.CommitOptions{ForcePath: true})
	_, err = a.process(gid, first.Commit)
	e.wantEpoch("own cleared commit read back while another is pending", err, ports.EpochEqual, 1, 1)
	a.unchanged("its own commit without its pending state", gid, before)
	var pe *ports.ProcessError
	if !errors.As(err, &pe) || pe.MessageEpoch != 1 {
		e.t.Fatalf("the failure carries no message epoch: %v", err)
	}
}

// testReadd (FORK-062, FORK-089, JOIN-042, COMP-112): a removes b's leaf and adds b back with a new key package in
// one commit (FORK-062). b reads it as removing itself, turns inactive
// with a removal record of that commit's epoch and tree hash, and the
// Welcome of the same commit names that epoch and tree hash (JOIN-042);
// installing it over the inactive state needs an explicit replacement.
func testReadd(e *env) {
	gid, a, b := e.twoMembers("readd")
	va := a.mustView(gid)
	old := leafOf(b, va)
	kp := b.keyPackage()
	out, va := a.commitAndMerge(gid, ports.CommitOptions{Remove: []uint32{old}, Add: [][]byte{kp.KeyPackage}})
	requireReaddProposals(e, "a's CommitOutput", out.Proposals, b, old, kp)
	p, err := b.process(gid, out.Commit)
	if err != nil {
		e.t.Fatalf("b: Process of the readd commit: %v", err)
	}
	if !p.RemovesSelf || p.Staged == nil || p.Staged.Active {
		e.t.Fatalf("b: the readd commit: RemovesSelf %v, staged active %v", p.RemovesSelf, p.Staged != nil && p.Staged.Active)
	}
	requireReaddProposals(e, "b's Processed", p.Proposals, b, old, kp)
	vb := b.mergeStaged(gid)
	for _, v := range []ports.GroupView{vb, b.mustView(gid)} {
		if v.Active || v.Epoch != 2 || v.Removal == nil {
			e.t.Fatalf("b after the readd commit: active %v epoch %d removal %v, want inactive at 2 with a removal record", v.Active, v.Epoch, v.Removal)
		}
		if v.Removal.Leaf != old || v.Removal.Epoch != va.Epoch || !bytes.Equal(v.Removal.TreeHash, va.TreeHash) || v.OwnLeaf != old {
			e.t.Fatalf("b's removal record %+v (own leaf %d), want leaf %d epoch %d tree hash %x", *v.Removal, v.OwnLeaf, old, va.Epoch, va.TreeHash)
		}
	}
	st := b.stage(out.Welcome, kp)
	if st.Group.Epoch != vb.Removal.Epoch || !bytes.Equal(st.Group.TreeHash, vb.Removal.TreeHash) {
		e.t.Fatalf("the readd Welcome names epoch %d tree hash %x, the removal record %d %x", st.Group.Epoch, st.Group.TreeHash, vb.Removal.Epoch, vb.Removal.TreeHash)
	}
	err = b.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := b.mls.InstallWelcome(ctx, tx, st.Handle)
		return err
	})
	if !errors.Is(err, ports.ErrAlreadyExists) {
		e.t.Fatalf("InstallWelcome over the held inactive state: %v, want ErrAlreadyExists", err)
	}
	w := welcomes(e, b)
	var v ports.GroupView
	b.must("InstallWelcomeWith Replace", func(ctx context.Context, tx ports.Tx) (err error) {
		v, err = w.InstallWelcomeWith(ctx, tx, st.Handle, ports.InstallOptions{Replace: true})
		return err
	})
	if !v.Active || v.Removal != nil {
		e.t.Fatalf("b after the readd Welcome: active %v, removal %v", v.Active, v.Removal)
	}
	agree(gid, 2, a, b)
	send(gid, a, "welcome back", b)
	send(gid, b, "glad to be back", a)
}

// requireReaddProposals requires props to remove b's old leaf and add b
// with kp.
func requireReaddProposals(e *env, what string, props []ports.Proposal, b *member, old uint32, kp ports.KeyPackageBundle) {
	e.t.Helper()
	var removed, added bool
	for _, p := range props {
		switch p.Type {
		case ports.ProposalRemove:
			removed = p.Removed.LeafIndex == old && bytes.Equal(p.Removed.SignatureKey, b.pub) && p.Removed.InboxID == b.inbox
		case ports.ProposalAdd:
			added = bytes.Equal(p.KeyPackage, kp.KeyPackage) && bytes.Equal(p.Added.SignatureKey, b.pub) && p.Added.InboxID == b.inbox
		}
	}
	if len(props) != 2 || !removed || !added {
		e.t.Fatalf("%s: proposals %+v, want the removal of b's leaf %d and the add of b's new key package", what, props, old)
	}
}

// testMergeOnlyLast (COMP-114): a processes b's commit and rejects it (does not
// merge); a tampered commit then fails; MergeStaged has nothing to merge,
// since only the commit of the last Process, which failed, may be merged.
func testMergeOnlyLast(e *env) {
	gid, a, b := e.twoMembers("merge-last")
	out := b.commit(gid, ports.CommitOptions{ForcePath: true})
	if _, err := a.process(gid, out.Commit); err != nil {
		e.t.Fatalf("a: Process b's commit: %v", err)
	}
	before := a.mustView(gid)
	_, err := a.process(gid, flip(out.Commit, len(out.Commit)-1))
	e.wantClass("tampered commit", err, ports.ErrInvalid)
	err = a.tx(func(ctx context.Context, tx ports.Tx) error { _, err := a.mls.MergeStaged(ctx, tx, gid); return err })
	if !errors.Is(err, ports.ErrNotFound) {
		e.t.Fatalf("MergeStaged after a failed Process: %v, want ErrNotFound", err)
	}
	a.unchanged("MergeStaged after a failed Process", gid, before)
	a.applyCommit(gid, out.Commit)
	b.mergePending(gid)
	agree(gid, 2, a, b)
}

// testCreateExisting (COMP-118): creating a group the engine already holds fails with
// ErrAlreadyExists and leaves the group, and its pending commit, as they
// were.
func testCreateExisting(e *env) {
	gid, a, b := e.twoMembers("create-twice")
	pending := a.commit(gid, ports.CommitOptions{ForcePath: true})
	before := a.mustView(gid)
	kp := a.keyPackage()
	err := a.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := a.mls.CreateGroup(ctx, tx, gid, kp, nil)
		return err
	})
	if !errors.Is(err, ports.ErrAlreadyExists) {
		e.t.Fatalf("CreateGroup of a held group: %v, want ErrAlreadyExists", err)
	}
	a.unchanged("CreateGroup of a held group", gid, before)
	a.mergePending(gid)
	b.applyCommit(gid, pending.Commit)
	agree(gid, 2, a, b)
}

// testLateEpoch (COMP-117): an application message b sent at epoch 1 reaches a after
// a removed b at epoch 2: a reads it from its kept past epoch and
// Processed names epoch 1 and b, so the caller can tell a message from
// before the removal.
func testLateEpoch(e *env) {
	if !e.caps.BoundedPastEpochs || e.caps.PastEpochs < 1 {
		e.t.Skip("harness does not declare Caps.BoundedPastEpochs with PastEpochs >= 1: late messages are not read")
	}
	gid, a, b := e.twoMembers("late-epoch")
	late := b.encrypt(gid, "sent at epoch 1", "")
	now := b.encrypt(gid, "also at epoch 1", "")
	p, err := a.process(gid, now)
	if err != nil || p.Epoch != 1 {
		e.t.Fatalf("a: a message of the current epoch 1: epoch %d, %v", p.Epoch, err)
	}
	a.commitAndMerge(gid, ports.CommitOptions{Remove: []uint32{leafOf(b, a.mustView(gid))}})
	p, err = a.process(gid, late)
	if err != nil {
		e.t.Fatalf("a: b's late message: %v", err)
	}
	if p.Epoch != 1 || p.Kind != ports.ProcessedApplication || !bytes.Equal(p.Sender.SignatureKey, b.pub) || p.SenderType != ports.SenderMember {
		e.t.Fatalf("a: b's late message: epoch %d, kind %d, sender %x type %d; want epoch 1 from b", p.Epoch, p.Kind, p.Sender.SignatureKey, p.SenderType)
	}
}

// testMembers: members carry their raw basic credential, the capabilities
// their key package advertised, their leaf extensions and their
// encryption key; b's update with a path changes b's encryption key and
// not a's.
func testMembers(e *env) {
	gid, a, b := e.twoMembers("members")
	check := func(v ports.GroupView) map[string][]byte {
		keys := map[string][]byte{}
		for _, mm := range v.Members {
			var who *member
			for _, x := range []*member{a, b} {
				if bytes.Equal(mm.SignatureKey, x.pub) {
					who = x
				}
			}
			if who == nil {
				e.t.Fatalf("member %d is neither a nor b", mm.LeafIndex)
			}
			if mm.CredentialType != 1 || !bytes.Equal(mm.Credential, who.credential()) {
				e.t.Fatalf("%s: credential type %d identity %x, want basic %x", who.name, mm.CredentialType, mm.Credential, who.credential())
			}
			if !containsU16(mm.Capabilities.Extensions, suiteExtension) || !containsU16(mm.Capabilities.Credentials, 1) || len(mm.Capabilities.CipherSuites) == 0 {
				e.t.Fatalf("%s: capabilities %+v do not advertise what its key package did", who.name, mm.Capabilities)
			}
			if len(mm.EncryptionKey) == 0 {
				e.t.Fatalf("%s: no encryption key", who.name)
			}
			keys[who.name] = mm.EncryptionKey
		}
		return keys
	}
	before := check(a.mustView(gid))
	if bytes.Equal(before["a"], before["b"]) {
		e.t.Fatal("a and b report the same encryption key")
	}
	out := b.commit(gid, ports.CommitOptions{ForcePath: true})
	a.applyCommit(gid, out.Commit)
	b.mergePending(gid)
	after := check(b.mustView(gid))
	if bytes.Equal(after["b"], before["b"]) || !bytes.Equal(after["a"], before["a"]) {
		e.t.Fatal("b's update with a path did not change b's encryption key alone")
	}
}

func containsU16(s []uint16, v uint16) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// testProposals: a commit's proposals reach the members who process it
// and the committer's CommitOutput: a group context extension set by b,
// and c's add with its key package.
func testProposals(e *env) {
	gid, a, b := e.twoMembers("proposals")
	ext := []ports.Extension{{Type: suiteExtension, Data: []byte("by b")}}
	out := b.commit(gid, ports.CommitOptions{GroupContextExtensions: ext})
	p, err := a.process(gid, out.Commit)
	if err != nil {
		e.t.Fatal(err)
	}
	for what, props := range map[string][]ports.Proposal{"Processed": p.Proposals, "CommitOutput": out.Proposals} {
		if len(props) != 1 || props[0].Type != ports.ProposalGroupContextExtensions || props[0].ByReference ||
			!bytes.Equal(props[0].Sender.SignatureKey, b.pub) || props[0].SenderType != ports.SenderMember ||
			len(props[0].Extensions) != 1 || props[0].Extensions[0].Type != suiteExtension || string(props[0].Extensions[0].Data) != "by b" {
			e.t.Fatalf("%s of b's extension commit: %+v", what, props)
		}
	}
	a.mergeStaged(gid)
	b.mergePending(gid)
	c := e.newMember("c")
	kc := c.keyPackage()
	out, _ = a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kc.KeyPackage}})
	p, err = b.process(gid, out.Commit)
	if err != nil {
		e.t.Fatal(err)
	}
	vc := c.join(out.Welcome, kc, a)
	for what, props := range map[string][]ports.Proposal{"Processed": p.Proposals, "CommitOutput": out.Proposals} {
		if len(props) != 1 || props[0].Type != ports.ProposalAdd || !bytes.Equal(props[0].KeyPackage, kc.KeyPackage) ||
			!bytes.Equal(props[0].Added.SignatureKey, c.pub) || props[0].Added.InboxID != c.inbox ||
			props[0].Added.LeafIndex != vc.OwnLeaf || !bytes.Equal(props[0].Sender.SignatureKey, a.pub) {
			e.t.Fatalf("%s of a's add of c: %+v", what, props)
		}
	}
	b.mergeStaged(gid)
	agree(gid, 3, a, b, c)
}
