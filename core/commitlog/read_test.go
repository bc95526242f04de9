package commitlog_test

import (
	"crypto/ed25519"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// withOperator gives the client a transport the test's operator controls.
func withOperator(op **operator) func(*commitlog.Options) {
	return func(o *commitlog.Options) {
		*op = &operator{Transport: o.Transport, scale: 10}
		o.Transport = *op
	}
}

// hostileGroup: a is the publisher, b the reader behind an operator, c a
// plain member.
func hostileGroup(t *testing.T, readerOpts ...func(*commitlog.Options)) (*world, *client, *client, *client, *operator) {
	w := newWorld(t, ports.ConversationGroup)
	w.g.admins = []string{"inbox-a"}
	var op *operator
	a := w.newClient("a", "inbox-a")
	b := w.newClient("b", "inbox-b", append([]func(*commitlog.Options){withOperator(&op)}, readerOpts...)...)
	c := w.newClient("c", "inbox-c")
	w.g.members = []member{{a.inbox, a.pub}, {b.inbox, b.pub}, {c.inbox, c.pub}}
	for _, m := range []*client{a, b, c} {
		m.join(0)
	}
	w.pad(5)
	return w, a, b, c, op
}

func entryFor(w *world, seq uint64, last, applied []byte, epoch uint64) *contentspb.PlaintextCommitLogEntry {
	return &contentspb.PlaintextCommitLogEntry{GroupId: w.g.keys.GroupID, CommitSequenceId: seq, CommitResult: contentspb.CommitResult_COMMIT_RESULT_APPLIED,
		LastEpochAuthenticator: last, AppliedEpochNumber: epoch, AppliedEpochAuthenticator: applied}
}

func sealAs(t *testing.T, k commitlog.Keys, e *contentspb.PlaintextCommitLogEntry, author ed25519.PrivateKey) *backendpb.ClientEnvelope {
	t.Helper()
	s, err := commitlog.Seal(k, e, author)
	if err != nil {
		t.Fatal(err)
	}
	return commitlog.Envelope(k, s)
}

// FORK-030: each envelope is evaluated once, in sequence id order, from a
// read position that survives restart; envelopes served again or out of
// order are not evaluated twice.
func TestFORK030_EvaluatesEachEnvelopeOnceInOrder(t *testing.T) {
	t.Parallel()
	w, a, b, _, op := hostileGroup(t)
	for i := 0; i < 3; i++ {
		s := w.commit(nil)
		a.merge(s)
		b.merge(s)
	}
	a.publish()
	op.reverse = true
	if rep := b.read(); rep.Accepted != 3 {
		t.Fatalf("accepted %d, want 3 (%v)", rep.Accepted, b.log.Counters())
	}
	op.reverse = false
	b.restart()
	op.repeat = true
	rep := b.read()
	if rep.Evaluated != 0 || rep.Accepted != 0 {
		t.Fatalf("re-evaluated after restart: %+v", rep)
	}
	if b.log.Counters()[commitlog.ReasonReplay] == 0 {
		t.Fatal("envelopes served again were not counted as replays")
	}
	if got := remoteSeqs(b.remote()); len(got) != 3 {
		t.Fatalf("remote entries %v", got)
	}
	// A conversation whose consent is not allowed is not read.
	op.repeat = false
	s := w.commit(nil)
	a.merge(s)
	b.merge(s)
	a.publish()
	b.tx(func(tx ports.Tx) error {
		return tx.Groups().Update(w.ctx, w.g.keys.GroupID, func(g *ports.Group) error { g.Consent = ports.ConsentDenied; return nil })
	})
	if rep := b.read(); rep.Evaluated != 0 {
		t.Fatal("read a conversation without consent")
	}
	// A restored placeholder has no commit-log id and is not read.
	b.tx(func(tx ports.Tx) error {
		return tx.Groups().Update(w.ctx, w.g.keys.GroupID, func(g *ports.Group) error {
			g.Consent, g.RestoredPlaceholder = ports.ConsentAllowed, true
			return nil
		})
	})
	if rep := b.read(); rep.Evaluated != 0 {
		t.Fatal("read a restored group")
	}
}

// FORK-077 on a hostile log: entries sealed under another conversation's
// keys, with a bad author signature, or naming a commit at or after their
// own sequence id are discarded one by one and counted per reason; the
// honest entries around them are accepted.
func TestFORK077_HostileLogDiscardsOnlyBadEnvelopes(t *testing.T) {
	t.Parallel()
	hostileLog(t)
}

// FORK-077 with the batch verifier: the same hostile log gets the same
// verdicts.
func TestFORK077_HostileLogBatchVerifier(t *testing.T) {
	t.Parallel()
	hostileLog(t, func(o *commitlog.Options) { o.Verifier = commitlog.NewBatchVerifier() })
}

func hostileLog(t *testing.T, readerOpts ...func(*commitlog.Options)) {
	w, a, b, _, op := hostileGroup(t, readerOpts...)
	other, _ := commitlog.DeriveKeys(make([]byte, 32))
	s1 := w.commit(nil)
	a.merge(s1)
	b.merge(s1)
	a.publish() // real envelope 6 -> 60
	e := entryFor(w, s1, nil, w.g.auth, w.g.epoch)
	foreign := sealAs(t, other, e, a.priv)
	foreign.TargetTopic = w.g.keys.Topic
	op.inject(61, foreign)
	bad := cloneEntry(e)
	_ = commitlog.SignAuthor(w.g.keys, bad, a.priv)
	bad.AuthorSignature[5] ^= 1
	s, _ := commitlog.SealSigned(w.g.keys, bad)
	op.inject(62, commitlog.Envelope(w.g.keys, s))
	op.inject(63, sealAs(t, w.g.keys, entryFor(w, 63, nil, nil, 9), a.priv)) // names its own sequence id
	op.inject(64, sealAs(t, w.g.keys, entryFor(w, 90, nil, nil, 9), a.priv)) // names a later one
	s2 := w.commit(nil)
	a.merge(s2)
	b.merge(s2)
	a.publish() // 7 -> 70
	rep := b.read()
	if rep.Accepted != 2 || !eq(remoteSeqs(b.remote()), []uint64{s1, s2}) {
		t.Fatalf("accepted %v, want %d and %d", remoteSeqs(b.remote()), s1, s2)
	}
	got := b.log.Counters()
	for r, n := range map[commitlog.Reason]uint64{commitlog.ReasonCommitLogID: 1, commitlog.ReasonAuthorSignature: 1, commitlog.ReasonSequence: 2, commitlog.ReasonDecrypt: 5} {
		if got[r] != n {
			t.Errorf("counter %s = %d, want %d (%v)", r, got[r], n, got)
		}
	}
	b.wantFork(ports.ForkNotForked)
}

func cloneEntry(e *contentspb.PlaintextCommitLogEntry) *contentspb.PlaintextCommitLogEntry {
	return proto.Clone(e).(*contentspb.PlaintextCommitLogEntry)
}

// FORK-087: an active reader holds evaluation at an entry naming a commit
// it has not processed (and everything after it), then judges the author
// against its own tree; an entry from a non-publisher member is discarded;
// an inactive reader does not hold.
func TestFORK087_HoldsUntilProcessedAndJudgesTheAuthor(t *testing.T) {
	t.Parallel()
	w, a, b, c, _ := hostileGroup(t)
	s1, s2 := w.commit(nil), uint64(0)
	a.merge(s1)
	b.merge(s1)
	c.merge(s1)
	s2 = w.commit(nil)
	a.merge(s2)
	s3 := w.commit(nil)
	a.merge(s3)
	a.publish()
	rep := b.read()
	if rep.Accepted != 1 || rep.Held != s2 {
		t.Fatalf("read %+v, want s1 accepted and held at %d", rep, s2)
	}
	if again := b.read(); again.Accepted != 0 || again.Held != s2 {
		t.Fatalf("held entry evaluated before its commit: %+v", again)
	}
	b.merge(s2)
	if rep := b.read(); rep.Accepted != 1 || rep.Held != s3 {
		t.Fatalf("after s2: %+v", rep)
	}
	b.merge(s3)
	b.read()
	// c holds the root but is not a publisher.
	s4 := w.commit(nil)
	for _, m := range []*client{a, b, c} {
		m.merge(s4)
	}
	if _, err := memtransport.New(w.svc, nil).Publish(w.ctx, []*backendpb.ClientEnvelope{
		sealAs(t, w.g.keys, entryFor(w, s4, c.view.EpochAuthenticator, w.g.auth, w.g.epoch), c.priv)}); err != nil {
		t.Fatal(err)
	}
	a.publish()
	b.read()
	b.wantFork(ports.ForkNotForked)
	if b.log.Counters()[commitlog.ReasonNotPublisher] != 1 || len(b.remote()) != 4 {
		t.Fatalf("non-publisher entry: counters %v, remote %v", b.log.Counters(), remoteSeqs(b.remote()))
	}
	// An inactive reader evaluates entries beyond its cursor.
	s5 := w.commit(func(g *groupModel) { g.members = g.members[:1] }) // removes b and c
	b.merge(s5)
	a.merge(s5)
	s6 := w.commit(nil)
	a.merge(s6)
	a.publish()
	if rep := b.read(); rep.Held != 0 || !eq(remoteSeqs(b.remote()), []uint64{s1, s2, s3, s4, s5, s6}) {
		t.Fatalf("inactive reader: %+v %v", rep, remoteSeqs(b.remote()))
	}
}

// FORK-087: an entry from a newly promoted publisher waits for the
// promoting commit instead of being discarded.
func TestFORK087_PromotedPublisherEntryWaits(t *testing.T) {
	t.Parallel()
	w, a, b, c, _ := hostileGroup(t)
	s1 := w.commit(func(g *groupModel) { g.admins = []string{"inbox-a", "inbox-c"} })
	a.merge(s1)
	c.merge(s1)
	c.publish() // c's entry for s1, its promoting commit
	rep := b.read()
	if rep.Held != s1 || b.log.Counters()[commitlog.ReasonNotPublisher] != 0 {
		t.Fatalf("promoted publisher's entry not held: %+v %v", rep, b.log.Counters())
	}
	b.merge(s1)
	if rep := b.read(); rep.Accepted != 1 {
		t.Fatalf("after the promotion: %+v %v", rep, b.log.Counters())
	}
}

// FORK-088: a legacy reader's floor is set once to the current epoch and
// survives restart; entries below it are discarded; prior accepted entries
// and the sticky fork state are kept; a Welcome resets the floor to zero.
func TestFORK088_LegacyReaderFloor(t *testing.T) {
	t.Parallel()
	w := newWorld(t, ports.ConversationGroup)
	w.g.admins = []string{"inbox-a"}
	a, b := w.newClient("a", "inbox-a"), w.newClient("b", "inbox-b")
	w.g.members = []member{{a.inbox, a.pub}, {b.inbox, b.pub}}
	a.join(0)
	w.pad(5)
	var seqs []uint64
	for i := 0; i < 4; i++ {
		s := w.commit(nil)
		a.merge(s)
		seqs = append(seqs, s)
	}
	a.publish() // applied epochs 2..5
	// b is an existing conversation from before the floor: no floor, no
	// recorded eligibility; it holds the state at epoch 4.
	w.g.epoch, w.g.seq = 4, seqs[2]
	b.view, b.joined = w.g.viewFor(b), true
	w.g.epoch, w.g.seq = 5, seqs[3]
	b.tx(func(tx ports.Tx) error {
		return tx.Groups().Insert(w.ctx, ports.Group{ID: w.g.keys.GroupID, ConversationType: ports.ConversationGroup, Consent: ports.ConsentAllowed,
			Active: true, Cursor: seqs[3], GroupRoot: w.g.root, ForkState: ports.ForkForked})
	})
	b.read()
	floor := func() uint64 {
		var f uint64
		b.tx(func(tx ports.Tx) error {
			var ok bool
			var err error
			f, ok, err = tx.ReaderAdmission().Floor(w.ctx, w.g.keys.GroupID)
			if !ok && err == nil {
				t.Fatal("floor not initialized")
			}
			return err
		})
		return f
	}
	if floor() != 4 {
		t.Fatalf("floor %d, want the current epoch 4", floor())
	}
	if got := remoteSeqs(b.remote()); !eq(got, seqs[2:]) || b.log.Counters()[commitlog.ReasonBelowFloor] != 2 {
		t.Fatalf("accepted %v (counters %v), want entries at epochs >= 4", got, b.log.Counters())
	}
	b.wantFork(ports.ForkForked)
	b.restart()
	b.view.Epoch = 9 // later processing does not move the floor
	b.read()
	if floor() != 4 {
		t.Fatal("floor moved after restart")
	}
	b.tx(func(tx ports.Tx) error { return b.log.BeginMembership(w.ctx, tx, w.g.keys.GroupID, b.view, seqs[3]) })
	if floor() != 0 {
		t.Fatal("a Welcome did not reset the floor")
	}
}
