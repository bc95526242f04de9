package deliverydb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

// Restoring a backup. A database put back from an older copy (a SQLite
// `.backup` file, a `pg_dump` of an earlier moment) holds a sequence
// counter below ids the service already handed out: clients hold those
// ids as cursors and as the positions of their messages. [Store.Restore]
// is run once on the restored database, with no delivery service
// running on it, before the service starts again (COMP-460 to COMP-468):
//
//   - the shared counter jumps above every id the database knows of by a
//     stated gap (RestoreOptions.SequenceGap), so every id handed out
//     after the restore is above every id handed out before it, provided
//     fewer than the gap were handed out between the backup and the
//     restore;
//   - every stored key package is deleted, so none is handed out again
//     (the backup may hold packages that were consumed since);
//   - every group with a public state is put in catch-up
//     (delivery_catch_up), at its restored epoch;
//   - every pending commit is stale (COMP-468): its pending state and
//     GroupInfo and the commit's envelope are deleted, it is closed as
//     expired, and RestoreOptions.ExpiredNotice's envelope (the EXPIRED
//     notice) is appended for it;
//   - the restore is recorded in delivery_restores.
//
// The delivery service keeps no authenticated session in the database:
// authentication is per connection, so the connections of the process
// that ran before the restore ended with it.

// DefaultSequenceGap is the gap [Store.Restore] puts between the highest
// id the restored database knows of and the next id it hands out: 2^40,
// more ids than one regroupd issues in 1.7 years at its default global
// rate (20,000 tokens a second, an envelope costing at least one), and
// small enough that 2^23 restores fit below 2^63 (COMP-461).
const DefaultSequenceGap uint64 = 1 << 40

// ErrRestoreGap reports a gap [Store.Restore] refuses: zero, or one that
// would take the counter past 2^63-1.
var ErrRestoreGap = errors.New("restore: sequence gap out of range")

// RestoreOptions configures [Store.Restore].
type RestoreOptions struct {
	// SequenceGap is added to the highest id the database knows of; 0
	// selects DefaultSequenceGap.
	SequenceGap uint64
	// AtLeast raises the counter to at least this id before the gap is
	// added: the highest id an operator knows was handed out (from a log,
	// a metric or a client), when that is above the database's.
	AtLeast uint64
	// Now is the restore's time; zero uses the system clock.
	Now time.Time
	// ExpiredNotice builds the envelope that tells a group's members that
	// the restore expired its pending commit p; nil appends none.
	ExpiredNotice func(p ports.PendingCommit, now time.Time) (ports.NewStoredEnvelope, error)
}

// RestoreReport is what [Store.Restore] did.
type RestoreReport struct {
	// Highest is the highest id the restored database knew of: its
	// counter, every topic's highest id and AtLeast.
	Highest uint64
	// Next is the first id handed out after the restore (to the first
	// EXPIRED notice, when it appended any).
	Next uint64
	// KeyPackagesDeleted counts the stored key packages deleted.
	KeyPackagesDeleted int64
	// GroupsInCatchUp counts the groups put in catch-up.
	GroupsInCatchUp int64
	// PendingCommitsExpired counts the pending commits marked stale.
	PendingCommitsExpired int64
}

// restoreTables are migration 7's tables: one row per restore, and one
// per group in catch-up with the epoch of its restored public state.
func restoreTables(bytesType, intType string) []string {
	return []string{
		`CREATE TABLE delivery_restores (restored_at_ns ` + intType + ` NOT NULL, highest_id ` + intType + ` NOT NULL,
			next_id ` + intType + ` NOT NULL, key_packages_deleted ` + intType + ` NOT NULL, groups_in_catch_up ` + intType + ` NOT NULL)`,
		`CREATE TABLE delivery_catch_up (group_id ` + bytesType + ` PRIMARY KEY, epoch ` + intType + ` NOT NULL,
			since_ns ` + intType + ` NOT NULL)`,
	}
}

// Restore prepares a restored database for service again (see the
// comment above DefaultSequenceGap). It runs in one transaction, except
// that on PostgreSQL the sequence's new value is set before it commits
// and stays set if it fails (a higher counter is always safe). Running it
// twice moves the counter twice; every other step is the same again.
func (s *Store) Restore(ctx context.Context, o RestoreOptions) (RestoreReport, error) {
	if err := s.check(ctx); err != nil {
		return RestoreReport{}, err
	}
	gap := o.SequenceGap
	if gap == 0 {
		gap = DefaultSequenceGap
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	if s.writeMu != nil {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	var rep RestoreReport
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if s.dialect == "postgres" {
			// Appends lock topic rows; the whole table excludes them all.
			if err := tx.Exec(`LOCK TABLE delivery_topics IN EXCLUSIVE MODE`).Error; err != nil {
				return err
			}
		}
		counter, err := s.counter(tx)
		if err != nil {
			return err
		}
		var topics int64
		if err := tx.Raw(`SELECT COALESCE(MAX(last_id), 0) FROM delivery_topics`).Row().Scan(&topics); err != nil {
			return fmt.Errorf("read highest topic id: %w", err)
		}
		rep.Highest = max(counter, uint64(topics), o.AtLeast)
		if rep.Highest > math.MaxInt64 || gap > math.MaxInt64-rep.Highest {
			return fmt.Errorf("%w: %d above the highest id %d passes 2^63-1", ErrRestoreGap, gap, rep.Highest)
		}
		rep.Next = rep.Highest + gap + 1
		if err := s.setCounter(tx, rep.Next-1); err != nil {
			return err
		}
		lo, hi := blob([]byte{byte(ports.TopicKeyPackages)}), blob([]byte{byte(ports.TopicKeyPackages) + 1})
		res := tx.Exec(`DELETE FROM delivery_envelopes WHERE topic >= ? AND topic < ?`, lo, hi)
		if res.Error != nil {
			return fmt.Errorf("delete key packages: %w", res.Error)
		}
		rep.KeyPackagesDeleted = res.RowsAffected
		res = tx.Exec(`INSERT INTO delivery_catch_up (group_id, epoch, since_ns)
			SELECT group_id, epoch, ? FROM delivery_public_states WHERE slot = ?
			ON CONFLICT (group_id) DO UPDATE SET epoch = excluded.epoch, since_ns = excluded.since_ns`, now.UnixNano(), slotCurrent)
		if res.Error != nil {
			return fmt.Errorf("put groups in catch-up: %w", res.Error)
		}
		rep.GroupsInCatchUp = res.RowsAffected
		if rep.PendingCommitsExpired, err = s.expirePending(tx, o.ExpiredNotice, now); err != nil {
			return err
		}
		return tx.Exec(`INSERT INTO delivery_restores (restored_at_ns, highest_id, next_id, key_packages_deleted, groups_in_catch_up)
			VALUES (?, ?, ?, ?, ?)`, now.UnixNano(), int64(rep.Highest), int64(rep.Next), rep.KeyPackagesDeleted, rep.GroupsInCatchUp).Error
	})
	if err != nil {
		if errors.Is(err, ErrRestoreGap) {
			return RestoreReport{}, err
		}
		return RestoreReport{}, dbErr(ctx, "restore", err)
	}
	return rep, nil
}

// expirePending marks every pending commit stale inside the restore's
// transaction (COMP-468): a backup's pending commit may have been
// confirmed or dropped since, so it must neither hold the group's single
// pending slot nor be decided over the catch-up. Its envelope goes too:
// members who merged it upload it again (a new id, not pending), and a
// member who never read it must not take it for a live pending commit.
func (s *Store) expirePending(tx *gorm.DB, notice func(ports.PendingCommit, time.Time) (ports.NewStoredEnvelope, error), now time.Time) (int64, error) {
	var rows []pendingRow
	q := `SELECT s.group_id, s.epoch, s.commit_seq, s.group_info_seq, c.committer, c.external, c.created_ns, c.first_report_ns
	FROM delivery_public_states s JOIN delivery_accepted_commits c ON c.group_id = s.group_id AND c.commit_seq = s.commit_seq
	WHERE s.slot = ?`
	if err := tx.Raw(q, slotPending).Scan(&rows).Error; err != nil {
		return 0, fmt.Errorf("read pending commits: %w", err)
	}
	var notes []ports.NewStoredEnvelope
	for _, r := range rows {
		p := r.pending()
		giTopic := append([]byte{byte(ports.TopicGroupInfo)}, p.GroupID...)
		if err := discardIn(tx, p.GroupID, giTopic, &publicStateRow{GroupInfoSeq: r.GroupInfoSeq}); err != nil {
			return 0, err
		}
		topic := append([]byte{byte(ports.TopicGroupMessages)}, p.GroupID...)
		if err := tx.Exec(`DELETE FROM delivery_envelopes WHERE topic = ? AND sequence_id = ?`, blob(topic), r.CommitSeq).Error; err != nil {
			return 0, fmt.Errorf("delete pending commit %d: %w", r.CommitSeq, err)
		}
		if err := closeCommit(tx, p.GroupID, p.CommitSeq, ports.OutcomeExpired, now.UnixNano()); err != nil {
			return 0, fmt.Errorf("close pending commit %d: %w", r.CommitSeq, err)
		}
		if notice != nil {
			n, err := notice(p, now)
			if err != nil {
				return 0, fmt.Errorf("notice of pending commit %d: %w", r.CommitSeq, err)
			}
			notes = append(notes, n)
		}
	}
	if len(notes) > 0 {
		if _, err := s.appendTx(tx, notes); err != nil {
			return 0, fmt.Errorf("append expired notices: %w", err)
		}
	}
	return int64(len(rows)), nil
}

// counter reads the shared counter: the last id handed out (SQLite), or
// the sequence's last value (PostgreSQL; a sequence never called yet
// has handed out nothing).
func (s *Store) counter(tx *gorm.DB) (uint64, error) {
	var last int64
	if s.dialect == "postgres" {
		var called bool
		if err := tx.Raw(`SELECT last_value, is_called FROM delivery_sequence_ids`).Row().Scan(&last, &called); err != nil {
			return 0, fmt.Errorf("read the sequence: %w", err)
		}
		if !called {
			last--
		}
	} else if err := tx.Raw(`SELECT last_id FROM delivery_sequence WHERE id = 1`).Row().Scan(&last); err != nil {
		return 0, fmt.Errorf("read the counter: %w", err)
	}
	return uint64(max(last, 0)), nil
}

// setCounter makes last the last id handed out, so the next is last+1.
func (s *Store) setCounter(tx *gorm.DB, last uint64) error {
	// Both statements return the value set, which is read back: the
	// counter must have moved before the restore is recorded.
	q := `UPDATE delivery_sequence SET last_id = ? WHERE id = 1 RETURNING last_id`
	if s.dialect == "postgres" {
		q = `SELECT setval('delivery_sequence_ids', ?, true)`
	}
	var got int64
	if err := tx.Raw(q, int64(last)).Row().Scan(&got); err != nil {
		return fmt.Errorf("move the counter: %w", err)
	}
	if got != int64(last) {
		return fmt.Errorf("move the counter: set %d, reads %d", last, got)
	}
	return nil
}

// CatchUp returns the epoch at which the group was put in catch-up by a
// restore, and ok false when it is not in catch-up.
func (s *Store) CatchUp(ctx context.Context, groupID []byte) (epoch uint64, ok bool, err error) {
	if err := s.check(ctx); err != nil {
		return 0, false, err
	}
	var rows []int64
	err = s.db.WithContext(ctx).Table("delivery_catch_up").Where("group_id = ?", blob(groupID)).Pluck("epoch", &rows).Error
	if err != nil {
		return 0, false, s.fail(ctx, "catch-up state", "catch_up", err)
	}
	if len(rows) == 0 {
		return 0, false, nil
	}
	return uint64(rows[0]), true, nil
}
