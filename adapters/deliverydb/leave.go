package deliverydb

import (
	"context"
	"fmt"
	"math"

	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

// Leave records (ADR-0030 Decision 7). delivery_leaves holds one row per
// group and blocked installation key: the inbox whose leave request
// blocked it and the highest sequence id of the group's topic still
// delivered to it. Migration 8 creates the empty table.

func leavesTable(bytesType, intType, textType string) string {
	return `CREATE TABLE delivery_leaves (group_id ` + bytesType + ` NOT NULL, installation_key ` + bytesType + ` NOT NULL,
		inbox_id ` + textType + ` NOT NULL, through_seq ` + intType + ` NOT NULL,
		PRIMARY KEY (group_id, installation_key))`
}

var _ ports.LeaveStore = (*Store)(nil)

// RecordLeave implements [ports.LeaveStore.RecordLeave].
func (s *Store) RecordLeave(ctx context.Context, r ports.LeaveRecord) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if r.Through > math.MaxInt64 || len(r.GroupID) == 0 || r.InboxID == "" {
		return fmt.Errorf("record leave: %w: group %x, inbox %q, through %d", ports.ErrInvalidArgument, r.GroupID, r.InboxID, r.Through)
	}
	if s.writeMu != nil {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, k := range r.InstallationKeys {
			if err := tx.Exec(`INSERT INTO delivery_leaves (group_id, installation_key, inbox_id, through_seq)
				VALUES (?, ?, ?, ?) ON CONFLICT (group_id, installation_key) DO UPDATE SET inbox_id = excluded.inbox_id,
				through_seq = CASE WHEN excluded.through_seq > delivery_leaves.through_seq THEN excluded.through_seq ELSE delivery_leaves.through_seq END`,
				blob(r.GroupID), blob(k), r.InboxID, int64(r.Through)).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.fail(ctx, "record leave", "leave", err)
	}
	return nil
}

// LeftThrough implements [ports.LeaveStore.LeftThrough].
func (s *Store) LeftThrough(ctx context.Context, groupID, installationKey []byte) (uint64, bool, error) {
	if err := s.check(ctx); err != nil {
		return 0, false, err
	}
	var rows []int64
	if err := s.db.WithContext(ctx).Raw(`SELECT through_seq FROM delivery_leaves WHERE group_id = ? AND installation_key = ?`,
		blob(groupID), blob(installationKey)).Scan(&rows).Error; err != nil {
		return 0, false, s.fail(ctx, "left through", "leave", err)
	}
	if len(rows) == 0 {
		return 0, false, nil
	}
	return uint64(rows[0]), true, nil
}

// LeftInboxes implements [ports.LeaveStore.LeftInboxes].
func (s *Store) LeftInboxes(ctx context.Context, groupID []byte) ([]string, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var out []string
	if err := s.db.WithContext(ctx).Raw(`SELECT DISTINCT inbox_id FROM delivery_leaves WHERE group_id = ? ORDER BY inbox_id`,
		blob(groupID)).Scan(&out).Error; err != nil {
		return nil, s.fail(ctx, "left inboxes", "leave", err)
	}
	return out, nil
}

// ForgetLeave implements [ports.LeaveStore.ForgetLeave].
func (s *Store) ForgetLeave(ctx context.Context, groupID []byte, inbox string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if s.writeMu != nil {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	if err := s.db.WithContext(ctx).Exec(`DELETE FROM delivery_leaves WHERE group_id = ? AND inbox_id = ?`,
		blob(groupID), inbox).Error; err != nil {
		return s.fail(ctx, "forget leave", "leave", err)
	}
	return nil
}
