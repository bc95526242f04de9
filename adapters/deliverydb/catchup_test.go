package deliverydb

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
)

// COMP-494 across the upgrade: a version-7 database whose restore put a
// group in catch-up (migration 7's row, written as version 7 wrote it)
// reads back after migration 9 as in catch-up and running; catch-up then
// records a taken commit, keeps the first of an epoch, stops and ends.
func TestCOMP494_Migration9_CatchUpKeptAndRecorded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v7.db")
	db, err := gorm.Open(sqlite.Open(sqliteDSN(path, 10*time.Second)), gormConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := migrateTo(ctx, db, "sqlite", 7); err != nil {
		t.Fatal(err)
	}
	group := []byte("group-in-catch-up")
	if err := db.Exec(`INSERT INTO delivery_catch_up (group_id, epoch, since_ns) VALUES (?, 4, 1000)`, blob(group)).Error; err != nil {
		t.Fatal(err)
	}
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.Close()
	}
	s, err := OpenSQLite(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, ok, err := s.CatchUpOf(ctx, group)
	if err != nil || !ok || st.Epoch != 4 || st.Stopped || st.Progress.UnixNano() != 1000 {
		t.Fatalf("catch-up after the upgrade = %+v, %v, %v; want epoch 4, running, since 1000", st, ok, err)
	}
	at := time.Unix(0, 5000)
	if err := s.RecordCatchUpCommit(ctx, group, 4, []byte{1}, true, at); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCatchUpCommit(ctx, group, 4, []byte{2}, false, at); err != nil {
		t.Fatal(err)
	}
	if d, admin, ok, err := s.CatchUpCommit(ctx, group, 4); err != nil || !ok || !admin || !bytes.Equal(d, []byte{1}) {
		t.Fatalf("epoch 4's commit = %x, admin %v, %v, %v; want the first recorded, by a super admin", d, admin, ok, err)
	}
	if err := s.StopCatchUp(ctx, group, at); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := s.CatchUpOf(ctx, group); !st.Stopped || st.Progress != at {
		t.Fatalf("after stop = %+v; want stopped, progress at the taken commit", st)
	}
	if err := s.EndCatchUp(ctx, group); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.CatchUpOf(ctx, group); ok {
		t.Fatal("still in catch-up after its end")
	}
	if _, _, ok, _ := s.CatchUpCommit(ctx, group, 4); ok {
		t.Fatal("a taken commit kept after the end")
	}
}
