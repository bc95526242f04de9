package mlstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// PublicHarness gives the suite of [ports.PublicGroups] a validator next
// to the engines whose groups it follows. The engines must implement
// [ports.MLSExternal]: the suite opens public states from their GroupInfo
// and joins by external commit.
type PublicHarness interface {
	Harness
	// MakePublic returns the validator under test, checking key package
	// lifetimes against the system clock.
	MakePublic(t *testing.T) (ports.PublicGroups, error)
}

// RunPublic runs the contract of [ports.PublicGroups] (COMP-309 to
// COMP-314): a public state opened from a creator's GroupInfo follows
// adds, removes, updates, a readd, a group context extension change and
// external commits made by real members, equal after every commit to
// every member's view (epoch, tree hash, extensions and members); each
// commit's GroupInfo checks against it; and forged or foreign input is
// refused with its reason: a bad signature, a non-member sender, a
// PrivateMessage, a wrong epoch, an invalid leaf node, a wrong parent
// hash, a GroupInfo of another epoch, tampered or carrying another tree,
// and garbage, never with a panic.
func RunPublic(t *testing.T, newHarness func(t *testing.T) PublicHarness) {
	for _, c := range publicCases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			if h.Caps().Parallel {
				t.Parallel()
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			pub, err := h.MakePublic(t)
			if err != nil {
				t.Fatalf("make validator: %v", err)
			}
			c.run(&publicEnv{env: &env{t: t, ctx: ctx, h: h, caps: h.Caps()}, pub: pub, ph: h})
		})
	}
}

type publicCase struct {
	name string
	run  func(e *publicEnv)
}

var publicCases = []publicCase{
	{"COMP-309/PublicStateFollowsEveryKindOfCommit", testPublicFollows},
	{"COMP-310/BadSignatureIsRefused", testPublicBadSignature},
	{"COMP-310/NonMemberSenderIsRefused", testPublicNonMember},
	{"COMP-310/PrivateMessageIsRefused", testPublicPrivateMessage},
	{"COMP-310/WrongEpochIsRefused", testPublicWrongEpoch},
	{"COMP-310/InvalidPathLeafIsRefused", testPublicInvalidPathLeaf},
	{"COMP-311/ExpiredKeyPackageIsRefused", testPublicExpiredKeyPackage},
	{"COMP-310/WrongParentHashIsRefused", testPublicWrongParentHash},
	{"COMP-313/GroupInfoOfAnotherEpochIsRefused", testPublicGroupInfoEpoch},
	{"COMP-313/TamperedGroupInfoIsRefused", testPublicGroupInfoTampered},
	{"COMP-313/GroupInfoWithAnotherTreeIsRefused", testPublicGroupInfoTree},
	{"COMP-312/GarbageIsRefusedNeverPanics", testPublicGarbage},
}

// publicEnv is one case's harness and validator.
type publicEnv struct {
	*env
	pub ports.PublicGroups
	ph  PublicHarness
}

// fresh returns a new validator, which holds nothing of earlier calls: a
// state it reads, it reads from the bytes alone, as after a restart.
func (e *publicEnv) fresh() ports.PublicGroups {
	e.t.Helper()
	pub, err := e.ph.MakePublic(e.t)
	if err != nil {
		e.t.Fatalf("make validator: %v", err)
	}
	return pub
}

// applyBoth applies a commit that must pass with the case's validator and
// with a fresh one, which must compute the same next state, byte for byte.
func (e *publicEnv) applyBoth(step string, st ports.PublicState, commit []byte) ports.PublicCommit {
	e.t.Helper()
	pc := e.apply(step, st, commit)
	again, err := e.fresh().Apply(e.ctx, st.State, commit)
	if err != nil {
		e.t.Fatalf("%s: Apply by a fresh validator: %v", step, err)
	}
	if !bytes.Equal(again.Next.State, pc.Next.State) {
		e.t.Fatalf("%s: a fresh validator computes another next state from the same state bytes", step)
	}
	return pc
}

// open opens the public state of the group from m's GroupInfo and
// requires it to equal m's view.
func (e *publicEnv) open(gid []byte, m *member) ports.PublicState {
	e.t.Helper()
	st, err := e.pub.Open(e.ctx, m.groupInfo(gid))
	if err != nil {
		e.t.Fatalf("Open %s's GroupInfo: %v", m.name, err)
	}
	e.same("opened", st.View, m)
	return st
}

// same requires the public view v to describe what every member ms holds:
// epoch, tree hash, extensions and members, without any secret.
func (e *publicEnv) same(step string, v ports.GroupView, ms ...*member) {
	e.t.Helper()
	if len(v.EpochAuthenticator) != 0 || v.Active || v.OwnLeaf != ports.NoLeaf {
		e.t.Fatalf("%s: public view holds epoch authenticator %x, active %v, own leaf %d", step, v.EpochAuthenticator, v.Active, v.OwnLeaf)
	}
	for _, m := range ms {
		mv := m.mustView(v.GroupID)
		pv := v
		pv.EpochAuthenticator, pv.Active = mv.EpochAuthenticator, mv.Active
		if d := diff(pv, mv); d != "" {
			e.t.Fatalf("%s: public state and %s's view differ:\n%s", step, m.name, d)
		}
	}
}

// apply applies a commit that must pass and returns the result.
func (e *publicEnv) apply(step string, st ports.PublicState, commit []byte) ports.PublicCommit {
	e.t.Helper()
	pc, err := e.pub.Apply(e.ctx, st.State, commit)
	if err != nil {
		e.t.Fatalf("%s: Apply: %v", step, err)
	}
	if pc.Epoch != st.View.Epoch || pc.Next.View.Epoch != st.View.Epoch+1 {
		e.t.Fatalf("%s: Apply reports epoch %d, next %d; the state is at %d", step, pc.Epoch, pc.Next.View.Epoch, st.View.Epoch)
	}
	return pc
}

// refused requires err to be a refusal with reason.
func (e *publicEnv) refused(step string, err error, reason string) {
	e.t.Helper()
	if err == nil {
		e.t.Fatalf("%s: accepted, want a refusal (%s)", step, reason)
	}
	var r *ports.PublicRefusal
	if !errors.As(err, &r) || !errors.Is(err, ports.ErrPublicRefused) || !errors.Is(err, ports.ErrInvalid) {
		e.t.Fatalf("%s: %v is no *ports.PublicRefusal", step, err)
	}
	if r.Reason != reason {
		e.t.Fatalf("%s: refused as %q (%v), want %q", step, r.Reason, err, reason)
	}
}

// checkGroupInfo requires CheckGroupInfo to accept gi for st.
func (e *publicEnv) checkGroupInfo(step string, st ports.PublicState, gi []byte) {
	e.t.Helper()
	if err := e.pub.CheckGroupInfo(e.ctx, st.State, gi); err != nil {
		e.t.Fatalf("%s: CheckGroupInfo of the epoch's GroupInfo: %v", step, err)
	}
}

// testPublicFollows (COMP-309): the public state opened from the creator's
// GroupInfo follows every kind of commit real members make and equals
// each member's view after each: adds (one, then two at once), an update
// with a path, a removal, a readd, a group context extension, an external
// join and a resync by external commit. Each commit's GroupInfo checks
// against the state it leads to, and Apply names the committer and the
// proposals.
func testPublicFollows(e *publicEnv) {
	gid := groupID("public-follows")
	a, b, c, d := e.newMember("a"), e.newMember("b"), e.newMember("c"), e.newMember("d")
	a.create(gid)
	st := e.open(gid, a)
	step := func(name string, committer *member, out ports.CommitOutput, proposals int, others ...*member) {
		e.t.Helper()
		pc := e.applyBoth(name, st, out.Commit)
		if !bytes.Equal(pc.Sender.SignatureKey, committer.pub) || pc.Sender.InboxID != committer.inbox {
			e.t.Fatalf("%s: Apply names committer %x %q, want %s", name, pc.Sender.SignatureKey, pc.Sender.InboxID, committer.name)
		}
		if len(pc.Proposals) != proposals {
			e.t.Fatalf("%s: Apply reports %d proposals, want %d", name, len(pc.Proposals), proposals)
		}
		for _, m := range others {
			m.applyCommit(gid, out.Commit)
		}
		st = pc.Next
		e.same(name, st.View, append([]*member{committer}, others...)...)
		e.checkGroupInfo(name, st, out.GroupInfo)
	}
	kb := b.keyPackage()
	out, _ := a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kb.KeyPackage}})
	step("add b", a, out, 1)
	b.join(out.Welcome, kb, a)
	kc, kd := c.keyPackage(), d.keyPackage()
	out, _ = a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kc.KeyPackage, kd.KeyPackage}})
	step("add c and d", a, out, 2, b)
	c.join(out.Welcome, kc, a)
	d.join(out.Welcome, kd, a)
	out, _ = b.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	step("update b", b, out, 0, a, c, d)
	out, _ = c.commitAndMerge(gid, ports.CommitOptions{Remove: []uint32{leafOf(a, a.mustView(gid))}})
	a.applyCommitRemoved(gid, out.Commit)
	step("c removes a", c, out, 1, b, d)
	kd2 := d.keyPackage()
	out, _ = b.commitAndMerge(gid, ports.CommitOptions{Remove: []uint32{leafOf(d, b.mustView(gid))}, Add: [][]byte{kd2.KeyPackage}})
	d.applyCommitRemoved(gid, out.Commit)
	step("b readds d", b, out, 2, c)
	w := welcomes(e.env, d)
	st2 := d.stage(out.Welcome, kd2)
	d.must("InstallWelcomeWith Replace", func(ctx context.Context, tx ports.Tx) error {
		_, err := w.InstallWelcomeWith(ctx, tx, st2.Handle, ports.InstallOptions{Replace: true})
		return err
	})
	e.same("d back", st.View, b, c, d)
	ext := []ports.Extension{{Type: suiteExtension, Data: []byte("public")}}
	out, _ = c.commitAndMerge(gid, ports.CommitOptions{GroupContextExtensions: ext})
	step("c sets an extension", c, out, 1, b, d)
	if fmt.Sprint(st.View.Extensions) != fmt.Sprint(ext) {
		e.t.Fatalf("extensions %v after the change, want %v", st.View.Extensions, ext)
	}
	j := e.newMember("j")
	out = j.joinExternal(d.groupInfo(gid), ports.ExternalJoinOptions{KeyPackage: j.keyPackage()})
	pc := e.applyBoth("j joins by external commit", st, out.Commit)
	if pc.SenderType != ports.SenderNewMemberCommit || !bytes.Equal(pc.Sender.SignatureKey, j.pub) || pc.Sender.InboxID != j.inbox {
		e.t.Fatalf("external commit: sender type %d, sender %x %q, want j's new leaf", pc.SenderType, pc.Sender.SignatureKey, pc.Sender.InboxID)
	}
	for _, m := range []*member{b, c, d} {
		m.applyCommit(gid, out.Commit)
	}
	j.mergePending(gid)
	st = pc.Next
	e.same("j joined", st.View, b, c, d, j)
	e.checkGroupInfo("j joined", st, out.GroupInfo)
	out = c.joinExternal(b.groupInfo(gid), ports.ExternalJoinOptions{KeyPackage: c.keyPackage(), Resync: true})
	pc = e.applyBoth("c resyncs", st, out.Commit)
	if len(pc.Proposals) != 2 {
		e.t.Fatalf("resync: %d proposals, want ExternalInit and the Remove of c's old leaf", len(pc.Proposals))
	}
	for _, m := range []*member{b, d, j} {
		m.applyCommit(gid, out.Commit)
	}
	c.mergePending(gid)
	st = pc.Next
	e.same("c resynced", st.View, b, c, d, j)
	e.checkGroupInfo("c resynced", st, out.GroupInfo)
}

// commitAt builds a group of a and b at epoch 1 with its public state,
// and a's pending commit of opts for epoch 1.
func (e *publicEnv) commitAt(label string, opts ports.CommitOptions) (gid []byte, a, b *member, st ports.PublicState, out ports.CommitOutput) {
	e.t.Helper()
	gid = groupID(label)
	a, b = e.newMember("a"), e.newMember("b")
	a.create(gid)
	st = e.open(gid, a)
	kb := b.keyPackage()
	add, _ := a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kb.KeyPackage}})
	st = e.apply("add b", st, add.Commit).Next
	b.join(add.Welcome, kb, a)
	return gid, a, b, st, a.commit(gid, opts)
}

// forge parses a commit for changing, or fails the case.
func (e *publicEnv) forge(commit []byte) *publicCommit {
	e.t.Helper()
	p, err := parseCommit(commit)
	if err != nil {
		e.t.Fatalf("parse the commit to forge: %v", err)
	}
	return p
}

// stillApplies requires the genuine commit to pass after a refusal: a
// refusal changed nothing.
func (e *publicEnv) stillApplies(st ports.PublicState, commit []byte) {
	e.t.Helper()
	e.apply("the genuine commit after the refusal", st, commit)
}

// testPublicBadSignature (COMP-310): a commit whose signature has a
// flipped byte is refused with reason signature.
func testPublicBadSignature(e *publicEnv) {
	_, _, _, st, out := e.commitAt("public-signature", ports.CommitOptions{ForcePath: true})
	p := e.forge(out.Commit)
	p.b[p.sigEnd-1] ^= 0x01
	_, err := e.pub.Apply(e.ctx, st.State, p.b)
	e.refused("a commit with a flipped signature byte", err, ports.RefusedSignature)
	e.stillApplies(st, out.Commit)
}

// testPublicNonMember (COMP-310): a commit naming a blank leaf as its
// sender is refused with reason sender; one naming another member's leaf
// fails that member's signature key.
func testPublicNonMember(e *publicEnv) {
	gid, _, b, st, out := e.commitAt("public-sender", ports.CommitOptions{})
	p := e.forge(out.Commit)
	if p.leafIndex < 0 {
		e.t.Fatal("a's commit has no member sender")
	}
	copy(p.b[p.leafIndex:], []byte{0, 0, 0, 7})
	_, err := e.pub.Apply(e.ctx, st.State, p.b)
	e.refused("a commit from blank leaf 7", err, ports.RefusedSender)
	p = e.forge(out.Commit)
	bl := leafOf(b, b.mustView(gid))
	copy(p.b[p.leafIndex:], []byte{byte(bl >> 24), byte(bl >> 16), byte(bl >> 8), byte(bl)})
	_, err = e.pub.Apply(e.ctx, st.State, p.b)
	e.refused("a's commit claiming b's leaf", err, ports.RefusedSignature)
	e.stillApplies(st, out.Commit)
}

// testPublicPrivateMessage (COMP-310): the validator reads PublicMessage
// commits only: an application message (a PrivateMessage) is refused
// with reason sender.
func testPublicPrivateMessage(e *publicEnv) {
	gid, a, _, st, _ := e.commitAt("public-private", ports.CommitOptions{})
	a.must("ClearPending", func(ctx context.Context, tx ports.Tx) error { return a.mls.ClearPending(ctx, tx, gid) })
	_, err := e.pub.Apply(e.ctx, st.State, a.encrypt(gid, "hello", ""))
	e.refused("an application message", err, ports.RefusedSender)
}

// testPublicWrongEpoch (COMP-310): a commit applied again to the state it
// led to is of an older epoch, and a commit of the next epoch applied to
// the state before it of a future one; both are refused with reason epoch
// and a *ports.WrongEpochError naming both epochs.
func testPublicWrongEpoch(e *publicEnv) {
	gid, a, b, st, out := e.commitAt("public-epoch", ports.CommitOptions{ForcePath: true})
	a.mergePending(gid)
	b.applyCommit(gid, out.Commit)
	next := e.apply("a's update", st, out.Commit).Next
	want := func(step string, err error, rel ports.EpochRelation, msg, grp uint64) {
		e.t.Helper()
		e.refused(step, err, ports.RefusedEpoch)
		var we *ports.WrongEpochError
		if !errors.As(err, &we) || we.Relation != rel || we.MessageEpoch != msg || we.GroupEpoch != grp {
			e.t.Fatalf("%s: %v, want a *ports.WrongEpochError %s %d %d", step, err, rel, msg, grp)
		}
	}
	_, err := e.pub.Apply(e.ctx, next.State, out.Commit)
	want("the commit again on the state it led to", err, ports.EpochOlder, 1, 2)
	later, _ := b.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	_, err = e.pub.Apply(e.ctx, st.State, later.Commit)
	want("a commit of epoch 2 on the state of epoch 1", err, ports.EpochFuture, 2, 1)
}

// testPublicInvalidPathLeaf (COMP-310): a commit whose path leaf carries
// a bad signature (the message itself signed again, so that only the
// leaf is wrong) is refused with reason leaf-node.
func testPublicInvalidPathLeaf(e *publicEnv) {
	_, a, _, st, out := e.commitAt("public-leaf", ports.CommitOptions{ForcePath: true})
	p := e.forge(out.Commit)
	if p.pathLeaf < 0 {
		e.t.Fatal("a's ForcePath commit has no path")
	}
	p.b[p.leafSigEnd-1] ^= 0x01
	p.resign(a.sig, e.groupContext(a, st))
	_, err := e.pub.Apply(e.ctx, st.State, p.b)
	e.refused("a path leaf with a bad signature", err, ports.RefusedLeafNode)
	e.stillApplies(st, out.Commit)
}

// groupContext returns the serialized group context of st's epoch, from
// a GroupInfo of m's for it.
func (e *publicEnv) groupContext(m *member, st ports.PublicState) []byte {
	e.t.Helper()
	var gi []byte
	err := m.tx(func(ctx context.Context, tx ports.Tx) (err error) {
		gi, err = external(m.e, m).GroupInfo(ctx, tx, st.View.GroupID)
		return err
	})
	if err != nil {
		e.t.Fatalf("%s: GroupInfo: %v", m.name, err)
	}
	gc, err := groupContextOf(gi)
	if err != nil {
		e.t.Fatal(err)
	}
	return gc
}

// testPublicExpiredKeyPackage (COMP-311): a commit adding a key package
// whose lifetime ended a day ago is refused with reason leaf-node.
func testPublicExpiredKeyPackage(e *publicEnv) {
	c := e.newMember("c")
	opts := c.keyPackageOptions()
	opts.NotBefore, opts.NotAfter = time.Now().Add(-72*time.Hour), time.Now().Add(-24*time.Hour)
	kp, err := c.mls.CreateKeyPackage(e.ctx, opts)
	if err != nil {
		e.t.Fatalf("CreateKeyPackage: %v", err)
	}
	_, _, _, st, out := e.commitAt("public-expired", ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	_, err = e.pub.Apply(e.ctx, st.State, out.Commit)
	e.refused("a commit adding an expired key package", err, ports.RefusedLeafNode)
}

// testPublicWrongParentHash (COMP-310): a commit whose path leaf carries a
// changed parent hash, the leaf and the message signed again by the
// committer, is refused with reason parent-hash.
func testPublicWrongParentHash(e *publicEnv) {
	gid, a, _, st, out := e.commitAt("public-parent-hash", ports.CommitOptions{ForcePath: true})
	p := e.forge(out.Commit)
	if p.pathLeaf < 0 || p.parentEnd <= p.parentHashStart {
		e.t.Fatal("a's ForcePath commit has no path leaf with a parent hash")
	}
	p.b[p.parentHashStart] ^= 0x01
	p.resignLeaf(a.sig, leafOf(a, a.mustView(gid)))
	p.resign(a.sig, e.groupContext(a, st))
	_, err := e.pub.Apply(e.ctx, st.State, p.b)
	e.refused("a path leaf with a wrong parent hash", err, ports.RefusedParentHash)
	e.stillApplies(st, out.Commit)
}

// testPublicGroupInfoEpoch (COMP-313): the GroupInfo of epoch 1 does not
// check against the state of epoch 2, nor the reverse: reason group-info,
// with a *ports.WrongEpochError naming both epochs.
func testPublicGroupInfoEpoch(e *publicEnv) {
	gid, a, _, st, out := e.commitAt("public-gi-epoch", ports.CommitOptions{ForcePath: true})
	old := a.groupInfo(gid)
	e.checkGroupInfo("epoch 1", st, old)
	next := e.apply("a's update", st, out.Commit).Next
	want := func(step string, err error, rel ports.EpochRelation, msg, grp uint64) {
		e.t.Helper()
		e.refused(step, err, ports.RefusedGroupInfo)
		var we *ports.WrongEpochError
		if !errors.As(err, &we) || we.Relation != rel || we.MessageEpoch != msg || we.GroupEpoch != grp {
			e.t.Fatalf("%s: %v, want a *ports.WrongEpochError %s %d %d", step, err, rel, msg, grp)
		}
	}
	want("the GroupInfo of epoch 1 on the state of epoch 2", e.pub.CheckGroupInfo(e.ctx, next.State, old), ports.EpochOlder, 1, 2)
	want("the GroupInfo of epoch 2 on the state of epoch 1", e.pub.CheckGroupInfo(e.ctx, st.State, out.GroupInfo), ports.EpochFuture, 2, 1)
	e.checkGroupInfo("epoch 2", next, out.GroupInfo)
}

// testPublicGroupInfoTampered (COMP-313): a GroupInfo with a flipped
// signature byte neither opens a state nor checks against one.
func testPublicGroupInfoTampered(e *publicEnv) {
	gid, a, _, st, _ := e.commitAt("public-gi-tampered", ports.CommitOptions{})
	gi := a.groupInfo(gid)
	bad := flip(gi, len(gi)-1)
	e.refused("CheckGroupInfo of a tampered GroupInfo", e.pub.CheckGroupInfo(e.ctx, st.State, bad), ports.RefusedSignature)
	_, err := e.pub.Open(e.ctx, bad)
	e.refused("Open of a tampered GroupInfo", err, ports.RefusedSignature)
}

// testPublicGarbage (COMP-312): garbage, truncated messages and truncated
// states never panic: messages are refused as malformed (or by a later
// check when the prefix happens to decode), states fail with
// ports.ErrPublicState.
func testPublicGarbage(e *publicEnv) {
	gid, a, _, st, out := e.commitAt("public-garbage", ports.CommitOptions{ForcePath: true})
	gi := a.groupInfo(gid)
	for _, junk := range [][]byte{nil, {0}, []byte("not an MLS message"), out.Commit[:len(out.Commit)/2], gi[:len(gi)-40]} {
		_, err := e.pub.Apply(e.ctx, st.State, junk)
		e.refused(fmt.Sprintf("Apply of %d bytes of junk", len(junk)), err, ports.RefusedMalformed)
		_, err = e.pub.Open(e.ctx, junk)
		e.refused(fmt.Sprintf("Open of %d bytes of junk", len(junk)), err, ports.RefusedMalformed)
		e.refused(fmt.Sprintf("CheckGroupInfo of %d bytes of junk", len(junk)), e.pub.CheckGroupInfo(e.ctx, st.State, junk), ports.RefusedMalformed)
	}
	for _, junk := range [][]byte{nil, {1}, st.State[:len(st.State)/2], append(append([]byte(nil), st.State...), 0)} {
		if _, err := e.pub.Apply(e.ctx, junk, out.Commit); !errors.Is(err, ports.ErrPublicState) || ports.RefusalReason(err) != "" {
			e.t.Fatalf("Apply on a state of %d junk bytes: %v, want ErrPublicState and no refusal", len(junk), err)
		}
	}
	e.stillApplies(st, out.Commit)
}

// testPublicGroupInfoTree (COMP-313): a GroupInfo of the state's epoch,
// signed by its member, whose ratchet_tree (and other extensions) come
// from the next epoch's GroupInfo is refused with reason tree-hash; the
// same GroupInfo rebuilt with its own extensions and signed again checks.
func testPublicGroupInfoTree(e *publicEnv) {
	gid, a, _, st, out := e.commitAt("public-gi-tree", ports.CommitOptions{ForcePath: true})
	gc, ext, tag, signer, err := groupInfoParts(a.groupInfo(gid))
	if err != nil {
		e.t.Fatal(err)
	}
	_, nextExt, _, _, err := groupInfoParts(out.GroupInfo)
	if err != nil {
		e.t.Fatal(err)
	}
	if bytes.Equal(ext, nextExt) {
		e.t.Fatal("the two epochs' GroupInfo extensions are the same")
	}
	e.checkGroupInfo("the GroupInfo signed again", st, signGroupInfo(a.sig, gc, ext, tag, signer))
	e.refused("a GroupInfo carrying the next epoch's tree", e.pub.CheckGroupInfo(e.ctx, st.State, signGroupInfo(a.sig, gc, nextExt, tag, signer)), ports.RefusedTreeHash)
}
