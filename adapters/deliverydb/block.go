package deliverydb

import (
	"context"

	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

// Blocked installations ([ports.BlockStore], migration 10): one row per
// installation blocked in a group, added by the decision that drops the
// join a device of its inbox refused with reason credential, removed by
// a super admin's lift or by the commit that takes its leaf out.

func blockTables(bytesType, intType string) []string {
	return []string{
		`CREATE TABLE delivery_blocks (group_id ` + bytesType + ` NOT NULL, installation_key ` + bytesType + ` NOT NULL,
			inbox_id TEXT NOT NULL, commit_seq ` + intType + ` NOT NULL, since_ns ` + intType + ` NOT NULL,
			PRIMARY KEY (group_id, installation_key))`,
	}
}

var _ ports.BlockStore = (*Store)(nil)

// blockIn adds b in tx; a block already there is kept as it was.
func blockIn(tx *gorm.DB, b *ports.BlockedInstallation) error {
	return tx.Exec(`INSERT INTO delivery_blocks (group_id, installation_key, inbox_id, commit_seq, since_ns) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`, blob(b.GroupID), blob(b.InstallationKey), b.InboxID, int64(b.CommitSeq), b.SinceNS).Error
}

// unblockIn ends the blocks of keys in the group in tx.
func unblockIn(tx *gorm.DB, group []byte, keys [][]byte) error {
	for _, k := range keys {
		if err := tx.Exec(`DELETE FROM delivery_blocks WHERE group_id = ? AND installation_key = ?`, blob(group), blob(k)).Error; err != nil {
			return err
		}
	}
	return nil
}

type blockRow struct {
	InstallationKey []byte `gorm:"column:installation_key"`
	InboxID         string `gorm:"column:inbox_id"`
	CommitSeq       int64  `gorm:"column:commit_seq"`
	SinceNS         int64  `gorm:"column:since_ns"`
}

// Blocked implements [ports.BlockStore.Blocked].
func (s *Store) Blocked(ctx context.Context, groupID []byte) ([]ports.BlockedInstallation, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var rows []blockRow
	err := s.db.WithContext(ctx).Raw(`SELECT installation_key, inbox_id, commit_seq, since_ns FROM delivery_blocks WHERE group_id = ?`,
		blob(groupID)).Scan(&rows).Error
	if err != nil {
		return nil, s.fail(ctx, "blocked", "pending", err)
	}
	out := make([]ports.BlockedInstallation, len(rows))
	for i, r := range rows {
		out[i] = ports.BlockedInstallation{GroupID: groupID, InstallationKey: r.InstallationKey, InboxID: r.InboxID,
			CommitSeq: uint64(r.CommitSeq), SinceNS: r.SinceNS}
	}
	return out, nil
}

// Unblock implements [ports.BlockStore.Unblock].
func (s *Store) Unblock(ctx context.Context, groupID []byte, keys [][]byte, notices []ports.NewStoredEnvelope) (int, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	if len(keys) == 0 {
		return 0, nil
	}
	if s.writeMu != nil {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	n := 0
	var ids []uint64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, k := range keys {
			res := tx.Exec(`DELETE FROM delivery_blocks WHERE group_id = ? AND installation_key = ?`, blob(groupID), blob(k))
			if res.Error != nil {
				return res.Error
			}
			n += int(res.RowsAffected)
		}
		if n > 0 && len(notices) > 0 {
			var err error
			ids, err = s.appendTx(tx, notices)
			return err
		}
		return nil
	})
	if err != nil {
		return 0, s.fail(ctx, "unblock", "append", err)
	}
	if len(ids) > 0 {
		s.hooks.idWait(0)
	}
	return n, nil
}
