package deliverydb

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

// COMP-041 across the upgrade: a database written with per-topic counters
// (schema version 1) gets the shared counter above the highest id any
// topic ever assigned, swept envelopes included, so later ids are unique
// and higher than every stored one on any topic (API-289).
func TestCOMP041_Migration2_CounterStartsAboveStoredIDs(t *testing.T) {
	ctx := context.Background()
	for name, open := range map[string]func(t *testing.T) (*gorm.DB, func() *Store){
		"sqlite": func(t *testing.T) (*gorm.DB, func() *Store) {
			path := filepath.Join(t.TempDir(), "v1.db")
			db, err := gorm.Open(sqlite.Open(sqliteDSN(path, 10*time.Second)), gormConfig())
			if err != nil {
				t.Fatal(err)
			}
			return db, func() *Store {
				s, err := OpenSQLite(ctx, path, nil)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		},
		"postgres": func(t *testing.T) (*gorm.DB, func() *Store) {
			boot := openPG(t) // a fresh, fully migrated schema: drop its tables
			for _, q := range []string{`DROP TABLE delivery_blocks`, `DROP TABLE delivery_catch_up_commits`, `DROP TABLE delivery_leaves`, `DROP TABLE delivery_restores`, `DROP TABLE delivery_catch_up`, `DROP TABLE delivery_public_states`, `DROP TABLE delivery_accepted_commits`, `DROP TABLE delivery_acceptance_reports`,
				`DROP TABLE delivery_quarantines`, `DROP TABLE delivery_envelopes`, `DROP TABLE delivery_topics`,
				`DROP SEQUENCE delivery_sequence_ids`, `DROP FUNCTION delivery_take_ids`, `DROP FUNCTION delivery_append`, `DELETE FROM delivery_schema_version`} {
				if err := boot.db.Exec(q).Error; err != nil {
					t.Fatal(err)
				}
			}
			db, err := gorm.Open(postgres.Open(boot.dsn), gormConfig())
			if err != nil {
				t.Fatal(err)
			}
			return db, func() *Store {
				s, err := OpenPostgres(ctx, os.Getenv("REGROUP_POSTGRES_DSN"), &Options{Schema: boot.schema})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			db, reopen := open(t)
			if err := migrateTo(ctx, db, name, 1); err != nil {
				t.Fatal(err)
			}
			// Version-1 data: topic a numbered 1..7 with 7 swept, topic b 1..3.
			a, b := topic(), topic()
			for _, q := range []struct {
				sql  string
				args []any
			}{
				{`INSERT INTO delivery_topics (topic, last_id) VALUES (?, 7), (?, 3)`, []any{blob(a), blob(b)}},
				{`INSERT INTO delivery_envelopes (topic, sequence_id, server_timestamp_ns, envelope) VALUES (?, 6, 1, ?), (?, 3, 1, ?)`,
					[]any{blob(a), blob([]byte{6}), blob(b), blob([]byte{3})}},
			} {
				if err := db.Exec(q.sql, q.args...).Error; err != nil {
					t.Fatal(err)
				}
			}
			if sqlDB, err := db.DB(); err == nil {
				sqlDB.Close()
			}
			s := reopen()
			defer s.Close()
			ids, err := s.Append(ctx, []ports.NewStoredEnvelope{env(b, 4), env(topic(), 1), env(a, 8)})
			if err != nil || ids[0] != 8 || ids[1] != 9 || ids[2] != 10 {
				t.Fatalf("first appends after the upgrade = %v, %v; want [8 9 10]", ids, err)
			}
			if h, _ := s.Highest(ctx, a); h != 10 {
				t.Fatalf("Highest(a) = %d, want 10", h)
			}
			if got, _ := s.Range(ctx, b, 0, 10, 1<<20); len(got) != 2 || got[0].SequenceID != 3 || got[1].SequenceID != 8 {
				t.Fatalf("topic b after the upgrade = %v, want ids 3, 8", got)
			}
		})
	}
}
