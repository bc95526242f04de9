package deliverydb

import (
	"bytes"
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

func sized(topic []byte, n int, b byte) ports.NewStoredEnvelope {
	return ports.NewStoredEnvelope{Topic: topic, Envelope: bytes.Repeat([]byte{b}, n), ServerTimestampNS: 1}
}

// COMP-141: Range applies the byte budget in the database. The expected
// page is computed here from the sizes appended: the longest prefix whose
// sizes sum to at most the budget, and never less than one envelope.
func TestCOMP141_RangeByteBudget(t *testing.T) {
	sizes := []int{300, 200, 500, 100, 1000, 50}
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			ctx := context.Background()
			tp := topic()
			var envs []ports.NewStoredEnvelope
			for i, n := range sizes {
				envs = append(envs, sized(tp, n, byte(i)))
			}
			ids, err := s.Append(ctx, envs)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				after       int // index of the cursor's envelope, -1 for 0
				limit, cost int
			}{
				{-1, 10, 1000}, // 300+200+500 fit exactly
				{-1, 10, 999},  // the third would exceed
				{-1, 2, 5000},  // the row limit binds first
				{-1, 10, 1},    // the first envelope comes whatever its size
				{3, 10, 10},    // from a cursor: the 1000-byte one alone
				{4, 10, 100},   // the last one
			} {
				after := uint64(0)
				if c.after >= 0 {
					after = ids[c.after]
				}
				var want []uint64
				sum := 0
				for i := c.after + 1; i < len(sizes) && len(want) < c.limit; i++ {
					if sum+sizes[i] > c.cost && len(want) > 0 {
						break
					}
					sum += sizes[i]
					want = append(want, ids[i])
				}
				got, err := s.Range(ctx, tp, after, c.limit, c.cost)
				if err != nil {
					t.Fatal(err)
				}
				var gotIDs []uint64
				for i, e := range got {
					gotIDs = append(gotIDs, e.SequenceID)
					if len(e.Envelope) != sizes[c.after+1+i] || e.Envelope[0] != byte(c.after+1+i) {
						t.Fatalf("envelope %d read back wrong", e.SequenceID)
					}
				}
				if !equalIDs(gotIDs, want) {
					t.Fatalf("Range(after %d, limit %d, budget %d) = %v, want %v", after, c.limit, c.cost, gotIDs, want)
				}
			}
		})
	}
}

func equalIDs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// COMP-143: a cursor above 2^63-1 reads nothing (no id can be that high);
// it must not wrap to a negative number and read the topic from the start.
func TestCOMP143_RangeCursorAboveInt64(t *testing.T) {
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			tp := topic()
			if _, err := s.Append(context.Background(), []ports.NewStoredEnvelope{env(tp, 1)}); err != nil {
				t.Fatal(err)
			}
			for _, after := range []uint64{math.MaxUint64, math.MaxInt64 + 1, math.MaxInt64} {
				got, err := s.Range(context.Background(), tp, after, 10, 1<<20)
				if err != nil || len(got) != 0 {
					t.Fatalf("Range(after %d) = %d envelopes, %v; want none", after, len(got), err)
				}
			}
		})
	}
}

// COMP-144: an envelope whose dedup key is stored on its topic is not
// stored again; its id is the stored one's, within a batch too, and the
// topic's highest id does not move. The same key on another topic is
// another envelope.
func TestCOMP144_DedupKey(t *testing.T) {
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			ctx := context.Background()
			a, b := topic(), topic()
			keyed := func(tp []byte, v byte, key string) ports.NewStoredEnvelope {
				e := env(tp, v)
				e.DedupKey = []byte(key)
				return e
			}
			first, err := s.Append(ctx, []ports.NewStoredEnvelope{keyed(a, 1, "k1"), keyed(a, 2, "k2"), keyed(a, 1, "k1")})
			if err != nil {
				t.Fatal(err)
			}
			if first[2] != first[0] || first[1] == first[0] {
				t.Fatalf("ids %v: a key repeated in the batch must take the first one's id", first)
			}
			again, err := s.Append(ctx, []ports.NewStoredEnvelope{keyed(a, 2, "k2"), keyed(b, 2, "k2"), env(a, 3), keyed(a, 1, "k1")})
			if err != nil {
				t.Fatal(err)
			}
			if again[0] != first[1] || again[3] != first[0] {
				t.Fatalf("replayed keys got ids %d, %d; want the stored %d, %d", again[0], again[3], first[1], first[0])
			}
			if again[1] <= first[1] || again[2] <= again[1] {
				t.Fatalf("new envelopes got ids %v", again)
			}
			got, _ := s.Range(ctx, a, 0, 100, 1<<20)
			var ids []uint64
			for _, e := range got {
				ids = append(ids, e.SequenceID)
			}
			if !equalIDs(ids, []uint64{first[0], first[1], again[2]}) {
				t.Fatalf("topic a holds %v, want %v", ids, []uint64{first[0], first[1], again[2]})
			}
			if h, _ := s.Highest(ctx, a); h != again[2] {
				t.Fatalf("Highest(a) = %d, want %d", h, again[2])
			}
			if got, _ := s.Range(ctx, b, 0, 100, 1<<20); len(got) != 1 {
				t.Fatalf("the key on another topic stored %d times, want 1", len(got))
			}
		})
	}
}

// Finding: a publisher whose ctx ended while the SQLite group commit ran
// was told the append failed although it committed. Append now waits for
// the group's transaction and reports its outcome, so when it returns the
// envelopes it acknowledges are visible (ports.EnvelopeStore.Append).
func TestCOMP142_GroupCommitReportsOutcomeAfterCancel(t *testing.T) {
	s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "g.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cancels := map[context.Context]context.CancelFunc{}
	ctx, cancel := context.WithCancel(context.Background())
	cancels[ctx] = cancel
	s.group.afterAppend = func(c context.Context) {
		if f := cancels[c]; f != nil {
			f() // the caller gives up after its inserts, before the commit
			time.Sleep(50 * time.Millisecond)
		}
	}
	tp := topic()
	ids, err := s.Append(ctx, []ports.NewStoredEnvelope{env(tp, 1)})
	got, rerr := s.Range(context.Background(), tp, 0, 10, 1<<20)
	if rerr != nil {
		t.Fatal(rerr)
	}
	switch {
	case err == nil && len(got) == 1 && got[0].SequenceID == ids[0]:
		// committed, and said so
	case err != nil && len(got) == 0:
		// gave up, stored nothing, and said so
	default:
		t.Fatalf("Append = %v, %v but the topic then held %d envelopes: the outcome reported is not the one stored", ids, err, len(got))
	}
	if err != nil {
		t.Fatalf("Append = %v: the group's transaction committed the batch after its inserts", err)
	}
}

// Migration 3 on a version-2 database: stored rows (with no dedup key)
// read back; a keyed envelope is then stored once however often it is
// appended.
func TestCOMP144_Migration3_OldRowsKept(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v2.db")
	s, err := OpenSQLite(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Rebuild the file as version 2 wrote it.
	if err := rewindTo2(path); err != nil {
		t.Fatal(err)
	}
	s, err = OpenSQLite(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tp := topic()
	got, err := s.Range(ctx, v2Topic, 0, 10, 1<<20)
	if err != nil || len(got) != 1 || got[0].SequenceID != 5 || string(got[0].Envelope) != "old" {
		t.Fatalf("version-2 row after the upgrade = %v, %v", got, err)
	}
	e := env(tp, 1)
	e.DedupKey = []byte("k")
	a, err1 := s.Append(ctx, []ports.NewStoredEnvelope{e})
	b, err2 := s.Append(ctx, []ports.NewStoredEnvelope{e})
	if err := errors.Join(err1, err2); err != nil || a[0] != 6 || b[0] != 6 {
		t.Fatalf("keyed appends after the upgrade = %v, %v, %v; want id 6 twice", a, b, err)
	}
}

var v2Topic = append([]byte{4}, bytes.Repeat([]byte{7}, 32)...)

// rewindTo2 recreates path as a version-2 database holding one envelope
// (id 5 on v2Topic).
func rewindTo2(path string) error {
	db, err := gorm.Open(sqlite.Open(sqliteDSN(path, 10*time.Second)), gormConfig())
	if err != nil {
		return err
	}
	defer func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	}()
	for _, q := range []string{`DROP TABLE delivery_blocks`, `DROP TABLE delivery_catch_up_commits`, `DROP TABLE delivery_leaves`, `DROP TABLE delivery_restores`, `DROP TABLE delivery_catch_up`, `DROP TABLE delivery_public_states`, `DROP TABLE delivery_accepted_commits`, `DROP TABLE delivery_acceptance_reports`,
		`DROP TABLE delivery_quarantines`, `DROP TABLE delivery_envelopes`, `DROP TABLE delivery_topics`, `DROP TABLE delivery_sequence`,
		`DELETE FROM delivery_schema_version`} {
		if err := db.Exec(q).Error; err != nil {
			return err
		}
	}
	if err := migrateTo(context.Background(), db, "sqlite", 2); err != nil {
		return err
	}
	return errors.Join(
		db.Exec(`INSERT INTO delivery_envelopes (topic, sequence_id, server_timestamp_ns, envelope) VALUES (?, 5, 1, ?)`, blob(v2Topic), blob("old")).Error,
		db.Exec(`INSERT INTO delivery_topics (topic, last_id) VALUES (?, 5)`, blob(v2Topic)).Error,
		db.Exec(`UPDATE delivery_sequence SET last_id = 5`).Error,
	)
}
