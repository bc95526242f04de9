package deliverydb

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

// Catch-up after a restore (ports.CatchUpStore). Restore mode puts every
// group with a public state in delivery_catch_up (restore.go); migration
// 9 adds what the catch-up itself keeps: the moment a group's catch-up
// stopped (0 while it runs) and, per group and epoch, the digest of the
// commit the catch-up took and whether a super admin's installation
// uploaded it.

// catchUpTables are migration 9's statements.
func catchUpTables(bytesType, intType string) []string {
	return []string{
		`ALTER TABLE delivery_catch_up ADD COLUMN stopped_ns ` + intType + ` NOT NULL DEFAULT 0`,
		`CREATE TABLE delivery_catch_up_commits (group_id ` + bytesType + ` NOT NULL, epoch ` + intType + ` NOT NULL,
			digest ` + bytesType + ` NOT NULL, super_admin ` + intType + ` NOT NULL, PRIMARY KEY (group_id, epoch))`,
	}
}

var _ ports.CatchUpStore = (*Store)(nil)

// CatchUpOf implements [ports.CatchUpStore].
func (s *Store) CatchUpOf(ctx context.Context, groupID []byte) (ports.CatchUpState, bool, error) {
	if err := s.check(ctx); err != nil {
		return ports.CatchUpState{}, false, err
	}
	var rows []struct {
		Epoch     int64
		SinceNS   int64
		StoppedNS int64
	}
	err := s.db.WithContext(ctx).Raw(`SELECT epoch, since_ns, stopped_ns FROM delivery_catch_up WHERE group_id = ?`, blob(groupID)).Scan(&rows).Error
	if err != nil {
		return ports.CatchUpState{}, false, s.fail(ctx, "catch-up state", "catch_up", err)
	}
	if len(rows) == 0 {
		return ports.CatchUpState{}, false, nil
	}
	r := rows[0]
	return ports.CatchUpState{Epoch: uint64(r.Epoch), Progress: time.Unix(0, r.SinceNS), Stopped: r.StoppedNS != 0}, true, nil
}

// CatchUpCommit implements [ports.CatchUpStore].
func (s *Store) CatchUpCommit(ctx context.Context, groupID []byte, epoch uint64) ([]byte, bool, bool, error) {
	if err := s.check(ctx); err != nil {
		return nil, false, false, err
	}
	var rows []struct {
		Digest     []byte
		SuperAdmin int64
	}
	err := s.db.WithContext(ctx).Raw(`SELECT digest, super_admin FROM delivery_catch_up_commits WHERE group_id = ? AND epoch = ?`,
		blob(groupID), int64(epoch)).Scan(&rows).Error
	if err != nil {
		return nil, false, false, s.fail(ctx, "catch-up commit", "catch_up", err)
	}
	if len(rows) == 0 {
		return nil, false, false, nil
	}
	return rows[0].Digest, rows[0].SuperAdmin != 0, true, nil
}

// RecordCatchUpCommit implements [ports.CatchUpStore].
func (s *Store) RecordCatchUpCommit(ctx context.Context, groupID []byte, epoch uint64, digest []byte, superAdmin bool, at time.Time) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	admin := 0
	if superAdmin {
		admin = 1
	}
	return s.catchUpWrite(ctx, "record catch-up commit",
		stmt{`INSERT INTO delivery_catch_up_commits (group_id, epoch, digest, super_admin) VALUES (?, ?, ?, ?)
			ON CONFLICT (group_id, epoch) DO NOTHING`, []any{blob(groupID), int64(epoch), blob(digest), admin}},
		stmt{`UPDATE delivery_catch_up SET since_ns = ? WHERE group_id = ?`, []any{at.UnixNano(), blob(groupID)}})
}

// StopCatchUp implements [ports.CatchUpStore].
func (s *Store) StopCatchUp(ctx context.Context, groupID []byte, at time.Time) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.catchUpWrite(ctx, "stop catch-up",
		stmt{`UPDATE delivery_catch_up SET stopped_ns = ? WHERE group_id = ? AND stopped_ns = 0`, []any{max(at.UnixNano(), 1), blob(groupID)}})
}

// EndCatchUp implements [ports.CatchUpStore].
func (s *Store) EndCatchUp(ctx context.Context, groupID []byte) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.catchUpWrite(ctx, "end catch-up",
		stmt{`DELETE FROM delivery_catch_up_commits WHERE group_id = ?`, []any{blob(groupID)}},
		stmt{`DELETE FROM delivery_catch_up WHERE group_id = ?`, []any{blob(groupID)}})
}

// stmt is one statement of a catch-up write.
type stmt struct {
	q    string
	args []any
}

// catchUpWrite runs the statements in one transaction.
func (s *Store) catchUpWrite(ctx context.Context, op string, stmts ...stmt) error {
	if s.writeMu != nil {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, st := range stmts {
			if err := tx.Exec(st.q, st.args...).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.fail(ctx, op, "catch_up", err)
	}
	return nil
}
