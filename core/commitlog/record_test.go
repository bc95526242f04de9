package commitlog_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/ports"
)

// FORK-001: a merged commit leaves an applied entry with the authenticator
// before it and the epoch and authenticator after it; a commit that
// removes this installation leaves a removal entry keeping the pre-commit
// epoch.
func TestFORK001_RecordsEveryAppliedCommit(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	b := cs[1]
	before := b.view
	s1 := w.commit(nil)
	b.merge(s1)
	l := b.local()
	if len(l) != 1 {
		t.Fatalf("%d entries, want 1", len(l))
	}
	e := l[0]
	if e.CommitSequenceID != s1 || e.CommitResult != ports.CommitResultApplied ||
		!bytes.Equal(e.LastEpochAuthenticator, before.EpochAuthenticator) ||
		e.AppliedEpochNumber != w.g.epoch || !bytes.Equal(e.AppliedEpochAuthenticator, w.g.auth) || e.RemovedThisInstallation {
		t.Fatalf("entry %+v does not record the merge", e)
	}
	pre := b.view
	s2 := w.commit(func(g *groupModel) { g.members = g.members[:1] })
	b.merge(s2)
	l = b.local()
	r := l[1]
	if !r.RemovedThisInstallation || r.CommitSequenceID != s2 || r.AppliedEpochNumber != pre.Epoch ||
		!bytes.Equal(r.AppliedEpochAuthenticator, pre.EpochAuthenticator) {
		t.Fatalf("removal entry %+v", r)
	}
	// Metadata that does not decode does not stop the recording.
	a := cs[0]
	s3 := w.commit(nil)
	bad := w.stateAt(s3).viewFor(a)
	bad.Extensions = []ports.Extension{{Type: 0x0006, Data: []byte{0xff}}}
	a.mergeView(s3, bad)
	if l := a.local(); len(l) != 1 || l[0].CommitSequenceID != s3 {
		t.Fatalf("entry not recorded under malformed metadata: %+v", l)
	}
}

// FORK-002: a terminal rejection records the result the table gives, with
// the group's current epoch and authenticator; a held failure and a
// failure that is not a commit outcome record nothing.
func TestFORK002_RecordsOnlyTerminalFailures(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	b := cs[1]
	cases := []struct {
		err  error
		want ports.CommitResult
	}{
		{&ports.WrongEpochError{Relation: ports.EpochOlder}, ports.CommitResultWrongEpoch},
		{fmt.Errorf("decrypt: %w", ports.ErrUndecryptable), ports.CommitResultUndecryptable},
		{fmt.Errorf("validate: %w", ports.ErrInvalid), ports.CommitResultInvalid},
		// The first row that holds wins.
		{fmt.Errorf("%w and %w", ports.ErrInvalid, &ports.WrongEpochError{Relation: ports.EpochOlder}), ports.CommitResultWrongEpoch},
	}
	for i, c := range cases {
		seq := w.commit(nil)
		w.g.epoch--
		b.reject(seq, c.err)
		l := b.local()
		if len(l) != i+1 {
			t.Fatalf("case %d: %d entries", i, len(l))
		}
		e := l[i]
		if e.CommitResult != c.want || e.AppliedEpochNumber != b.view.Epoch ||
			!bytes.Equal(e.AppliedEpochAuthenticator, b.view.EpochAuthenticator) || !bytes.Equal(e.LastEpochAuthenticator, b.view.EpochAuthenticator) {
			t.Fatalf("case %d: entry %+v", i, e)
		}
	}
	n := len(b.local())
	b.tx(func(tx ports.Tx) error {
		_, err := b.log.RecordFailure(w.ctx, tx, commitlog.Failure{GroupID: w.g.keys.GroupID, CommitSequenceID: w.commit(nil), View: b.view, Err: ports.ErrUndecryptable, Held: true})
		return err
	})
	err := b.store.Tx(w.ctx, func(tx ports.Tx) error {
		_, err := b.log.RecordFailure(w.ctx, tx, commitlog.Failure{GroupID: w.g.keys.GroupID, CommitSequenceID: w.g.seq, View: b.view, Err: errors.New("disk full")})
		return err
	})
	if !errors.Is(err, commitlog.ErrNotRecordable) {
		t.Fatalf("storage failure recorded as an outcome: %v", err)
	}
	if len(b.local()) != n {
		t.Fatal("held or non-commit failure was recorded")
	}
}

// FORK-004: with commit_log_enabled false nothing is recorded, published
// or read, and every fork state reads unknown.
func TestFORK004_DisabledRecordsNothingAndReportsUnknown(t *testing.T) {
	t.Parallel()
	w := newWorld(t, ports.ConversationGroup)
	w.g.admins = []string{"inbox-a"}
	a := w.newClient("a", "inbox-a", func(o *commitlog.Options) { o.Enabled = false })
	w.g.members = []member{{a.inbox, a.pub}}
	a.join(0)
	s := w.commit(nil)
	a.merge(s)
	a.reject(w.commit(nil), ports.ErrInvalid)
	if l := a.local(); len(l) != 0 {
		t.Fatalf("disabled log recorded %d entries", len(l))
	}
	if rep := a.publish(); rep.Published != 0 || len(w.topicEntries()) != 0 {
		t.Fatal("disabled log published")
	}
	a.tx(func(tx ports.Tx) error {
		return tx.Groups().Update(w.ctx, w.g.keys.GroupID, func(g *ports.Group) error { g.ForkState = ports.ForkForked; return nil })
	})
	a.read()
	a.wantFork(ports.ForkUnknown)
}

// FORK-073: an older-epoch WrongEpoch rejection does not set maybe_forked
// but keeps its entry; a future or equal one sets it; nothing clears it.
func TestFORK073_StaleWrongEpochDoesNotSetMaybeForked(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	b := cs[1]
	maybe := func() bool {
		m, _, err := b.log.MaybeForked(w.ctx, w.g.keys.GroupID)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	b.reject(w.commit(nil), &ports.WrongEpochError{Relation: ports.EpochOlder, MessageEpoch: 1, GroupEpoch: 2})
	if maybe() {
		t.Fatal("older-epoch rejection set maybe_forked")
	}
	if l := b.local(); len(l) != 1 || l[0].CommitResult != ports.CommitResultWrongEpoch {
		t.Fatal("older-epoch rejection not retained")
	}
	for _, rel := range []ports.EpochRelation{ports.EpochFuture, ports.EpochEqual} {
		w2, cs2 := groupOf(t, []string{"inbox-a"}, "a", "b")
		c := cs2[1]
		c.reject(w2.commit(nil), &ports.WrongEpochError{Relation: rel, MessageEpoch: 9, GroupEpoch: 2})
		m, reason, _ := c.log.MaybeForked(w2.ctx, w2.g.keys.GroupID)
		if !m || reason == "" {
			t.Fatalf("%v-epoch rejection did not set maybe_forked", rel)
		}
		c.reject(w2.commit(nil), &ports.WrongEpochError{Relation: ports.EpochOlder})
		if m, _, _ := c.log.MaybeForked(w2.ctx, w2.g.keys.GroupID); !m {
			t.Fatal("a later stale rejection cleared maybe_forked")
		}
	}
}
