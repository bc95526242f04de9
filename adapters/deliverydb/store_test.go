package deliverydb

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// dbs returns an opener per database this run can reach. PostgreSQL needs
// REGROUP_POSTGRES_DSN; without it the PostgreSQL cases skip, and fail
// when CI=true.
func dbs() map[string]func(t *testing.T) *Store {
	return map[string]func(t *testing.T) *Store{
		"sqlite": func(t *testing.T) *Store {
			s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "d.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		"postgres": func(t *testing.T) *Store { return openPG(t) },
	}
}

func openPG(t *testing.T) *Store {
	t.Helper()
	dsn := os.Getenv("REGROUP_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("REGROUP_POSTGRES_DSN is unset and CI=true: the PostgreSQL store must be tested in CI")
		}
		t.Skip("REGROUP_POSTGRES_DSN unset: set it to a PostgreSQL DSN to test the PostgreSQL store")
	}
	s, err := OpenPostgres(context.Background(), dsn, &Options{Schema: FreshSchemaName()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.DropSchema(context.Background()); s.Close() })
	return s
}

func env(topic []byte, b byte) ports.NewStoredEnvelope {
	return ports.NewStoredEnvelope{Topic: topic, Envelope: []byte{b}, ServerTimestampNS: 1}
}

func topic() []byte {
	b := make([]byte, 33)
	_, _ = rand.Read(b)
	b[0] = 0
	return b
}

// COMP-041 (API-286…289): ids come from one counter shared by every
// topic: the store's first envelope gets 1, a batch's ids increase in
// input order across its topics, a topic's ids strictly increase with
// gaps, Highest is the topic's own highest id, and a retention sweep
// never lets an id be reused.
func TestCOMP041_SequenceIDs_Store(t *testing.T) {
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			s, ctx := open(t), context.Background()
			a, b := topic(), topic()
			ids, err := s.Append(ctx, []ports.NewStoredEnvelope{env(a, 1), env(b, 1), env(a, 2)})
			if err != nil || fmt.Sprint(ids) != "[1 2 3]" {
				t.Fatalf("Append = %v, %v; want [1 2 3] (one counter, starting at 1)", ids, err)
			}
			if h, _ := s.Highest(ctx, b); h != 2 {
				t.Fatalf("Highest(b) = %d, want 2 (the topic's own highest id)", h)
			}
			exp := env(a, 3)
			exp.ExpiresAtNS = 100
			if ids, err = s.Append(ctx, []ports.NewStoredEnvelope{exp}); err != nil || ids[0] != 4 {
				t.Fatalf("Append = %v, %v; want [4]", ids, err)
			}
			got, err := s.Range(ctx, a, 1, 10, 1<<20)
			if err != nil || len(got) != 2 || got[0].SequenceID != 3 || got[1].SequenceID != 4 || got[1].Envelope[0] != 3 {
				t.Fatalf("Range(a, after 1) = %v, %v; want ids 3, 4", got, err)
			}
			if n, err := s.DeleteExpired(ctx, 100); err != nil || n != 1 {
				t.Fatalf("DeleteExpired = %d, %v", n, err)
			}
			if h, _ := s.Highest(ctx, a); h != 4 {
				t.Fatalf("Highest after sweep = %d, want 4", h)
			}
			if ids, _ = s.Append(ctx, []ports.NewStoredEnvelope{env(a, 4)}); ids[0] != 5 {
				t.Fatalf("id after sweep = %d, want 5 (never reused)", ids[0])
			}
			if n, _ := s.Newest(ctx, a); n.SequenceID != 5 {
				t.Fatalf("Newest = %d", n.SequenceID)
			}
			if _, err := s.Newest(ctx, topic()); !errors.Is(err, ports.ErrNotFound) {
				t.Fatalf("Newest on empty: %v", err)
			}
			if h, err := s.Highest(ctx, topic()); err != nil || h != 0 {
				t.Fatalf("Highest on empty = %d, %v", h, err)
			}
		})
	}
}

// API-289 across topics: an append that starts after another one returned
// gets a higher id, whatever the two topics. FORK-077 relies on it: a
// commit-log entry published after its commit was read carries a higher
// id than that commit's id on the group topic.
func TestAPI289_LaterAppendHigherOnAnyTopic_Store(t *testing.T) {
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			s, ctx := open(t), context.Background()
			topics := [][]byte{topic(), topic(), topic()}
			topics[1][0], topics[2][0] = 4, 1 // commit-log and welcome kinds
			var last uint64
			for i := 0; i < 30; i++ {
				tp := topics[i%len(topics)]
				ids, err := s.Append(ctx, []ports.NewStoredEnvelope{env(tp, byte(i))})
				if err != nil {
					t.Fatal(err)
				}
				if ids[0] <= last {
					t.Fatalf("append %d on topic kind %d got id %d after an append that returned %d", i, tp[0], ids[0], last)
				}
				last = ids[0]
			}
		})
	}
}

// appendLoad runs writers that append, each in a loop of rounds, batches
// over topics (some batches name several topics, in varying order), and
// returns the acknowledged ids per topic. Every writer checks API-289 on
// its own appends: a later append's ids are higher than an earlier one's.
func appendLoad(t *testing.T, s *Store, topics [][]byte, writers, rounds int, stop <-chan struct{}) map[string][]uint64 {
	t.Helper()
	var mu sync.Mutex
	acked := make(map[string][]uint64)
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for i := 0; i < rounds; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var batch []ports.NewStoredEnvelope
				switch (w + i) % 3 {
				case 0:
					batch = []ports.NewStoredEnvelope{env(topics[w%len(topics)], 1)}
				case 1:
					batch = []ports.NewStoredEnvelope{env(topics[0], 1), env(topics[len(topics)-1], 1)}
				default:
					batch = []ports.NewStoredEnvelope{env(topics[len(topics)-1], 1), env(topics[0], 1), env(topics[len(topics)-1], 1)}
				}
				ids, err := s.Append(context.Background(), batch)
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				mu.Lock()
				for j, e := range batch {
					if ids[j] <= last {
						t.Errorf("writer %d: id %d after its earlier id %d (API-289)", w, ids[j], last)
					}
					last = ids[j]
					acked[string(e.Topic)] = append(acked[string(e.Topic)], ids[j])
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked
}

// checkAcked fails unless got is exactly the acknowledged ids, ascending.
func checkAcked(t *testing.T, what string, got []uint64, acked []uint64) {
	t.Helper()
	want := append([]uint64(nil), acked...)
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	if len(got) != len(want) {
		t.Fatalf("%s holds %d envelopes, %d were acknowledged", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: position %d has id %d, acknowledged id there is %d", what, i, got[i], want[i])
		}
	}
}

// FORK-021's ordering on the store: concurrent batches over overlapping
// topics neither deadlock nor lose or duplicate an id; each topic reads
// back as exactly the ids its appends were acknowledged with, ascending,
// and no id is given to two envelopes across topics.
func TestFORK021_ConcurrentAppends_AckedSetReadsBack(t *testing.T) {
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			s, ctx := open(t), context.Background()
			topics := [][]byte{topic(), topic(), topic()}
			acked := appendLoad(t, s, topics, 6, 20, nil)
			all := make(map[uint64]bool)
			for _, tp := range topics {
				got, err := s.Range(ctx, tp, 0, 1000, 1<<30)
				if err != nil {
					t.Fatal(err)
				}
				ids := make([]uint64, len(got))
				for i, e := range got {
					ids[i] = e.SequenceID
					if all[e.SequenceID] {
						t.Fatalf("id %d stored on two topics", e.SequenceID)
					}
					all[e.SequenceID] = true
				}
				checkAcked(t, "topic", ids, acked[string(tp)])
				if h, _ := s.Highest(ctx, tp); len(ids) > 0 && h != ids[len(ids)-1] {
					t.Fatalf("Highest = %d, newest stored id %d", h, ids[len(ids)-1])
				}
			}
		})
	}
}

// COMP-041, which FORK-030 relies on: within one topic an id is never
// visible before a lower id of the topic, so a reader that re-reads from
// its cursor while publishers append ends with exactly the acknowledged
// ids, ascending: nothing missed, nothing twice.
func TestCOMP041_ReaderFromCursorMissesNothing_Store(t *testing.T) {
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			s, ctx := open(t), context.Background()
			topics := [][]byte{topic(), topic(), topic(), topic()}
			stop := make(chan struct{})
			ackedC := make(chan map[string][]uint64)
			go func() { ackedC <- appendLoad(t, s, topics, 8, 1<<30, stop) }()
			read := make([][]uint64, len(topics))
			cursor := make([]uint64, len(topics))
			drain := func() {
				for i, tp := range topics {
					for {
						page, err := s.Range(ctx, tp, cursor[i], 50, 1<<20)
						if err != nil {
							t.Fatal(err)
						}
						if len(page) == 0 {
							break
						}
						for _, e := range page {
							read[i] = append(read[i], e.SequenceID)
							cursor[i] = e.SequenceID
						}
					}
				}
			}
			for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); {
				drain()
			}
			close(stop)
			acked := <-ackedC
			drain()
			for i, tp := range topics {
				checkAcked(t, fmt.Sprintf("reader of topic %d", i), read[i], acked[string(tp)])
			}
		})
	}
}

// Data and counters survive a reopen; migrations apply once.
func TestSQLiteReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	ctx := context.Background()
	s, err := OpenSQLite(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := topic()
	if _, err := s.Append(ctx, []ports.NewStoredEnvelope{env(a, 1)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Range(ctx, a, 0, 1, 1<<20); !errors.Is(err, ports.ErrClosed) {
		t.Fatalf("Range after Close: %v", err)
	}
	s, err = OpenSQLite(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ids, err := s.Append(ctx, []ports.NewStoredEnvelope{env(a, 2)}); err != nil || ids[0] != 2 {
		t.Fatalf("Append after reopen = %v, %v", ids, err)
	}
	if ids, err := s.Append(ctx, []ports.NewStoredEnvelope{env(topic(), 1)}); err != nil || ids[0] != 3 {
		t.Fatalf("Append to a new topic after reopen = %v, %v; want 3 (the shared counter persists)", ids, err)
	}
}

func TestCanceledContext(t *testing.T) {
	s := dbs()["sqlite"](t)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := s.Append(ctx, []ports.NewStoredEnvelope{env(topic(), 1)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Append with expired ctx: %v", err)
	}
}

// With Notify, a store in another process (here: another Store on the
// same schema) reports each committed append's topic through Watch.
func TestWatch_PostgresNotify(t *testing.T) {
	a := openPG(t)
	b, err := OpenPostgres(context.Background(), os.Getenv("REGROUP_POSTGRES_DSN"), &Options{Schema: a.schema, Notify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a.notify = true
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	got := make(chan []byte, 100)
	go b.Watch(ctx, func(topic []byte) { got <- topic })
	want := topic()
	for {
		if _, err := a.Append(ctx, []ports.NewStoredEnvelope{env(want, 1)}); err != nil {
			t.Fatal(err)
		}
		select {
		case tp := <-got:
			if tp != nil && string(tp) != string(want) {
				t.Fatalf("watch reported topic %x, want %x", tp, want)
			}
			if tp != nil {
				return
			}
		case <-time.After(200 * time.Millisecond): // LISTEN not yet in place
		case <-ctx.Done():
			t.Fatal("no report within 15s")
		}
	}
}

func TestWatch_SQLiteRefuses(t *testing.T) {
	s := dbs()["sqlite"](t)
	if err := s.Watch(context.Background(), func([]byte) {}); err == nil {
		t.Fatal("Watch on SQLite did not fail")
	}
}

// One group commit over three appends, the middle one failing (a NULL
// envelope): the others commit, and the failed one's savepoint rolls its
// id back.
func TestGroupCommit_FailureIsolated(t *testing.T) {
	s := dbs()["sqlite"](t)
	a := topic()
	mk := func(e ports.NewStoredEnvelope) *appendReq {
		return &appendReq{ctx: context.Background(), envs: []ports.NewStoredEnvelope{e}, done: make(chan struct{})}
	}
	bad := env(a, 2)
	bad.Envelope = nil
	batch := []*appendReq{mk(env(a, 1)), mk(bad), mk(env(a, 3))}
	s.group.commit(batch)
	if batch[0].err != nil || batch[2].err != nil || batch[1].err == nil {
		t.Fatalf("errors = %v, %v, %v; want only the middle one", batch[0].err, batch[1].err, batch[2].err)
	}
	if batch[0].ids[0] != 1 || batch[2].ids[0] != 2 {
		t.Fatalf("ids = %v, %v; want 1 and 2", batch[0].ids, batch[2].ids)
	}
	got, _ := s.Range(context.Background(), a, 0, 10, 1<<20)
	if len(got) != 2 || got[1].Envelope[0] != 3 {
		t.Fatalf("stored %v", got)
	}
}
