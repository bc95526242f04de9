package commitlog_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// groupState reads the stored group inside tx.
func groupState(t *testing.T, c *client, tx ports.Tx) ports.ForkState {
	t.Helper()
	g, err := tx.Groups().Get(c.w.ctx, c.w.g.keys.GroupID)
	if err != nil {
		t.Fatal(err)
	}
	return g.ForkState
}

// FORK-082, COMP-103: the fork state is the table's answer right after a merge, a
// terminal failure or a new membership, in the recording transaction, not
// only after the next read.
func TestFORK082_ForkStateCurrentAfterEachRecord(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	a, b := cs[0], cs[1]
	s1 := w.commit(nil)
	a.merge(s1)
	b.merge(s1)
	a.publish()
	b.read()
	b.wantFork(ports.ForkNotForked)

	// b merges a newer commit that has no remote counterpart yet: unknown,
	// inside the merge's own transaction.
	s2 := w.commit(nil)
	after := w.stateAt(s2).viewFor(b)
	b.tx(func(tx ports.Tx) error {
		rec, err := b.log.RecordMerge(w.ctx, tx, commitlog.Merge{GroupID: w.g.keys.GroupID, CommitSequenceID: s2, Before: b.view, After: after, RoleEvidence: true})
		if err != nil {
			return err
		}
		if rec.ForkState != ports.ForkUnknown || groupState(t, b, tx) != ports.ForkUnknown {
			t.Errorf("after a newer merge: recorded %v, stored %v, want unknown", rec.ForkState, groupState(t, b, tx))
		}
		return tx.Groups().Update(w.ctx, w.g.keys.GroupID, func(g *ports.Group) error { g.Cursor = s2; return nil })
	})
	b.view = after
	b.wantFork(ports.ForkUnknown)
	a.merge(s2)
	a.publish()
	b.read()
	b.wantFork(ports.ForkNotForked)

	// A terminal rejection is a newer local entry too.
	s3 := w.commit(nil)
	w.g.epoch--
	b.tx(func(tx ports.Tx) error {
		rec, err := b.log.RecordFailure(w.ctx, tx, commitlog.Failure{GroupID: w.g.keys.GroupID, CommitSequenceID: s3, View: b.view, Err: ports.ErrInvalid})
		if err != nil {
			return err
		}
		if rec.ForkState != ports.ForkUnknown || groupState(t, b, tx) != ports.ForkUnknown {
			t.Errorf("after a newer rejection: recorded %v, want unknown", rec.ForkState)
		}
		return nil
	})
	b.wantFork(ports.ForkUnknown)

	// A new membership has nothing to compare.
	b.tx(func(tx ports.Tx) error {
		if err := b.log.BeginMembership(w.ctx, tx, w.g.keys.GroupID, b.view, s3); err != nil {
			return err
		}
		if groupState(t, b, tx) != ports.ForkUnknown {
			t.Error("a new membership kept a fork state")
		}
		return nil
	})
}

// FORK-082: a record that completes the shared commit with a different
// authenticator makes the conversation forked in its own transaction, and
// the event comes once, through Notify, after the commit.
func TestFORK082_RecordThatRevealsAForkReportsIt(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	a, b := cs[0], cs[1]
	s1 := w.commit(nil)
	a.merge(s1)
	a.publish()
	// b has processed s1's envelope position (an unrecorded outcome, say a
	// held one) and reads a's entry before it records s1.
	b.tx(func(tx ports.Tx) error {
		return tx.Groups().Update(w.ctx, w.g.keys.GroupID, func(g *ports.Group) error { g.Cursor = s1; return nil })
	})
	b.read()
	b.wantFork(ports.ForkUnknown)
	b.mergeForked(s1)
	b.wantFork(ports.ForkForked)
	if len(b.events) != 1 || b.events[0].CommitSequenceID != s1 {
		t.Fatalf("events %+v, want one at %d", b.events, s1)
	}
}

// Defect: a publisher's validly sealed entry carrying a value no store can
// hold (an applied epoch of 2^63 or more, an oversized authenticator) must
// be discarded with a counted reason before admission, and the pass and
// every later pass go on: the other member of a DM cannot stop fork
// detection (COMP-101).
func TestCOMP101_UnstorableValuesDiscardedBeforeAdmission(t *testing.T) {
	t.Parallel()
	w := newWorld(t, ports.ConversationDM)
	w.g.dm = [2]string{"inbox-a", "inbox-b"}
	a, b := w.newClient("a", "inbox-a"), w.newClient("b", "inbox-b")
	w.g.members = []member{{a.inbox, a.pub}, {b.inbox, b.pub}}
	a.join(0)
	b.join(0)
	w.pad(10)
	s1 := w.commit(nil)
	a.merge(s1)
	b.merge(s1)
	prev := w.stateAt(s1 - 1).auth
	huge := entryFor(w, s1, prev, w.g.auth, 1<<63)
	long := entryFor(w, s1, prev, make([]byte, 65), w.g.epoch)
	publishRaw(t, w, sealAs(t, w.g.keys, huge, a.priv), sealAs(t, w.g.keys, long, a.priv))
	rep := b.read()
	if got := b.log.Counters()[commitlog.ReasonOutOfRange]; got != 2 || rep.Accepted != 0 {
		t.Fatalf("out_of_range %d, accepted %d: want both discarded (%v)", got, rep.Accepted, b.log.Counters())
	}
	a.publish()
	b.read()
	b.wantFork(ports.ForkNotForked)
	// A fork after it is still detected.
	s2 := w.commit(nil)
	a.merge(s2)
	b.mergeForked(s2)
	a.publish()
	b.read()
	b.wantFork(ports.ForkForked)
}

// COMP-099: one garbage envelope at sequence id 2^62 is above what the
// topic shows, so it is not evaluated and moves nothing; honest entries
// after it are accepted, also after a restart.
func TestCOMP099_GarbageFarAheadSkipsNothing(t *testing.T) {
	t.Parallel()
	w, a, b, _, op := hostileGroup(t)
	s1 := w.commit(nil)
	a.merge(s1)
	b.merge(s1)
	a.publish()
	op.inject(1<<62, sealAs(t, w.g.keys, entryFor(w, 3, nil, nil, 1), b.priv))
	op.inject(math.MaxUint64, &backendpb.ClientEnvelope{TargetTopic: w.g.keys.Topic})
	rep := b.read()
	if rep.Accepted != 1 || rep.Ahead == 0 {
		t.Fatalf("first pass %+v (%v)", rep, b.log.Counters())
	}
	if b.log.Counters()[commitlog.ReasonOutOfRange] == 0 {
		t.Fatalf("an envelope at 2^64-1 was not discarded as out of range: %v", b.log.Counters())
	}
	b.restart()
	s2 := w.commit(nil)
	a.merge(s2)
	b.merge(s2)
	a.publish()
	b.read()
	if got := remoteSeqs(b.remote()); !eq(got, []uint64{s1, s2}) {
		t.Fatalf("accepted %v, want %d and %d", got, s1, s2)
	}
	b.wantFork(ports.ForkNotForked)
}

// COMP-100: an operator that claims, for one pass, that the topic reaches
// 2^62 gets its garbage evaluated and a genuine entry accepted at a forged
// sequence id; once the claim stops, the reader moves back, withdraws what
// the forged position let in, and accepts every honest entry after it.
func TestCOMP100_PositionTheTopicNoLongerBacksIsRewound(t *testing.T) {
	t.Parallel()
	w, a, b, _, op := hostileGroup(t)
	s1 := w.commit(nil)
	a.merge(s1)
	b.merge(s1)
	a.publish()
	b.read()
	s2 := w.commit(nil)
	a.merge(s2)
	b.merge(s2)
	a.publish()
	// The operator withholds the real s2 envelope, serves a's genuine s2
	// entry at 2^62 after garbage, and claims the topic reaches that far.
	real := w.topicEntries()
	genuine := sealAs(t, w.g.keys, real[len(real)-1], a.priv)
	op.mu.Lock()
	op.claim, op.hideReal = 1<<62, true
	op.mu.Unlock()
	op.inject(1<<62-1, &backendpb.ClientEnvelope{TargetTopic: w.g.keys.Topic})
	op.inject(1<<62, genuine)
	b.read()
	if r := b.remote(); !eq(remoteSeqs(r), []uint64{s1, s2}) || r[1].EnvelopeSequenceID != 1<<62 {
		t.Fatalf("during the claim: accepted %+v", r)
	}
	op.mu.Lock()
	op.claim, op.hideReal, op.injected = 0, false, nil
	op.mu.Unlock()
	s3 := w.commit(nil)
	a.merge(s3)
	b.merge(s3)
	a.publish()
	b.restart()
	rep := b.read()
	if !rep.Rewound {
		t.Fatalf("position above the topic not rewound: %+v", rep)
	}
	r := b.remote()
	if !eq(remoteSeqs(r), []uint64{s1, s2, s3}) {
		t.Fatalf("after the claim: accepted %v, want %d, %d, %d", remoteSeqs(r), s1, s2, s3)
	}
	for _, e := range r {
		if e.EnvelopeSequenceID >= 1<<62 {
			t.Fatalf("an entry accepted at a forged position was kept: %+v", e)
		}
	}
	b.wantFork(ports.ForkNotForked)
}

// COMP-102: Sync reads even when publishing fails, and reports both
// outcomes: a publisher whose publishing keeps failing still learns from
// the other publisher's entries that it is forked.
func TestCOMP102_SyncReadsWhenPublishFails(t *testing.T) {
	t.Parallel()
	w := newWorld(t, ports.ConversationDM)
	w.g.dm = [2]string{"inbox-a", "inbox-b"}
	var fl *flaky
	a := w.newClient("a", "inbox-a")
	b := w.newClient("b", "inbox-b", func(o *commitlog.Options) {
		fl = &flaky{Transport: o.Transport, zeroAt: -1, zeroOnly: -1, fail: 1000}
		o.Transport = fl
	})
	w.g.members = []member{{a.inbox, a.pub}, {b.inbox, b.pub}}
	a.join(0)
	b.join(0)
	w.pad(10)
	s1 := w.commit(nil)
	a.merge(s1)
	b.mergeForked(s1)
	a.publish()
	rep, err := b.log.Sync(w.ctx, w.g.keys.GroupID)
	if !errors.Is(err, ports.ErrUnavailable) || !errors.Is(rep.PublishErr, commitlog.ErrPublish) {
		t.Fatalf("publish failure not reported: %v / %v", err, rep.PublishErr)
	}
	if rep.ReadErr != nil || rep.Read.Accepted != 1 || rep.Read.ForkState != ports.ForkForked {
		t.Fatalf("read after a failed publish: %+v %v", rep.Read, rep.ReadErr)
	}
	b.wantFork(ports.ForkForked)
}

// countingStore counts the whole-log listings the commit log makes.
type countingStore struct {
	ports.Store
	lists atomic.Int64
}

func (s *countingStore) Tx(ctx context.Context, fn func(tx ports.Tx) error) error {
	return s.Store.Tx(ctx, func(tx ports.Tx) error { return fn(countingTx{tx, s}) })
}

type countingTx struct {
	ports.Tx
	s *countingStore
}

func (t countingTx) LocalCommitLog() ports.LocalCommitLog {
	return countingLocal{t.Tx.LocalCommitLog(), t.s}
}
func (t countingTx) RemoteCommitLog() ports.RemoteCommitLog {
	return countingRemote{t.Tx.RemoteCommitLog(), t.s}
}

type countingLocal struct {
	ports.LocalCommitLog
	s *countingStore
}

func (l countingLocal) List(ctx context.Context, g []byte, after uint64, limit int) ([]ports.LocalCommitLogEntry, error) {
	if limit <= 0 {
		l.s.lists.Add(1)
	}
	return l.LocalCommitLog.List(ctx, g, after, limit)
}

type countingRemote struct {
	ports.RemoteCommitLog
	s *countingStore
}

func (r countingRemote) List(ctx context.Context, g []byte, after uint64, limit int) ([]ports.RemoteCommitLogEntry, error) {
	if limit <= 0 {
		r.s.lists.Add(1)
	}
	return r.RemoteCommitLog.List(ctx, g, after, limit)
}

// COMP-103: a read pass and a record cost what is new: once a
// conversation's comparison is stored, neither lists a whole log again
// (the read-pass benchmark measures the cost).
func TestCOMP103_ReadAndRecordDoNotListHistory(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	a, b := cs[0], cs[1]
	for i := 0; i < 3; i++ {
		s := w.commit(nil)
		a.merge(s)
		b.merge(s)
	}
	a.publish()
	b.read()
	cnt := &countingStore{Store: b.store}
	o := b.opts
	o.Store, o.Views = cnt, viewSource{b}
	l, err := commitlog.New(o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		s := w.commit(nil)
		a.merge(s)
		after := w.stateAt(s).viewFor(b)
		if err := cnt.Tx(w.ctx, func(tx ports.Tx) error {
			if _, err := l.RecordMerge(w.ctx, tx, commitlog.Merge{GroupID: w.g.keys.GroupID, CommitSequenceID: s, Before: b.view, After: after, RoleEvidence: true}); err != nil {
				return err
			}
			return tx.Groups().Update(w.ctx, w.g.keys.GroupID, func(g *ports.Group) error { g.Cursor = s; return nil })
		}); err != nil {
			t.Fatal(err)
		}
		b.view = after
		a.publish()
		if rep, err := l.Read(w.ctx, w.g.keys.GroupID); err != nil || rep.Accepted != 1 || rep.ForkState != ports.ForkNotForked {
			t.Fatalf("read %+v %v", rep, err)
		}
	}
	if n := cnt.lists.Load(); n != 0 {
		t.Fatalf("%d whole-log listings during records and reads", n)
	}
}

// COMP-103: a store written before fork comparisons were kept (entries,
// no comparison) gets its comparison computed from its entries once: the
// first pass finds the table's answer, later passes list nothing.
func TestCOMP103_OlderStoreComparedOnce(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	a, b := cs[0], cs[1]
	var seqs []uint64
	for i := 0; i < 3; i++ {
		s := w.commit(nil)
		a.merge(s)
		seqs = append(seqs, s)
	}
	a.publish()
	// b's conversation as an older build stored it: the group, its
	// local entries and the accepted entries, written directly.
	cnt := &countingStore{Store: b.store}
	gid := w.g.keys.GroupID
	b.view = w.g.viewFor(b)
	remote := a.local()
	b.tx(func(tx ports.Tx) error {
		if err := tx.Groups().Update(w.ctx, gid, func(g *ports.Group) error { g.Cursor = seqs[2]; return nil }); err != nil {
			return err
		}
		for i, l := range remote {
			l.Seq, l.GroupID = 0, gid
			if i == 2 {
				l.AppliedEpochAuthenticator = randAuth() // b forked at the last commit
			}
			if _, _, err := tx.LocalCommitLog().Append(w.ctx, l); err != nil {
				return err
			}
		}
		return nil
	})
	o := b.opts
	o.Store, o.Views = cnt, viewSource{b}
	l, err := commitlog.New(o)
	if err != nil {
		t.Fatal(err)
	}
	b.tx(func(tx ports.Tx) error {
		// What BeginMembership stored describes no entry: an older store has
		// none. Replace it with one of another membership, as a store
		// migrated from before comparisons holds none for this one.
		return tx.RemoteCommitLog().PutComparison(w.ctx, ports.ForkComparison{GroupID: gid, Membership: 0})
	})
	rep, err := l.Read(w.ctx, gid)
	if err != nil || rep.ForkState != ports.ForkForked {
		t.Fatalf("first pass %+v %v, want forked", rep, err)
	}
	first := cnt.lists.Load()
	if first == 0 {
		t.Fatal("the comparison was not computed from the entries")
	}
	s := w.commit(nil)
	a.merge(s)
	a.publish()
	if _, err := l.Read(w.ctx, gid); err != nil {
		t.Fatal(err)
	}
	if cnt.lists.Load() != first {
		t.Fatal("a later pass listed the logs again")
	}
}

// COMP-242: an operator that claims the topic reaches 2^62 and keeps
// there an envelope that does not verify, an entry by a non-publisher and
// a replay of a genuine entry gets them evaluated and discarded, but the
// stored read position does not move to them: honest entries published after it,
// at lower ids, are accepted, also after a restart, and the reader is not
// forked.
func TestCOMP242_DiscardedEnvelopesAtAClaimedIDMoveNothing(t *testing.T) {
	t.Parallel()
	w, a, b, _, op := hostileGroup(t)
	s1 := w.commit(nil)
	a.merge(s1)
	b.merge(s1)
	a.publish()
	b.read()
	op.mu.Lock()
	op.claim = 1 << 62
	op.mu.Unlock()
	op.inject(1<<62, &backendpb.ClientEnvelope{TargetTopic: w.g.keys.Topic})
	op.inject(1<<62-5, sealAs(t, w.g.keys, entryFor(w, s1, nil, nil, 1), b.priv)) // not a publisher's
	real := w.topicEntries()
	op.inject(1<<62-3, sealAs(t, w.g.keys, real[len(real)-1], a.priv)) // a's genuine entry, replayed
	b.read()
	for i, restart := range []bool{false, true} {
		s := w.commit(nil)
		a.merge(s)
		b.merge(s)
		a.publish()
		if restart {
			b.restart()
		}
		b.read()
		if got := remoteSeqs(b.remote()); len(got) != 2+i || got[len(got)-1] != s {
			t.Fatalf("after the junk: accepted %v, want the honest entry of commit %d last", got, s)
		}
	}
	b.wantFork(ports.ForkNotForked)
}
