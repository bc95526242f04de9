package deliverydb

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// COMP-411, COMP-415: a pending advance stores the commit and its
// GroupInfo marked pending beside the current state; while it pends,
// a second pending advance and a plain one fail with ErrStateMoved
// and store nothing; the newest GroupInfo read skips the pending one; a
// confirmation moves it to current (the old state kept as previous), the
// GroupInfo becomes the newest; a second decision of the same commit
// fails with ErrStateMoved; a drop deletes the pending GroupInfo and
// quarantines.
func TestCOMP415_PendingAdvanceAndDecide_Store(t *testing.T) {
	ctx := context.Background()
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			gt := topic()
			group := gt[1:]
			ids, err := s.AppendWithState(ctx, []ports.NewStoredEnvelope{env(infoTopic(group), 1)},
				[]ports.PublicStateAdvance{{GroupID: group, Register: true, Epoch: 0, State: []byte("s0"), Commit: -1, GroupInfo: 0}})
			if err != nil {
				t.Fatal(err)
			}
			gi0 := ids[0]
			stage := func(b byte) ([]uint64, error) {
				c := env(gt, b)
				c.DedupKey = []byte{b}
				return s.AppendWithState(ctx, []ports.NewStoredEnvelope{c, env(infoTopic(group), b+1)},
					[]ports.PublicStateAdvance{{GroupID: group, From: 0, Epoch: 1, State: []byte{'p', b}, Commit: 0, GroupInfo: 1,
						Pending: &ports.PendingAdvance{Committer: "bob", CreatedNS: 5}}})
			}
			ids, err = stage(2)
			if err != nil {
				t.Fatal(err)
			}
			if st, _ := s.PublicState(ctx, group); st.Epoch != 0 {
				t.Fatal("a pending advance moved the current state")
			}
			p, err := s.PendingCommit(ctx, group)
			if err != nil || p.CommitSeq != ids[0] || p.GroupInfoSeq != ids[1] || p.Committer != "bob" || p.Epoch != 1 {
				t.Fatalf("pending = %+v, %v", p, err)
			}
			if got, _ := s.Range(ctx, gt, 0, 10, 1<<20); len(got) != 1 || !got[0].Pending {
				t.Fatalf("the pending commit is not marked: %+v", got)
			}
			if n, _ := s.Newest(ctx, infoTopic(group)); n.SequenceID != gi0 {
				t.Fatalf("newest group info %d while pending, want %d", n.SequenceID, gi0)
			}
			if _, err := stage(4); !errors.Is(err, ports.ErrStateMoved) {
				t.Fatalf("a second pending commit: %v", err)
			}
			if _, err := s.AppendWithState(ctx, []ports.NewStoredEnvelope{env(gt, 6)},
				[]ports.PublicStateAdvance{{GroupID: group, From: 0, Epoch: 1, State: []byte("x"), Commit: 0, GroupInfo: -1}}); !errors.Is(err, ports.ErrStateMoved) {
				t.Fatalf("a plain advance while pending: %v", err)
			}
			if added, err := s.AddReport(ctx, ports.AcceptanceReport{GroupID: group, CommitSeq: ids[0], InstallationKey: []byte("k"), InboxID: "carol",
				Verdict: ports.VerdictOK, Counts: true, ReportedNS: 7}); err != nil || !added {
				t.Fatalf("report: %v %v", added, err)
			}
			if added, _ := s.AddReport(ctx, ports.AcceptanceReport{GroupID: group, CommitSeq: ids[0], InstallationKey: []byte("k"), InboxID: "carol",
				Verdict: ports.VerdictRefused, Reason: "tag", Counts: true, ReportedNS: 8}); added {
				t.Fatal("a second report of one installation was kept")
			}
			if p, _ := s.PendingCommit(ctx, group); p.FirstReportNS != 7 {
				t.Fatalf("first report at %d", p.FirstReportNS)
			}
			d := ports.AcceptanceDecision{GroupID: group, CommitSeq: ids[0], Outcome: ports.OutcomeConfirmed, DecidedNS: 9,
				Notices: []ports.NewStoredEnvelope{env(gt, 9)}}
			if _, err := s.Decide(ctx, d); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Decide(ctx, d); !errors.Is(err, ports.ErrStateMoved) {
				t.Fatalf("a second decision: %v", err)
			}
			st, _ := s.PublicState(ctx, group)
			prev, _ := s.PreviousState(ctx, group)
			if st.Epoch != 1 || st.CommitSeq != ids[0] || st.GroupInfoSeq != ids[1] || prev.Epoch != 0 || string(prev.State) != "s0" {
				t.Fatalf("after the confirmation: current %+v previous %+v", st, prev)
			}
			if n, _ := s.Newest(ctx, infoTopic(group)); n.SequenceID != ids[1] || n.Pending {
				t.Fatalf("newest group info %d (pending %v), want %d", n.SequenceID, n.Pending, ids[1])
			}
			// The next pending commit is dropped.
			c := env(gt, 20)
			ids, err = s.AppendWithState(ctx, []ports.NewStoredEnvelope{c, env(infoTopic(group), 21)},
				[]ports.PublicStateAdvance{{GroupID: group, From: 1, FromCommitSeq: st.CommitSeq, Epoch: 2, State: []byte("p2"), Commit: 0, GroupInfo: 1,
					Pending: &ports.PendingAdvance{Committer: "bob"}}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Decide(ctx, ports.AcceptanceDecision{GroupID: group, CommitSeq: ids[0], Outcome: ports.OutcomeDropped, Quarantine: "bob"}); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Range(ctx, infoTopic(group), 0, 10, 1<<20); len(got) != 1 || got[0].SequenceID == ids[1] {
				t.Fatalf("group infos after the drop %+v", got)
			}
			if q, _ := s.Quarantined(ctx, group); len(q) != 1 || q[0] != "bob" {
				t.Fatalf("quarantined %v", q)
			}
			if ac, _ := s.AcceptedCommit(ctx, group, ids[0]); ac.Outcome != ports.OutcomeDropped {
				t.Fatalf("outcome %v", ac.Outcome)
			}
		})
	}
}

// Stored-format rule (migration 6): the database recorded at schema
// version 4 loads with its envelopes not pending, and takes a pending
// commit.
func TestCOMP415_RecordedV4DatabaseTakesPendingCommits(t *testing.T) {
	ctx := context.Background()
	raw, err := os.ReadFile("testdata/deliverydb-v4.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "v4.db")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSQLite(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gt := append([]byte{0}, []byte("0123456789abcdef")...)
	got, err := s.Range(ctx, gt, 0, 10, 1<<20)
	if err != nil || len(got) != 3 || got[0].Pending || got[2].Pending {
		t.Fatalf("recorded envelopes = %+v, %v", got, err)
	}
	if _, err := s.AppendWithState(ctx, []ports.NewStoredEnvelope{env(infoTopic(gt[1:]), 9)},
		[]ports.PublicStateAdvance{{GroupID: gt[1:], Register: true, Epoch: 4, State: []byte("s"), Commit: -1, GroupInfo: 0}}); err != nil {
		t.Fatal(err)
	}
	ids, err := s.AppendWithState(ctx, []ports.NewStoredEnvelope{env(gt, 10)},
		[]ports.PublicStateAdvance{{GroupID: gt[1:], From: 4, Epoch: 5, State: []byte("t"), Commit: 0, GroupInfo: -1,
			Pending: &ports.PendingAdvance{Committer: "c"}}})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.PendingCommit(ctx, gt[1:]); err != nil || p.CommitSeq != ids[0] {
		t.Fatalf("pending %+v, %v", p, err)
	}
}
