package gormstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/regroup-mls/regroup/adapters/gormstore"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
)

// testdata/schema-v1.db was written by the build whose schema stopped at
// step 1: one group with three local and three accepted commit-log
// entries, a read position and a floor. Opening it runs step 2 (fork
// comparisons, accepted entries by commit); everything it held reads back,
// no comparison is stored yet (the commit log computes one from the
// entries), and the new lookups work on the old rows.
func TestSchemaV1StoreOpensAndMigrates(t *testing.T) {
	ctx := context.Background()
	st := openRecorded(t, "schema-v1.db")
	var versions []int64
	if err := st.DB().Table("schema_migrations").Order("version").Pluck("version", &versions).Error; err != nil {
		t.Fatal(err)
	}
	if len(versions) != int(gormstore.SchemaVersion()) || gormstore.SchemaVersion() < 2 {
		t.Fatalf("schema_migrations %v after opening, want 1..%d", versions, gormstore.SchemaVersion())
	}
	g := make([]byte, 32)
	for i := range g {
		g[i] = byte(i + 1)
	}
	err := st.Tx(ctx, func(tx ports.Tx) error {
		grp, err := tx.Groups().Get(ctx, g)
		if err != nil {
			return err
		}
		if grp.Cursor != 30 || grp.Membership != 1 || grp.ForkState != ports.ForkNotForked {
			t.Errorf("group %+v", grp)
		}
		local, err := tx.LocalCommitLog().List(ctx, g, 0, 0)
		if err != nil {
			return err
		}
		remote, err := tx.RemoteCommitLog().List(ctx, g, 0, 0)
		if err != nil {
			return err
		}
		if len(local) != 3 || len(remote) != 3 || remote[2].EnvelopeSequenceID != 35 || local[1].CommitSequenceID != 20 {
			t.Errorf("entries after migration: local %+v remote %+v", local, remote)
		}
		if _, ok, err := tx.RemoteCommitLog().Comparison(ctx, g); err != nil || ok {
			t.Errorf("a schema-1 store has a comparison: ok=%v err=%v", ok, err)
		}
		r, err := tx.RemoteCommitLog().ByCommit(ctx, g, 20)
		if err != nil || r.EnvelopeSequenceID != 25 {
			t.Errorf("ByCommit(20) on old rows: %+v %v", r, err)
		}
		l, err := tx.LocalCommitLog().ByCommit(ctx, g, 1, 30)
		if err != nil || l.AppliedEpochNumber != 4 {
			t.Errorf("local ByCommit(30) on old rows: %+v %v", l, err)
		}
		pos, err := tx.RemoteCommitLog().ReadPosition(ctx, g)
		if err != nil || pos != 35 {
			t.Errorf("read position %d %v, want 35", pos, err)
		}
		floor, ok, err := tx.ReaderAdmission().Floor(ctx, g)
		if err != nil || !ok || floor != 1 {
			t.Errorf("floor %d %v %v, want 1", floor, ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// openRecorded opens a copy of the recorded store testdata/name, which
// runs every migration step after the one it was recorded at.
func openRecorded(t *testing.T, name string) *sqlite.Store {
	t.Helper()
	old, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("open the recorded store %s: %v", name, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
