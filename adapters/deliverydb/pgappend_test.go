package deliverydb

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// COMP-144 across processes: appends of one sealed entry through two
// stores sharing a PostgreSQL schema (two regroupd replicas), each with
// several writers, all succeed, all get the one stored copy's id, and the
// topic holds it once. The dedup lookup runs under the topic's row lock,
// so no duplicate reaches the unique index and fails its publisher.
func TestCOMP144_ConcurrentDuplicatesAcrossStores_Postgres(t *testing.T) {
	a := openPG(t)
	b, err := OpenPostgres(context.Background(), os.Getenv("REGROUP_POSTGRES_DSN"), &Options{Schema: a.schema, Writers: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	tp := topic()
	// The topic exists: its row is there to lock (a new topic's row is
	// created by the first append, which the others wait for anyway).
	if _, err := a.Append(ctx, []ports.NewStoredEnvelope{env(tp, 0)}); err != nil {
		t.Fatal(err)
	}
	const rounds, n = 30, 8
	stored := 1
	for round := range rounds {
		entry := env(tp, 7)
		entry.DedupKey = []byte{byte(round)}
		ids := make([]uint64, n)
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
				got, err := s.Append(ctx, []ports.NewStoredEnvelope{entry})
				if err == nil {
					ids[i] = got[0]
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d: append %d of the same entry failed: %v", round, i, errs[i])
			}
			if ids[i] != ids[0] {
				t.Fatalf("round %d: appends of one entry got ids %v, want one id", round, ids)
			}
		}
		stored++
	}
	got, err := a.Range(ctx, tp, 0, 1000, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != stored {
		t.Fatalf("topic holds %d envelopes, want %d: one per entry", len(got), stored)
	}
}

// A group of appends the database refuses is tried one append at a time:
// only the bad one fails. (An envelope of more than 1 GiB is what a
// bytea refuses; here the topic row of the bad append is made to refuse
// by a CHECK constraint the test adds.)
func TestGroupCommit_FailureIsolated_Postgres(t *testing.T) {
	s := openPG(t)
	var mu sync.Mutex
	counted := map[string]int{}
	s.hooks = Hooks{
		DBError: func(op string) { mu.Lock(); counted["error "+op]++; mu.Unlock() },
		Retry:   func(op string) { mu.Lock(); counted["retry "+op]++; mu.Unlock() },
	}
	ctx := context.Background()
	if err := s.db.Exec(`ALTER TABLE delivery_envelopes ADD CONSTRAINT test_no_x CHECK (envelope <> '\x78'::bytea)`).Error; err != nil {
		t.Fatal(err)
	}
	good, bad := topic(), topic()
	reqs := []*appendReq{
		{ctx: ctx, envs: []ports.NewStoredEnvelope{env(good, 1)}},
		{ctx: ctx, envs: []ports.NewStoredEnvelope{env(bad, 'x')}},
		{ctx: ctx, envs: []ports.NewStoredEnvelope{env(good, 2)}},
	}
	if err := s.pgAppend(reqs); err == nil {
		t.Fatal("the group's statement succeeded with a refused envelope")
	}
	if reqs[0].err != nil || reqs[2].err != nil || reqs[1].err == nil {
		t.Fatalf("errors %v, %v, %v: want only the refused append to fail", reqs[0].err, reqs[1].err, reqs[2].err)
	}
	if reqs[2].ids[0] <= reqs[0].ids[0] {
		t.Fatalf("ids %v then %v: the retried appends keep their order", reqs[0].ids, reqs[2].ids)
	}
	if got, _ := s.Range(ctx, good, 0, 10, 1<<20); len(got) != 2 {
		t.Fatalf("the good topic holds %d envelopes, want 2", len(got))
	}
	if got, _ := s.Range(ctx, bad, 0, 10, 1<<20); len(got) != 0 {
		t.Fatalf("the refused envelope was stored")
	}
	// The group's statement and the bad append's own failed; the group
	// was retried once (regroupd_database_errors_total, _retries_total).
	mu.Lock()
	defer mu.Unlock()
	if counted["error append"] != 2 || counted["retry append"] != 1 {
		t.Fatalf("hooks heard %v, want 2 append errors and 1 append retry", counted)
	}
}
