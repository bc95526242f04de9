package deliverydb

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// COMP-041 (API-286…289): ids start at 1, follow input order in a
// batch, are per topic, and survive a retention sweep unreused.
func TestCOMP041_SequenceIDs_Store(t *testing.T) {
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			s, ctx := open(t), context.Background()
			a, b := topic(), topic()
			ids, err := s.Append(ctx, []ports.NewStoredEnvelope{env(a, 1), env(b, 1), env(a, 2)})
			if err != nil || fmt.Sprint(ids) != "[1 1 2]" {
				t.Fatalf("Append = %v, %v", ids, err)
			}
			exp := env(a, 3)
			exp.ExpiresAtNS = 100
			if ids, err = s.Append(ctx, []ports.NewStoredEnvelope{exp}); err != nil || ids[0] != 3 {
				t.Fatalf("Append = %v, %v", ids, err)
			}
			got, err := s.Range(ctx, a, 1, 10)
			if err != nil || len(got) != 2 || got[0].SequenceID != 2 || got[1].Envelope[0] != 3 {
				t.Fatalf("Range = %v, %v", got, err)
			}
			if n, err := s.DeleteExpired(ctx, 100); err != nil || n != 1 {
				t.Fatalf("DeleteExpired = %d, %v", n, err)
			}
			if h, _ := s.Highest(ctx, a); h != 3 {
				t.Fatalf("Highest after sweep = %d, want 3", h)
			}
			if ids, _ = s.Append(ctx, []ports.NewStoredEnvelope{env(a, 4)}); ids[0] != 4 {
				t.Fatalf("id after sweep = %d, want 4 (never reused)", ids[0])
			}
			if n, _ := s.Newest(ctx, a); n.SequenceID != 4 {
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

// Concurrent batches over overlapping topics neither deadlock nor leave a
// gap: each topic holds exactly 1..n (FORK-021's ordering on the store).
func TestFORK021_ConcurrentAppendsNoGaps(t *testing.T) {
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			s, ctx := open(t), context.Background()
			a, b := topic(), topic()
			var wg sync.WaitGroup
			for w := 0; w < 6; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 20; i++ {
						batch := []ports.NewStoredEnvelope{env(a, 1), env(b, 1)}
						if w%2 == 1 {
							batch = []ports.NewStoredEnvelope{env(b, 1), env(a, 1)}
						}
						if _, err := s.Append(ctx, batch); err != nil {
							t.Errorf("Append: %v", err)
							return
						}
					}
				}()
			}
			wg.Wait()
			for _, tp := range [][]byte{a, b} {
				got, err := s.Range(ctx, tp, 0, 1000)
				if err != nil || len(got) != 120 {
					t.Fatalf("Range = %d, %v", len(got), err)
				}
				for i, e := range got {
					if e.SequenceID != uint64(i+1) {
						t.Fatalf("position %d has id %d", i, e.SequenceID)
					}
				}
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
	if _, err := s.Range(ctx, a, 0, 1); !errors.Is(err, ports.ErrClosed) {
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
// envelope): the others commit with consecutive ids and the failed one
// consumes none.
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
	got, _ := s.Range(context.Background(), a, 0, 10)
	if len(got) != 2 || got[1].Envelope[0] != 3 {
		t.Fatalf("stored %v", got)
	}
}
