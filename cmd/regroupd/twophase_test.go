package main

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// newTwoPhaseAcceptance is newAcceptance on a regroupd with -two-phase
// and a short grace period.
func newTwoPhaseAcceptance(t *testing.T, mode string) *acceptance {
	t.Helper()
	r := testenv.StartRegroupdWith(t, mode, "-accept-commits", "-two-phase", "-grace-period", "300ms", "-pending-expiry", "1h")
	a := &acceptance{World: world.NewOn(t, mode, r, 2*time.Minute), t: t}
	var err error
	if mode == "postgres" {
		a.store, err = deliverydb.OpenPostgres(a.Ctx, r.Flag("database"), &deliverydb.Options{Schema: r.Flag("postgres-schema"), MaxOpenConns: 2})
	} else {
		a.store, err = deliverydb.OpenSQLite(a.Ctx, r.Flag("database"), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.store.Close() })
	return a
}

// rawCommit builds the member's commit with an UpdatePath and clears it
// on its engine: the commit and the GroupInfo of its epoch.
func rawCommit(t *testing.T, m *world.Member, id []byte) (commit, gi []byte) {
	t.Helper()
	m.Tx(func(tx ports.Tx) error {
		out, err := m.Engine.Commit(m.W.Ctx, tx, id, ports.CommitOptions{ForcePath: true})
		if err != nil {
			return err
		}
		commit, gi = out.Commit, out.GroupInfo
		return m.Engine.ClearPending(m.W.Ctx, tx, id)
	})
	return commit, gi
}

func publishRaw(a *acceptance, m *world.Member, id, commit, gi []byte) ([]uint64, error) {
	return m.Transport.Publish(a.Ctx, []*backendpb.ClientEnvelope{
		{TargetTopic: topicOf(ports.TopicGroupMessages, id), Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: commit}},
		{TargetTopic: topicOf(ports.TopicGroupInfo, id), Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: gi}}})
}

// waitNotice waits for a notice with the outcome about commit seq on the
// group's topic, read over gRPC.
func waitNotice(a *acceptance, m *world.Member, id []byte, seq uint64, want backendpb.AcceptanceNotice_Outcome) {
	a.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		es, err := m.Transport.Query(a.Ctx, topicOf(ports.TopicGroupMessages, id), seq, 100)
		if err != nil {
			a.t.Fatal(err)
		}
		for _, e := range es {
			if n := e.GetEnvelope().GetAcceptanceNotice(); n.GetOutcome() == want && n.GetCommitSequenceId() == seq {
				return
			}
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("no %v notice about commit %d", want, seq)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ADR-0030 Decisions 2 to 5 and COMP-419 over gRPC against a regroupd
// process with -two-phase: a member's commit served marked pending, a
// second member's commit refused with ErrCommitPending, a refusal
// dropping the first and quarantining its committer (ErrQuarantined on
// its next commit), a super admin's lift, and a commit confirmed at the
// end of the grace period by regroupd's own timer; a pending commit
// survives a SIGKILL and restart of regroupd and is confirmed after it.
func TestADR0030_TwoPhaseOverGRPC(t *testing.T) {
	for _, mode := range acceptModes {
		t.Run(mode, func(t *testing.T) {
			if mode == "postgres" {
				testenv.PostgresDSN(t)
			}
			testTwoPhaseOverGRPC(t, mode)
		})
	}
}

func testTwoPhaseOverGRPC(t *testing.T, mode string) {
	a := newTwoPhaseAcceptance(t, mode)
	alice, bob, carol := a.Member("alice", world.Config{}), a.Member("bob", world.Config{}), a.Member("carol", world.Config{})
	id := a.newGroup(alice, bob, carol)
	witness := func(m *world.Member) ports.Witness { return m.Transport.(ports.Witness) }
	report := func(m *world.Member, seq uint64, v ports.Verdict, reason string) {
		t.Helper()
		if err := witness(m).Report(a.Ctx, ports.Report{GroupID: id, CommitSeq: seq, Verdict: v, Reason: reason}); err != nil {
			t.Fatal(err)
		}
	}

	// carol's commit pends, served marked pending; bob's is refused with
	// ErrCommitPending; the pending commit survives a SIGKILL and restart
	// and is confirmed by the restarted regroupd's timer.
	c, gi := rawCommit(t, carol, id)
	ids, err := publishRaw(a, carol, id, c, gi)
	if err != nil {
		t.Fatal(err)
	}
	es, err := alice.Transport.Query(a.Ctx, topicOf(ports.TopicGroupMessages, id), ids[0]-1, 1)
	if err != nil || len(es) != 1 || !es[0].GetPending() {
		t.Fatalf("the pending commit over gRPC: %v, %v", es, err)
	}
	c2, gi2 := rawCommit(t, bob, id)
	if _, err := publishRaw(a, bob, id, c2, gi2); !errors.Is(err, ports.ErrCommitPending) {
		t.Fatalf("a second commit while one pends: %v, want ErrCommitPending", err)
	}
	a.Regroupd.Restart()
	if p, err := a.store.PendingCommit(a.Ctx, id); err != nil || p.CommitSeq != ids[0] {
		t.Fatalf("the pending commit after the restart: %v, %v", p.CommitSeq, err)
	}
	before, _ := a.store.PublicState(a.Ctx, id)
	report(alice, ids[0], ports.VerdictOK, "")
	waitNotice(a, bob, id, ids[0], backendpb.AcceptanceNotice_CONFIRMED)
	if st, _ := a.store.PublicState(a.Ctx, id); st.Epoch != before.Epoch+1 || st.CommitSeq != ids[0] {
		t.Fatalf("after the confirmation the state is at epoch %d (commit %d)", st.Epoch, st.CommitSeq)
	}

	// bob catches up; his commit pends, carol refuses it: dropped, bob's
	// inbox quarantined, his next commit refused with ErrQuarantined
	// until alice (a super admin) lifts it.
	bob.Sync()
	c3, gi3 := rawCommit(t, bob, id)
	ids, err = publishRaw(a, bob, id, c3, gi3)
	if err != nil {
		t.Fatal(err)
	}
	report(carol, ids[0], ports.VerdictRefused, ports.ReportTag)
	waitNotice(a, alice, id, ids[0], backendpb.AcceptanceNotice_DROPPED)
	waitNotice(a, alice, id, ids[0], backendpb.AcceptanceNotice_QUARANTINED)
	if _, err := publishRaw(a, bob, id, c3, gi3); !errors.Is(err, ports.ErrQuarantined) {
		t.Fatalf("a quarantined inbox's commit: %v, want ErrQuarantined", err)
	}
	if err := witness(carol).Lift(a.Ctx, ports.Lift{GroupID: id, InboxID: []byte(bob.C.InboxID())}); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("a member's lift: %v", err)
	}
	if err := witness(alice).Lift(a.Ctx, ports.Lift{GroupID: id, InboxID: []byte(bob.C.InboxID())}); err != nil {
		t.Fatal(err)
	}
	if q, _ := a.store.Quarantined(a.Ctx, id); len(q) != 0 {
		t.Fatalf("quarantined after the lift: %v", q)
	}
	c4, gi4 := rawCommit(t, bob, id)
	ids, err = publishRaw(a, bob, id, c4, gi4)
	if err != nil {
		t.Fatal(err)
	}
	report(alice, ids[0], ports.VerdictOK, "")
	waitNotice(a, carol, id, ids[0], backendpb.AcceptanceNotice_CONFIRMED)

	var got []backendpb.AcceptanceNotice_Outcome
	all, _ := alice.Transport.Query(a.Ctx, topicOf(ports.TopicGroupMessages, id), 0, 1000)
	for _, e := range all {
		if n := e.GetEnvelope().GetAcceptanceNotice(); n != nil {
			got = append(got, n.GetOutcome())
		}
	}
	want := []backendpb.AcceptanceNotice_Outcome{backendpb.AcceptanceNotice_CONFIRMED, backendpb.AcceptanceNotice_DROPPED,
		backendpb.AcceptanceNotice_QUARANTINED, backendpb.AcceptanceNotice_LIFTED, backendpb.AcceptanceNotice_CONFIRMED}
	if !slices.Equal(got, want) {
		t.Fatalf("notices on the topic %v, want %v", got, want)
	}
}
