package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Unit tests of the client's rules of two-phase commit acceptance
// (ADR-0030) against acceptanceFake; the gate tests run them against a
// regroupd process.

type pendingWorld struct {
	w                 *world.World
	f                 *acceptanceFake
	alice, bob, carol *world.Member
	id                []byte
	epoch             uint64
	all               []*world.Member
}

// newPendingWorld makes a group of alice (its creator, a super admin),
// bob and carol, each on the fake.
func newPendingWorld(t *testing.T, mls map[string]func(ports.MLS) ports.MLS) *pendingWorld {
	w := world.NewFor(t, "embedded", time.Minute)
	f := newAcceptanceFake()
	mk := func(name string) *world.Member {
		cfg := f.config(name)
		cfg.MLS = mls[name]
		return w.Member(name, cfg)
	}
	p := &pendingWorld{w: w, f: f, alice: mk("alice"), bob: mk("bob"), carol: mk("carol")}
	p.all = []*world.Member{p.alice, p.bob, p.carol}
	g, err := p.alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g", Members: []string{p.bob.C.InboxID(), p.carol.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	p.id = g.ID()
	world.SyncAll(p.all...)
	world.Agree(t, p.id, p.all...)
	p.epoch = p.alice.Info(p.id).Epoch
	return p
}

// bobCommits starts bob's key update with the fake marking it pending and
// returns its result channel and the commit's sequence id.
func (p *pendingWorld) bobCommits(t *testing.T, ctx context.Context) (<-chan error, uint64) {
	p.f.set(true)
	done := make(chan error, 1)
	go func() { done <- p.bob.Conv(p.id).UpdateKeys(ctx) }()
	return done, p.f.waitPending(t, p.id)
}

func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("commit call did not return")
		return nil
	}
}

func entryAt(t *testing.T, m *world.Member, id []byte, seq uint64) bool {
	t.Helper()
	es, err := m.Conv(id).LocalEntries(m.W.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.CommitSequenceID == seq {
			return true
		}
	}
	return false
}

func notForked(t *testing.T, id []byte, ms ...*world.Member) {
	t.Helper()
	for _, m := range ms {
		st, err := m.Conv(id).SyncCommitLog(m.W.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st == ports.ForkForked {
			t.Fatalf("%s reads forked", m.Name)
		}
	}
}

// TestCOMP435_OwnPendingCommitHeldUntilConfirmed: the committer holds its
// pending commit unmerged, witnesses report OK without merging, messages of
// the current epoch flow, and CONFIRMED merges it everywhere, the commit
// log recording it then and not before.
func TestCOMP435_OwnPendingCommitHeldUntilConfirmed(t *testing.T) {
	p := newPendingWorld(t, nil)
	done, seq := p.bobCommits(t, p.w.Ctx)
	p.alice.Sync()
	p.carol.Sync()
	for _, m := range p.all {
		if got := m.Info(p.id).Epoch; got != p.epoch {
			t.Fatalf("%s merged the pending commit: epoch %d, want %d", m.Name, got, p.epoch)
		}
		if entryAt(t, m, p.id, seq) {
			t.Fatalf("%s recorded a commit-log entry for the pending commit", m.Name)
		}
	}
	reps := p.f.reportsOn(seq)
	if len(reps) != 2 || reps["alice"].Verdict != ports.VerdictOK || reps["carol"].Verdict != ports.VerdictOK {
		t.Fatalf("reports on the pending commit: %+v, want OK from alice and carol", reps)
	}
	// The current epoch's messages flow meanwhile.
	if _, err := p.carol.Conv(p.id).Send(p.w.Ctx, []byte("meanwhile")); err != nil {
		t.Fatal(err)
	}
	p.alice.Sync()
	if got := texts(t, p.alice, p.id); len(got) != 1 || got[0] != "meanwhile" {
		t.Fatalf("alice holds %q", got)
	}
	p.f.notice(t, p.id, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_CONFIRMED, CommitSequenceId: seq, Epoch: p.epoch})
	if err := wait(t, done); err != nil {
		t.Fatalf("bob's commit: %v", err)
	}
	world.SyncAll(p.all...)
	world.Agree(t, p.id, p.all...)
	for _, m := range p.all {
		if got := m.Info(p.id).Epoch; got != p.epoch+1 {
			t.Fatalf("%s at epoch %d after the confirmation, want %d", m.Name, got, p.epoch+1)
		}
		if !entryAt(t, m, p.id, seq) {
			t.Fatalf("%s recorded no entry for the confirmed commit", m.Name)
		}
	}
	notForked(t, p.id, p.all...)
}

// TestCOMP436_DroppedCommitForgottenNoFork: a dropped commit is discarded
// by every member, the committer's call fails with ErrCommitDropped, the
// quarantine notice is listed, no member records an entry for it or reads
// forked, and the group goes on.
func TestCOMP436_DroppedCommitForgottenNoFork(t *testing.T) {
	p := newPendingWorld(t, nil)
	done, seq := p.bobCommits(t, p.w.Ctx)
	world.Round(p.alice, p.carol)
	p.f.notice(t, p.id, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_DROPPED, CommitSequenceId: seq,
		InboxId: []byte(p.bob.C.InboxID()), Reports: []*backendpb.AcceptanceReport{{Verdict: backendpb.AcceptanceReport_REFUSED, Reason: ports.ReportTag}}})
	p.f.notice(t, p.id, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_QUARANTINED, InboxId: []byte(p.bob.C.InboxID())})
	if err := wait(t, done); !errors.Is(err, client.ErrCommitDropped) || !strings.Contains(err.Error(), "tag") {
		t.Fatalf("bob's dropped commit: %v, want ErrCommitDropped naming tag", err)
	}
	p.f.set(false)
	world.SyncAll(p.all...)
	world.Agree(t, p.id, p.all...)
	for _, m := range p.all {
		if got := m.Info(p.id).Epoch; got != p.epoch {
			t.Fatalf("%s at epoch %d after the drop, want %d", m.Name, got, p.epoch)
		}
		if entryAt(t, m, p.id, seq) {
			t.Fatalf("%s recorded an entry for the dropped commit", m.Name)
		}
		q, err := m.Conv(p.id).Quarantined(p.w.Ctx)
		if err != nil || len(q) != 1 || q[0] != p.bob.C.InboxID() {
			t.Fatalf("%s quarantine list %v %v", m.Name, q, err)
		}
	}
	notForked(t, p.id, p.all...)
	if err := p.alice.Conv(p.id).UpdateKeys(p.w.Ctx); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(p.all...)
	world.Agree(t, p.id, p.all...)
	notForked(t, p.id, p.all...)
	if err := p.alice.Conv(p.id).LiftQuarantine(p.w.Ctx, p.bob.C.InboxID()); err != nil || len(p.f.lifts) != 1 {
		t.Fatalf("lift: %v %v", err, p.f.lifts)
	}
	p.f.notice(t, p.id, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_LIFTED, InboxId: []byte(p.bob.C.InboxID())})
	p.carol.Sync()
	if q, _ := p.carol.Conv(p.id).Quarantined(p.w.Ctx); len(q) != 0 {
		t.Fatalf("carol's quarantine list after the lift: %v", q)
	}
}

// TestCOMP442_ExpiredCommitRetried: an expired (or superseded) own commit
// is cleared and the change built again, which is then confirmed.
func TestCOMP442_ExpiredCommitRetried(t *testing.T) {
	for _, o := range []backendpb.AcceptanceNotice_Outcome{backendpb.AcceptanceNotice_EXPIRED, backendpb.AcceptanceNotice_SUPERSEDED} {
		t.Run(o.String(), func(t *testing.T) {
			p := newPendingWorld(t, nil)
			done, seq := p.bobCommits(t, p.w.Ctx)
			p.f.notice(t, p.id, &backendpb.AcceptanceNotice{Outcome: o, CommitSequenceId: seq})
			var seq2 uint64
			for range 3000 {
				if seq2 = p.f.waitPending(t, p.id); seq2 != seq {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if seq2 == seq {
				t.Fatal("the change was not built again")
			}
			p.f.notice(t, p.id, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_CONFIRMED, CommitSequenceId: seq2})
			if err := wait(t, done); err != nil {
				t.Fatalf("bob's retried commit: %v", err)
			}
			world.SyncAll(p.all...)
			world.Agree(t, p.id, p.all...)
			if got := p.alice.Info(p.id).Epoch; got != p.epoch+1 {
				t.Fatalf("epoch %d, want %d", got, p.epoch+1)
			}
			notForked(t, p.id, p.all...)
		})
	}
}

// TestCOMP437_PendingCommitSurvivesRestart: a caller whose context ends
// gets ErrCommitAwaiting; the commit stays held across a restart and a
// later sync merges it on confirmation.
func TestCOMP437_PendingCommitSurvivesRestart(t *testing.T) {
	for _, when := range []string{"published", "awaiting"} {
		t.Run(when, func(t *testing.T) { pendingSurvivesRestart(t, when) })
	}
}

// pendingSurvivesRestart ends bob's context right after the service
// stored his commit, before he read it back ("published"), or while he
// waits for its decision ("awaiting"): either way the call reports
// ErrCommitAwaiting and the commit stays held.
func pendingSurvivesRestart(t *testing.T, when string) {
	p := newPendingWorld(t, nil)
	ctx, cancel := context.WithCancel(p.w.Ctx)
	defer cancel()
	if when == "published" {
		p.f.published, p.f.refuse = cancel, true
	}
	done, seq := p.bobCommits(t, ctx)
	if when == "awaiting" {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}
	if err := wait(t, done); !errors.Is(err, client.ErrCommitAwaiting) || !errors.Is(err, context.Canceled) {
		t.Fatalf("bob's cancelled wait: %v, want ErrCommitAwaiting and context.Canceled", err)
	}
	p.f.published = nil
	p.bob.Restart(nil)
	p.bob.Sync()
	if got := p.bob.Info(p.id).Epoch; got != p.epoch {
		t.Fatalf("bob merged before the decision: epoch %d", got)
	}
	p.f.notice(t, p.id, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_CONFIRMED, CommitSequenceId: seq})
	world.SyncAll(p.all...)
	world.Agree(t, p.id, p.all...)
	if got := p.bob.Info(p.id).Epoch; got != p.epoch+1 {
		t.Fatalf("bob at epoch %d after the confirmation, want %d", got, p.epoch+1)
	}
}

// refusing makes an engine refuse every commit it processes while armed,
// as a witness does a commit with a wrong confirmation tag.
type refusing struct {
	*mlsfault.Engine
	armed *bool
}

func (r refusing) Process(ctx context.Context, tx ports.Tx, groupID, msg []byte) (ports.Processed, error) {
	p, err := r.Engine.Process(ctx, tx, groupID, msg)
	if err == nil && *r.armed && p.Kind == ports.ProcessedCommit {
		return ports.Processed{}, fmt.Errorf("%w: confirmation tag", ports.ErrInvalid)
	}
	return p, err
}

// TestCOMP438_WitnessRefusesWithReasonClass: a witness that cannot process
// the pending commit reports REFUSED with the reason class; one that finds
// no matching GroupInfo refuses with group-info.
func TestCOMP438_WitnessRefusesWithReasonClass(t *testing.T) {
	armed := false
	p := newPendingWorld(t, map[string]func(ports.MLS) ports.MLS{"carol": func(m ports.MLS) ports.MLS { return refusing{m.(*mlsfault.Engine), &armed} }})
	armed = true
	p.f.hideGI = true
	_, seq := p.bobCommits(t, p.w.Ctx)
	world.Round(p.alice, p.carol)
	reps := p.f.reportsOn(seq)
	if r := reps["carol"]; r.Verdict != ports.VerdictRefused || r.Reason != ports.ReportTag {
		t.Fatalf("carol's report %+v, want refused/tag", r)
	}
	if r := reps["alice"]; r.Verdict != ports.VerdictRefused || r.Reason != ports.ReportGroupInfo {
		t.Fatalf("alice's report %+v (no GroupInfo published), want refused/group-info", r)
	}
}

// TestCOMP441_StuckOnConfirmedReportsAndResyncs: a member that cannot
// process a confirmed commit reports STUCK and repairs itself by resync.
func TestCOMP441_StuckOnConfirmedReportsAndResyncs(t *testing.T) {
	armed := false
	p := newPendingWorld(t, map[string]func(ports.MLS) ports.MLS{"carol": func(m ports.MLS) ports.MLS { return refusing{m.(*mlsfault.Engine), &armed} }})
	done, seq := p.bobCommits(t, p.w.Ctx)
	world.Round(p.alice, p.carol)
	p.f.notice(t, p.id, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_CONFIRMED, CommitSequenceId: seq})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	p.f.set(false)
	armed = true
	p.carol.Sync()
	armed = false
	if r := p.f.reportsOn(seq)["carol"]; r.Verdict != ports.VerdictOK {
		t.Fatalf("carol's first report %+v, want OK", r)
	}
	stuck := false
	for _, r := range p.f.reports {
		if r.who == "carol" && r.r.Verdict == ports.VerdictStuck && r.r.CommitSeq == seq && r.r.Reason == ports.ReportTag {
			stuck = true
		}
	}
	if !stuck {
		t.Fatalf("carol sent no stuck report: %+v", p.f.reports)
	}
	world.SyncAll(p.all...)
	world.Agree(t, p.id, p.all...)
	if got := p.carol.Info(p.id).Epoch; got != p.epoch+2 {
		t.Fatalf("carol at epoch %d, want %d (the confirmed commit, then her resync)", got, p.epoch+2)
	}
}

// TestCOMP447_WelcomeOfPendingCommitHeld: the committer sends the
// Welcomes of a pending commit only once it is confirmed; a joiner that
// reads the commit at its Welcome's message_cursor still pending holds the
// Welcome, joins once it reads the confirmation, and rejects it when it
// reads a drop.
func TestCOMP447_WelcomeOfPendingCommitHeld(t *testing.T) {
	for _, dropped := range []bool{false, true} {
		t.Run(fmt.Sprintf("dropped=%v", dropped), func(t *testing.T) {
			p := newPendingWorld(t, nil)
			dave := p.w.Member("dave", p.f.config("dave"))
			p.f.set(true)
			done := make(chan error, 1)
			go func() { done <- p.alice.Conv(p.id).AddMembers(p.w.Ctx, dave.C.InboxID()) }()
			seq := p.f.waitPending(t, p.id)
			time.Sleep(50 * time.Millisecond)
			dave.Sync()
			if _, err := dave.C.Conversation(p.w.Ctx, p.id); err == nil {
				t.Fatal("dave joined from a Welcome sent before the confirmation")
			}
			// dave reads the topic as if the decision were not there yet.
			nseq := p.f.notice(t, p.id, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_CONFIRMED, CommitSequenceId: seq})
			p.f.override("dave", nseq, nil)
			if err := wait(t, done); err != nil {
				t.Fatal(err)
			}
			dave.Sync()
			if _, err := dave.C.Conversation(p.w.Ctx, p.id); err == nil {
				t.Fatal("dave joined while the commit at its anchor was pending")
			}
			if held, err := dave.C.HeldWelcomes(p.w.Ctx); err != nil || len(held) != 1 {
				t.Fatalf("dave holds %d Welcomes (%v), want 1", len(held), err)
			}
			if dropped {
				p.f.override("dave", nseq, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_DROPPED, CommitSequenceId: seq})
				dave.Sync()
				rej, err := dave.C.RejectedWelcomes(p.w.Ctx)
				if err != nil || len(rej) != 1 || rej[0].Rule != "COMP-447" {
					t.Fatalf("dave's rejected Welcomes %+v %v, want one by COMP-447", rej, err)
				}
				if _, err := dave.C.Conversation(p.w.Ctx, p.id); err == nil {
					t.Fatal("dave installed the Welcome of a dropped commit")
				}
				return
			}
			p.f.clearOverrides("dave")
			dave.Sync()
			world.SyncAll(append(p.all, dave)...)
			world.Agree(t, p.id, append(p.all, dave)...)
		})
	}
}
