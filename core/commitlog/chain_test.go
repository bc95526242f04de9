package commitlog_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// publishRaw stores envs as a hostile delivery service would: straight
// into its store, replays included (regroupd stores a commit-log entry
// once per topic, COMP-144).
func publishRaw(t *testing.T, w *world, envs ...*backendpb.ClientEnvelope) {
	t.Helper()
	rows := make([]ports.NewStoredEnvelope, len(envs))
	for i, e := range envs {
		raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = ports.NewStoredEnvelope{Topic: e.GetTargetTopic(), Envelope: raw, ServerTimestampNS: w.clock.Now().UnixNano()}
	}
	if _, err := w.es.Append(w.ctx, rows); err != nil {
		t.Fatal(err)
	}
}

// FORK-083 on a hostile log: a replayed entry, entries out of order, and an
// entry that does not continue the chain are discarded; an entry from a
// publisher removed since is not admitted, and after the last author lost
// the role the next publisher's entry starts a new chain.
func TestFORK083_HostileChain(t *testing.T) {
	t.Parallel()
	w, a, b, c, _ := hostileGroup(t)
	all := []*client{a, b, c}
	step := func(change func(*groupModel)) uint64 {
		s := w.commit(change)
		for _, m := range all {
			if m.view.Active {
				m.merge(s)
			}
		}
		return s
	}
	s1, s2, s3 := step(nil), step(nil), step(nil)
	st := func(s uint64) *groupModel { return w.stateAt(s) }
	prev := func(s uint64) []byte { return w.stateAt(s - 1).auth }
	// a publishes s1, then s3 before s2, then s1 again (a replay with new
	// bytes: an entry signed again is the same bytes, so vary nothing and
	// publish the identical envelope twice).
	e1 := sealAs(t, w.g.keys, entryFor(w, s1, prev(s1), st(s1).auth, st(s1).epoch), a.priv)
	e3 := sealAs(t, w.g.keys, entryFor(w, s3, prev(s3), st(s3).auth, st(s3).epoch), a.priv)
	e2 := sealAs(t, w.g.keys, entryFor(w, s2, prev(s2), st(s2).auth, st(s2).epoch), a.priv)
	publishRaw(t, w, e1, e1, e3, e2)
	b.read()
	// The replayed s1 and s3 (a gap after s1) are discarded; s2 continues.
	if got := remoteSeqs(b.remote()); !eq(got, []uint64{s1, s2}) {
		t.Fatalf("accepted %v, want %d then %d", got, s1, s2)
	}
	if n := b.log.Counters()[commitlog.ReasonChain]; n != 2 {
		t.Fatalf("chain discards %d, want 2", n)
	}
	publishRaw(t, w, e3, e2) // s3 now continues; s2 again is out of order
	b.read()
	if got := remoteSeqs(b.remote()); !eq(got, []uint64{s1, s2, s3}) {
		t.Fatalf("accepted %v", got)
	}
	// An entry that skips an epoch is discarded.
	s4 := step(nil)
	publishRaw(t, w, sealAs(t, w.g.keys, entryFor(w, s4, prev(s4), st(s4).auth, st(s4).epoch+1), a.priv))
	b.read()
	if b.log.Counters()[commitlog.ReasonChain] != 4 {
		t.Fatalf("epoch skip accepted: %v", b.log.Counters())
	}
	// a loses its role and its membership; c becomes the publisher.
	s5 := step(func(g *groupModel) { g.admins = []string{"inbox-c"}; g.members = g.members[1:] })
	publishRaw(t, w, sealAs(t, w.g.keys, entryFor(w, s5, prev(s5), st(s5).auth, st(s5).epoch), a.priv))
	b.read()
	if b.log.Counters()[commitlog.ReasonNotPublisher] != 1 {
		t.Fatal("entry from a removed publisher admitted")
	}
	// c's entry disagrees with the last accepted entry (a:s3) but the last
	// author is no longer a publisher: only the first row applies.
	s6 := step(nil)
	publishRaw(t, w, sealAs(t, w.g.keys, entryFor(w, s6, []byte("unrelated"), st(s6).auth, 77), c.priv))
	b.read()
	if got := remoteSeqs(b.remote()); !eq(got, []uint64{s1, s2, s3, s6}) {
		t.Fatalf("accepted %v: the new publisher's entry must start a chain", got)
	}
}

// FORK-083 and FORK-089: a publisher that returns after losing the role
// starts a new chain at its new boundary, also after a reader restart; one
// readded in the same commit gets a boundary there too.
func TestFORK089_ReturningPublisherBoundarySurvivesRestart(t *testing.T) {
	t.Parallel()
	w, a, b, c, _ := hostileGroup(t)
	all := []*client{a, b, c}
	step := func(change func(*groupModel), extra ...func(*commitlog.Merge)) uint64 {
		s := w.commit(change)
		for _, m := range all {
			m.merge(s, extra...)
		}
		return s
	}
	s1 := step(nil)
	a.publish()
	b.read()
	step(func(g *groupModel) { g.admins = nil }) // a loses the role
	step(nil)                                    // unpublished: nobody is a publisher
	s4 := step(func(g *groupModel) { g.admins = []string{"inbox-a"} })
	step(nil)
	b.restart()
	a.publish() // a's upload cutoff: from s4, its promoting commit
	rep := b.read()
	if rep.Accepted != 2 || !eq(remoteSeqs(b.remote()), []uint64{s1, s4, s4 + 1}) {
		t.Fatalf("returning publisher: %+v %v %v", rep, remoteSeqs(b.remote()), b.log.Counters())
	}
	var bounds map[string]uint64
	b.tx(func(tx ports.Tx) error {
		var err error
		bounds, err = tx.ReaderAdmission().Boundaries(w.ctx, w.g.keys.GroupID)
		return err
	})
	if bounds[string(a.pub)] != s4 {
		t.Fatalf("boundary of a = %d, want %d", bounds[string(a.pub)], s4)
	}
	// A readd of a in one commit raises its boundary.
	s6 := step(nil, func(m *commitlog.Merge) { m.Readded = [][]byte{a.pub} })
	b.tx(func(tx ports.Tx) error {
		var err error
		bounds, err = tx.ReaderAdmission().Boundaries(w.ctx, w.g.keys.GroupID)
		return err
	})
	if bounds[string(a.pub)] != s6 {
		t.Fatalf("boundary after readd = %d, want %d", bounds[string(a.pub)], s6)
	}
}

// FORK-041: a forked conversation stays forked when later entries agree,
// and only a replacing Welcome resets it to unknown; the event fires once.
func TestFORK041_OnlyAReplacingWelcomeResetsForked(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	a, b := cs[0], cs[1]
	s1 := w.commit(nil)
	a.merge(s1)
	b.mergeForked(s1)
	a.publish()
	b.read()
	b.wantFork(ports.ForkForked)
	// b happens to agree again at s2.
	s2 := w.commit(nil)
	a.merge(s2)
	b.merge(s2)
	a.publish()
	b.read()
	b.wantFork(ports.ForkForked)
	b.restart()
	b.read()
	b.wantFork(ports.ForkForked)
	if len(b.events) != 1 {
		t.Fatalf("%d fork events, want 1", len(b.events))
	}
	b.join(s2) // the repair Welcome replaces the state
	b.wantFork(ports.ForkUnknown)
	s3 := w.commit(nil)
	a.merge(s3)
	b.merge(s3)
	a.publish()
	b.read()
	b.wantFork(ports.ForkNotForked)
}

// FORK-072: the read API exposes the fork state, the local entries and
// the accepted remote entries of a conversation, and an event reports the
// transition to forked once.
func TestFORK072_ReadAPIAndForkEvent(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	a, b := cs[0], cs[1]
	s1 := w.commit(nil)
	a.merge(s1)
	b.mergeForked(s1)
	a.publish()
	b.read()
	b.read()
	if got := b.local(); len(got) != 1 || got[0].CommitSequenceID != s1 {
		t.Fatalf("local entries %+v", got)
	}
	r := b.remote()
	if len(r) != 1 || r[0].CommitSequenceID != s1 || string(r[0].AuthorInstallationKey) != string(a.pub) {
		t.Fatalf("remote entries %+v", r)
	}
	b.wantFork(ports.ForkForked)
	if len(b.events) != 1 || string(b.events[0].Remote) != string(r[0].AppliedEpochAuthenticator) || string(b.events[0].GroupID) != string(w.g.keys.GroupID) {
		t.Fatalf("events %+v", b.events)
	}
}
