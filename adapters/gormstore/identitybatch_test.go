package gormstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/adapters/gormstore"
	"github.com/regroup-mls/regroup/adapters/postgres"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
)

// eachDialect runs fn on a fresh SQLite store and, when
// REGROUP_POSTGRES_DSN is set, on a fresh PostgreSQL schema.
func eachDialect(t *testing.T, fn func(t *testing.T, s *gormstore.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "store.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fn(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv(postgres.EnvDSN)
		if dsn == "" {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is unset and CI=true: the PostgreSQL cases must run", postgres.EnvDSN)
			}
			t.Skipf("%s unset: set it to run the PostgreSQL cases", postgres.EnvDSN)
		}
		b := make([]byte, 6)
		rand.Read(b)
		schema := "gormstore_" + hex.EncodeToString(b)
		s, err := postgres.Open(context.Background(), &postgres.Options{DSN: dsn, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.DB().Exec(`DROP SCHEMA IF EXISTS "` + schema + `" CASCADE`); s.Close() })
		fn(t, s)
	})
}

func batchOf(tx ports.Tx) ports.IdentityCacheBatch {
	return tx.IdentityCache().(ports.IdentityCacheBatch)
}

// COMP-586: a record Put refuses (an empty inbox id, a sequence id above
// 2^63-1) fails PutMany with an error wrapping ErrBadRecord that names
// the record, before any record of the call is written: committing the
// transaction after the refusal keeps none of them.
func TestCOMP586_PutManyRefusesABadRecordBeforeWriting(t *testing.T) {
	eachDialect(t, func(t *testing.T, s *gormstore.Store) {
		ctx := context.Background()
		good := ports.IdentityUpdateRecord{InboxID: "inbox-good", SequenceID: 1, Update: []byte("u")}
		for _, bad := range []ports.IdentityUpdateRecord{
			{InboxID: "", SequenceID: 2},
			{InboxID: "inbox-big", SequenceID: math.MaxInt64 + 1},
		} {
			err := s.Tx(ctx, func(tx ports.Tx) error {
				_, err := batchOf(tx).PutMany(ctx, []ports.IdentityUpdateRecord{good, bad})
				if !errors.Is(err, gormstore.ErrBadRecord) || !strings.Contains(err.Error(), "record 1") {
					t.Errorf("PutMany with %+v = %v, want ErrBadRecord naming record 1", bad, err)
				}
				return nil // commit whatever the call wrote
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		err := s.Tx(ctx, func(tx ports.Tx) error {
			got, err := tx.IdentityCache().List(ctx, good.InboxID, math.MaxInt64)
			if err == nil && len(got) != 0 {
				t.Errorf("a refused call stored %+v", got)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// COMP-586: records whose updates together pass the byte budget of one
// statement (twenty updates of 1 MiB) are stored over several statements,
// every byte intact, and each reported inserted.
func TestCOMP586_PutManySplitsLargeUpdates(t *testing.T) {
	eachDialect(t, func(t *testing.T, s *gormstore.Store) {
		ctx := context.Background()
		var recs []ports.IdentityUpdateRecord
		for i := range 20 {
			u := bytes.Repeat([]byte{byte(i + 1)}, 1<<20)
			recs = append(recs, ports.IdentityUpdateRecord{InboxID: fmt.Sprintf("inbox-%d", i%3), SequenceID: uint64(100 + i), Update: u})
		}
		err := s.Tx(ctx, func(tx ports.Tx) error {
			ins, err := batchOf(tx).PutMany(ctx, recs)
			if err != nil {
				return err
			}
			for i, ok := range ins {
				if !ok {
					t.Errorf("record %d not inserted", i)
				}
			}
			lists, err := batchOf(tx).ListMany(ctx, []string{"inbox-0", "inbox-1", "inbox-2"})
			if err != nil {
				return err
			}
			n := 0
			for k, l := range lists {
				for _, r := range l {
					want := recs[r.SequenceID-100]
					if r.InboxID != fmt.Sprintf("inbox-%d", k) || !bytes.Equal(r.Update, want.Update) {
						t.Errorf("list %d holds %s at %d with %d bytes, want %d bytes of %d", k, r.InboxID, r.SequenceID, len(r.Update), len(want.Update), want.Update[0])
					}
					n++
				}
			}
			if n != len(recs) {
				t.Errorf("read %d records back, want %d", n, len(recs))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
