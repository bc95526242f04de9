package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
)

// TestSmokeEveryRepository writes through every repository, reopens the
// file and reads it all back.
func TestSmokeEveryRepository(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "regroup.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	gid := []byte("group-0123456789")
	now := time.Unix(1700000000, 123456789).UTC()
	err = s.Tx(ctx, func(tx ports.Tx) error {
		if err := tx.Groups().Insert(ctx, ports.Group{ID: gid, Active: true, Cursor: 7, CreatedAt: now}); err != nil {
			return err
		}
		e, ins, err := tx.LocalCommitLog().Append(ctx, ports.LocalCommitLogEntry{GroupID: gid, Membership: 1, CommitSequenceID: 9, AddedSuperAdmins: []string{"a"}})
		if err != nil || !ins || e.Seq != 1 {
			t.Errorf("append = %+v %v %v", e, ins, err)
		}
		if _, err := tx.RemoteCommitLog().Insert(ctx, ports.RemoteCommitLogEntry{GroupID: gid, EnvelopeSequenceID: 3}); err != nil {
			return err
		}
		if err := tx.RemoteCommitLog().SetReadPosition(ctx, gid, 5); err != nil {
			return err
		}
		if err := tx.PublishProgress().Put(ctx, ports.PublishState{GroupID: gid, ConfirmedThrough: 1}); err != nil {
			return err
		}
		if err := tx.ReaderAdmission().SetFloor(ctx, gid, 0); err != nil {
			return err
		}
		if err := tx.ReaderAdmission().RaiseBoundary(ctx, gid, []byte("inst"), 4); err != nil {
			return err
		}
		if err := tx.KeyPackages().Insert(ctx, ports.KeyPackageRecord{Ref: []byte("ref"), InitPrivateKey: []byte("k"), CreatedAt: now}); err != nil {
			return err
		}
		if _, err := tx.HeldWelcomes().Put(ctx, ports.HeldWelcome{SequenceID: 11, Envelope: []byte("env"), Deadline: now}); err != nil {
			return err
		}
		if err := tx.Readds().Upsert(ctx, gid, []byte("inst"), func(s *ports.ReaddStatus) error { s.Requested = true; return nil }); err != nil {
			return err
		}
		if _, err := tx.ProcessedEnvelopes().Mark(ctx, []byte("topic"), 1); err != nil {
			return err
		}
		if _, err := tx.IdentityCache().Put(ctx, ports.IdentityUpdateRecord{InboxID: "inbox", SequenceID: 2, Update: []byte("u")}); err != nil {
			return err
		}
		return tx.Blobs().Put(ctx, "mls", "k1", []byte("v"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Tx(ctx, func(tx ports.Tx) error {
		g, err := tx.Groups().Get(ctx, gid)
		if err != nil || g.Cursor != 7 || !g.CreatedAt.Equal(now) {
			t.Errorf("group = %+v, %v", g, err)
		}
		if e, err := tx.LocalCommitLog().Last(ctx, gid); err != nil || e.Seq != 1 || len(e.AddedSuperAdmins) != 1 {
			t.Errorf("last = %+v, %v", e, err)
		}
		if p, err := tx.RemoteCommitLog().ReadPosition(ctx, gid); err != nil || p != 5 {
			t.Errorf("read position = %d, %v", p, err)
		}
		if f, ok, err := tx.ReaderAdmission().Floor(ctx, gid); err != nil || !ok || f != 0 {
			t.Errorf("floor = %d %v %v", f, ok, err)
		}
		if n, err := tx.HeldWelcomes().Count(ctx); err != nil || n != 1 {
			t.Errorf("held = %d, %v", n, err)
		}
		if v, err := tx.Blobs().Get(ctx, "mls", "k1"); err != nil || string(v) != "v" {
			t.Errorf("blob = %q, %v", v, err)
		}
		if _, err := tx.Blobs().Get(ctx, "mls", "absent"); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("absent blob: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
