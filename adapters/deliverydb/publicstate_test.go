package deliverydb

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

func infoTopic(group []byte) []byte { return append([]byte{byte(ports.TopicGroupInfo)}, group...) }

// COMP-370: the state advance and the commit's append commit together or
// not at all; an advance whose expectation fails stores nothing; a newer
// GroupInfo supersedes the older envelopes of its topic.
func TestCOMP370_AppendWithState_Store(t *testing.T) {
	ctx := context.Background()
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			gt := topic()
			group := gt[1:]
			if _, err := s.PublicState(ctx, group); !errors.Is(err, ports.ErrNotFound) {
				t.Fatalf("state of an unknown group: %v, want ErrNotFound", err)
			}
			gi0 := env(infoTopic(group), 1)
			ids, err := s.AppendWithState(ctx, []ports.NewStoredEnvelope{gi0},
				[]ports.PublicStateAdvance{{GroupID: group, Register: true, Epoch: 0, State: []byte("s0"), Commit: -1, GroupInfo: 0}})
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.PublicState(ctx, group)
			if err != nil || st.Epoch != 0 || string(st.State) != "s0" || st.GroupInfoSeq != ids[0] || st.CommitSeq != 0 {
				t.Fatalf("registered state = %+v, %v", st, err)
			}
			// A second registration is refused and stores nothing.
			if _, err := s.AppendWithState(ctx, []ports.NewStoredEnvelope{env(infoTopic(group), 2)},
				[]ports.PublicStateAdvance{{GroupID: group, Register: true, State: []byte("x"), Commit: -1, GroupInfo: 0}}); !errors.Is(err, ports.ErrStateMoved) {
				t.Fatalf("second registration: %v, want ErrStateMoved", err)
			}
			commit := env(gt, 3)
			commit.DedupKey = []byte("digest-1")
			ids, err = s.AppendWithState(ctx, []ports.NewStoredEnvelope{commit, env(infoTopic(group), 4)},
				[]ports.PublicStateAdvance{{GroupID: group, From: 0, Epoch: 1, State: []byte("s1"), Commit: 0, GroupInfo: 1}})
			if err != nil {
				t.Fatal(err)
			}
			st, _ = s.PublicState(ctx, group)
			if st.Epoch != 1 || string(st.State) != "s1" || st.CommitSeq != ids[0] || string(st.CommitDigest) != "digest-1" || st.GroupInfoSeq != ids[1] {
				t.Fatalf("advanced state = %+v, want epoch 1 commit %d group info %d", st, ids[0], ids[1])
			}
			if got, _ := s.Range(ctx, infoTopic(group), 0, 10, 1<<20); len(got) != 1 || got[0].SequenceID != ids[1] {
				t.Fatalf("group info topic = %v, want only the newest (%d)", got, ids[1])
			}
			// A second commit of epoch 0 (the state moved) stores nothing.
			before, _ := s.Highest(ctx, gt)
			if _, err := s.AppendWithState(ctx, []ports.NewStoredEnvelope{env(gt, 5)},
				[]ports.PublicStateAdvance{{GroupID: group, From: 0, Epoch: 1, State: []byte("other"), Commit: 0, GroupInfo: -1}}); !errors.Is(err, ports.ErrStateMoved) || !errors.Is(err, ports.ErrConflict) {
				t.Fatalf("stale advance: %v, want ErrStateMoved", err)
			}
			if after, _ := s.Highest(ctx, gt); after != before {
				t.Fatalf("a refused advance stored an envelope: highest %d → %d", before, after)
			}
			if st2, _ := s.PublicState(ctx, group); string(st2.State) != "s1" {
				t.Fatalf("a refused advance changed the state to %q", st2.State)
			}
			// A GroupInfo of the current epoch alone keeps the state.
			ids, err = s.AppendWithState(ctx, []ports.NewStoredEnvelope{env(infoTopic(group), 6)},
				[]ports.PublicStateAdvance{{GroupID: group, From: 1, FromCommitSeq: st.CommitSeq, Epoch: 1, Commit: -1, GroupInfo: 0}})
			if err != nil {
				t.Fatal(err)
			}
			if st2, _ := s.PublicState(ctx, group); string(st2.State) != "s1" || st2.GroupInfoSeq != ids[0] || st2.CommitSeq != st.CommitSeq {
				t.Fatalf("after a GroupInfo alone: %+v", st2)
			}
		})
	}
}

// COMP-370: two commits of one epoch appended at once — by two stores
// sharing one PostgreSQL database, as two regroupd replicas do, or by one
// SQLite store — store exactly one.
func TestCOMP370_RacingCommitsStoreOne(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			var a, b *Store
			var err error
			if name == "postgres" {
				a = openPG(t)
				b, err = OpenPostgres(ctx, os.Getenv("REGROUP_POSTGRES_DSN"), &Options{Schema: a.schema})
			} else {
				path := filepath.Join(t.TempDir(), "d.db")
				if a, err = OpenSQLite(ctx, path, nil); err == nil {
					defer a.Close()
					b, err = OpenSQLite(ctx, path, nil)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			gt := topic()
			group := gt[1:]
			if _, err := a.AppendWithState(ctx, []ports.NewStoredEnvelope{env(infoTopic(group), 0)},
				[]ports.PublicStateAdvance{{GroupID: group, Register: true, State: []byte{0}, Commit: -1, GroupInfo: 0}}); err != nil {
				t.Fatal(err)
			}
			for epoch := uint64(0); epoch < 10; epoch++ {
				st, err := a.PublicState(ctx, group)
				if err != nil {
					t.Fatal(err)
				}
				const n = 6
				errs := make([]error, n)
				var wg sync.WaitGroup
				for i := range n {
					s := a
					if i%2 == 1 {
						s = b
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						c := env(gt, byte(i))
						c.DedupKey = []byte{byte(epoch), byte(i)}
						_, errs[i] = s.AppendWithState(ctx, []ports.NewStoredEnvelope{c},
							[]ports.PublicStateAdvance{{GroupID: group, From: epoch, FromCommitSeq: st.CommitSeq, Epoch: epoch + 1, State: []byte{byte(i)}, Commit: 0, GroupInfo: -1}})
					}()
				}
				wg.Wait()
				won := 0
				for _, err := range errs {
					switch {
					case err == nil:
						won++
					case !errors.Is(err, ports.ErrStateMoved):
						t.Fatalf("epoch %d: %v", epoch, err)
					}
				}
				got, _ := a.Range(ctx, gt, 0, 100, 1<<20)
				if won != 1 || len(got) != int(epoch)+1 {
					t.Fatalf("epoch %d: %d commits won, topic holds %d, want 1 and %d", epoch, won, len(got), epoch+1)
				}
			}
		})
	}
}

// Stored-format rule: a database recorded at schema version 4 (before
// public states; testdata/deliverydb-v4.db holds three envelopes on one
// group topic) loads, keeps its envelopes and ids, and follows groups.
func TestCOMP370_RecordedV4DatabaseLoads(t *testing.T) {
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
	if err != nil || len(got) != 3 || got[2].SequenceID != 3 || got[2].Envelope[0] != 3 {
		t.Fatalf("recorded envelopes = %v, %v; want ids 1..3", got, err)
	}
	if _, err := s.PublicState(ctx, gt[1:]); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("a recorded group has a state: %v", err)
	}
	ids, err := s.AppendWithState(ctx, []ports.NewStoredEnvelope{env(infoTopic(gt[1:]), 9)},
		[]ports.PublicStateAdvance{{GroupID: gt[1:], Register: true, Epoch: 4, State: []byte("s"), Commit: -1, GroupInfo: 0}})
	if err != nil || ids[0] != 4 {
		t.Fatalf("registration after the upgrade: %v, %v; want id 4", ids, err)
	}
}
