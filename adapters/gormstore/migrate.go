package gormstore

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// migration is one numbered schema step. Steps are append-only: a released
// step never changes; a schema change is a new step.
type migration struct {
	version int64
	name    string
	up      func(tx *gorm.DB) error
}

// migrations lists every step in version order.
var migrations = []migration{
	{1, "initial schema", func(tx *gorm.DB) error {
		return tx.Migrator().CreateTable(
			&groupRow{}, &localLogHead{}, &localLogRow{}, &remoteLogRow{},
			&readPositionRow{}, &publishStateRow{}, &readerFloorRow{},
			&boundaryRow{}, &keyPackageRow{}, &heldWelcomeRow{}, &readdRow{},
			&processedEnvelopeRow{}, &identityUpdateRow{}, &blobRow{},
		)
	}},
	{2, "messages", createMessages},
	{3, "fork comparisons and accepted entries by commit", func(tx *gorm.DB) error {
		if err := tx.Migrator().CreateTable(&forkComparisonRow{}); err != nil {
			return err
		}
		// Databases of step 1 have no fork_comparisons rows: the commit log
		// computes each conversation's comparison from its entries once.
		return tx.Exec("CREATE INDEX remote_commit_log_by_commit ON remote_commit_log (group_id, commit_sequence_id, envelope_sequence_id)").Error
	}},
	{4, "messages: a sequence id held by more than one message", reissuedPositions},
	{5, "messages: own messages found by group and payload hash", payloadByGroup},
	{6, "messages: found by group and sequence id on a full index", positionsIndexed},
}

// SchemaVersion is the schema version this build migrates databases to.
func SchemaVersion() int64 { return migrations[len(migrations)-1].version }

// migrate applies the steps the database lacks, in one transaction, and
// refuses a database a newer build has migrated. Running it again on a
// current database changes nothing.
func (s *Store) migrate(ctx context.Context) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if s.d.LockMigrations != nil {
			if err := s.d.LockMigrations(tx); err != nil {
				return fmt.Errorf("lock: %w", err)
			}
		}
		if !tx.Migrator().HasTable(&schemaMigration{}) {
			if err := tx.Migrator().CreateTable(&schemaMigration{}); err != nil {
				return fmt.Errorf("create schema_migrations: %w", err)
			}
		}
		var applied []int64
		if err := tx.Model(&schemaMigration{}).Order("version").Pluck("version", &applied).Error; err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		done := make(map[int64]bool, len(applied))
		for _, v := range applied {
			done[v] = true
			if v > SchemaVersion() {
				return fmt.Errorf("version %d > %d: %w", v, SchemaVersion(), ErrSchemaTooNew)
			}
		}
		for _, m := range migrations {
			if done[m.version] {
				continue
			}
			if err := m.up(tx); err != nil {
				return fmt.Errorf("step %d (%s): %w", m.version, m.name, err)
			}
			rec := schemaMigration{Version: m.version, Name: m.name, AppliedNs: time.Now().UnixNano()}
			if err := tx.Create(&rec).Error; err != nil {
				return fmt.Errorf("record step %d: %w", m.version, err)
			}
		}
		return nil
	})
}
