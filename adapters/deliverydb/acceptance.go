package deliverydb

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

// Commit acceptance in two phases ([ports.AcceptanceStore], migration
// 6). A group's pending commit is slot 1 of delivery_public_states (the
// state it leads to, its sequence id, digest and pending GroupInfo) and
// a row of delivery_accepted_commits (its committer, when it was
// accepted, when its first counting report came, and later its
// outcome). Its envelopes carry delivery_envelopes.pending = 1. A
// confirmation moves slot 0 to slot 2 (the previous state) and slot 1 to
// slot 0; a drop, expiry or supersession deletes slot 1 and the pending
// GroupInfo envelope. Every write that touches slot 1 first locks the
// group's slot 0 row (SELECT … FOR UPDATE on PostgreSQL; SQLite's single
// writer), so of two replicas deciding one pending commit, or storing two
// pending commits of one group, exactly one succeeds and the other sees
// [ports.ErrStateMoved].
const (
	slotPending  = 1
	slotPrevious = 2
)

func acceptanceTables(bytesType, intType string) []string {
	return []string{
		`ALTER TABLE delivery_envelopes ADD COLUMN pending ` + intType + ` NOT NULL DEFAULT 0`,
		`CREATE TABLE delivery_accepted_commits (group_id ` + bytesType + ` NOT NULL, commit_seq ` + intType + ` NOT NULL,
			committer TEXT NOT NULL, external ` + intType + ` NOT NULL DEFAULT 0, created_ns ` + intType + ` NOT NULL,
			first_report_ns ` + intType + ` NOT NULL DEFAULT 0, outcome ` + intType + ` NOT NULL DEFAULT 0,
			decided_ns ` + intType + ` NOT NULL DEFAULT 0, stuck_quarantined ` + intType + ` NOT NULL DEFAULT 0,
			PRIMARY KEY (group_id, commit_seq))`,
		`CREATE TABLE delivery_acceptance_reports (group_id ` + bytesType + ` NOT NULL, commit_seq ` + intType + ` NOT NULL,
			installation_key ` + bytesType + ` NOT NULL, inbox_id TEXT NOT NULL, verdict ` + intType + ` NOT NULL,
			reason TEXT NOT NULL, counts ` + intType + ` NOT NULL, reported_ns ` + intType + ` NOT NULL,
			decided_ns ` + intType + ` NOT NULL DEFAULT 0, PRIMARY KEY (group_id, commit_seq, installation_key))`,
		`CREATE INDEX delivery_acceptance_reports_decided ON delivery_acceptance_reports (decided_ns) WHERE decided_ns <> 0`,
		`CREATE TABLE delivery_quarantines (group_id ` + bytesType + ` NOT NULL, inbox_id TEXT NOT NULL,
			since_ns ` + intType + ` NOT NULL, commit_seq ` + intType + ` NOT NULL DEFAULT 0, PRIMARY KEY (group_id, inbox_id))`,
	}
}

var _ ports.AcceptanceStore = (*Store)(nil)

type pendingRow struct {
	GroupID       []byte `gorm:"column:group_id"`
	Epoch         int64  `gorm:"column:epoch"`
	State         []byte `gorm:"column:state"`
	CommitSeq     int64  `gorm:"column:commit_seq"`
	CommitDigest  []byte `gorm:"column:commit_digest"`
	GroupInfoSeq  int64  `gorm:"column:group_info_seq"`
	Committer     string `gorm:"column:committer"`
	External      int64  `gorm:"column:external"`
	CreatedNS     int64  `gorm:"column:created_ns"`
	FirstReportNS int64  `gorm:"column:first_report_ns"`
}

func (r pendingRow) pending() ports.PendingCommit {
	return ports.PendingCommit{GroupID: r.GroupID, CommitSeq: uint64(r.CommitSeq), CommitDigest: r.CommitDigest,
		Epoch: uint64(r.Epoch), State: r.State, GroupInfoSeq: uint64(r.GroupInfoSeq), Committer: r.Committer,
		External: r.External != 0, CreatedNS: r.CreatedNS, FirstReportNS: r.FirstReportNS}
}

const selectPending = `SELECT s.group_id, s.epoch, s.state, s.commit_seq, s.commit_digest, s.group_info_seq,
	c.committer, c.external, c.created_ns, c.first_report_ns
	FROM delivery_public_states s JOIN delivery_accepted_commits c ON c.group_id = s.group_id AND c.commit_seq = s.commit_seq
	WHERE s.slot = 1`

// PendingCommit implements [ports.AcceptanceStore.PendingCommit].
func (s *Store) PendingCommit(ctx context.Context, groupID []byte) (ports.PendingCommit, error) {
	if err := s.check(ctx); err != nil {
		return ports.PendingCommit{}, err
	}
	var rows []pendingRow
	if err := s.db.WithContext(ctx).Raw(selectPending+` AND s.group_id = ?`, blob(groupID)).Scan(&rows).Error; err != nil {
		return ports.PendingCommit{}, s.fail(ctx, "pending commit", "pending", err)
	}
	if len(rows) == 0 {
		return ports.PendingCommit{}, fmt.Errorf("pending commit of group %x: %w", groupID, ports.ErrNotFound)
	}
	return rows[0].pending(), nil
}

// PendingCommits implements [ports.AcceptanceStore.PendingCommits].
func (s *Store) PendingCommits(ctx context.Context) ([]ports.PendingCommit, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var rows []pendingRow
	q := `SELECT s.group_id, s.epoch, s.commit_seq, s.group_info_seq, c.committer, c.external, c.created_ns, c.first_report_ns
	FROM delivery_public_states s JOIN delivery_accepted_commits c ON c.group_id = s.group_id AND c.commit_seq = s.commit_seq
	WHERE s.slot = 1`
	if err := s.db.WithContext(ctx).Raw(q).Scan(&rows).Error; err != nil {
		return nil, s.fail(ctx, "pending commits", "pending", err)
	}
	out := make([]ports.PendingCommit, len(rows))
	for i, r := range rows {
		out[i] = r.pending()
	}
	return out, nil
}

// PreviousState implements [ports.AcceptanceStore.PreviousState].
func (s *Store) PreviousState(ctx context.Context, groupID []byte) (ports.StoredPublicState, error) {
	if err := s.check(ctx); err != nil {
		return ports.StoredPublicState{}, err
	}
	var rows []publicStateRow
	if err := s.db.WithContext(ctx).Raw(selectState, blob(groupID), slotPrevious).Scan(&rows).Error; err != nil {
		return ports.StoredPublicState{}, s.fail(ctx, "previous state", "public_state", err)
	}
	if len(rows) == 0 {
		return ports.StoredPublicState{}, fmt.Errorf("previous state of group %x: %w", groupID, ports.ErrNotFound)
	}
	return rows[0].stored(groupID), nil
}

// AcceptedCommit implements [ports.AcceptanceStore.AcceptedCommit].
func (s *Store) AcceptedCommit(ctx context.Context, groupID []byte, commitSeq uint64) (ports.AcceptedCommit, error) {
	if err := s.check(ctx); err != nil {
		return ports.AcceptedCommit{}, err
	}
	var rows []struct {
		Committer        string `gorm:"column:committer"`
		Outcome          int64  `gorm:"column:outcome"`
		DecidedNS        int64  `gorm:"column:decided_ns"`
		StuckQuarantined int64  `gorm:"column:stuck_quarantined"`
	}
	err := s.db.WithContext(ctx).Raw(`SELECT committer, outcome, decided_ns, stuck_quarantined FROM delivery_accepted_commits
		WHERE group_id = ? AND commit_seq = ?`, blob(groupID), int64(commitSeq)).Scan(&rows).Error
	if err != nil {
		return ports.AcceptedCommit{}, s.fail(ctx, "accepted commit", "pending", err)
	}
	if len(rows) == 0 {
		return ports.AcceptedCommit{}, fmt.Errorf("commit %d of group %x: %w: it took no two phases (or its record expired)", commitSeq, groupID, ports.ErrNotFound)
	}
	r := rows[0]
	return ports.AcceptedCommit{GroupID: groupID, CommitSeq: commitSeq, Committer: r.Committer,
		Outcome: ports.AcceptanceOutcome(r.Outcome), DecidedNS: r.DecidedNS, StuckQuarantined: r.StuckQuarantined != 0}, nil
}

// AddReport implements [ports.AcceptanceStore.AddReport].
func (s *Store) AddReport(ctx context.Context, r ports.AcceptanceReport) (bool, error) {
	if err := s.check(ctx); err != nil {
		return false, err
	}
	if s.writeMu != nil {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	added := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var decided int64
		if r.Verdict == ports.VerdictStuck {
			decided = r.ReportedNS // a stuck report comes after its commit's decision
		}
		res := tx.Exec(`INSERT INTO delivery_acceptance_reports (group_id, commit_seq, installation_key, inbox_id, verdict, reason, counts, reported_ns, decided_ns)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, blob(r.GroupID), int64(r.CommitSeq), blob(r.InstallationKey),
			r.InboxID, int64(r.Verdict), r.Reason, boolInt(r.Counts), r.ReportedNS, decided)
		if res.Error != nil {
			return res.Error
		}
		if added = res.RowsAffected == 1; !added || !r.Counts || r.Verdict == ports.VerdictStuck {
			return nil
		}
		return tx.Exec(`UPDATE delivery_accepted_commits SET first_report_ns = ? WHERE group_id = ? AND commit_seq = ? AND first_report_ns = 0 AND outcome = 0`,
			r.ReportedNS, blob(r.GroupID), int64(r.CommitSeq)).Error
	})
	if err != nil {
		return false, s.fail(ctx, "add report", "append", err)
	}
	return added, nil
}

// Reports implements [ports.AcceptanceStore.Reports].
func (s *Store) Reports(ctx context.Context, groupID []byte, commitSeq uint64) ([]ports.AcceptanceReport, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var rows []struct {
		InstallationKey []byte `gorm:"column:installation_key"`
		InboxID         string `gorm:"column:inbox_id"`
		Verdict         int64  `gorm:"column:verdict"`
		Reason          string `gorm:"column:reason"`
		Counts          int64  `gorm:"column:counts"`
		ReportedNS      int64  `gorm:"column:reported_ns"`
	}
	err := s.db.WithContext(ctx).Raw(`SELECT installation_key, inbox_id, verdict, reason, counts, reported_ns FROM delivery_acceptance_reports
		WHERE group_id = ? AND commit_seq = ? ORDER BY reported_ns, installation_key`, blob(groupID), int64(commitSeq)).Scan(&rows).Error
	if err != nil {
		return nil, s.fail(ctx, "reports", "pending", err)
	}
	out := make([]ports.AcceptanceReport, len(rows))
	for i, r := range rows {
		out[i] = ports.AcceptanceReport{GroupID: groupID, CommitSeq: commitSeq, InstallationKey: r.InstallationKey, InboxID: r.InboxID,
			Verdict: ports.Verdict(r.Verdict), Reason: r.Reason, Counts: r.Counts != 0, ReportedNS: r.ReportedNS}
	}
	return out, nil
}

// Decide implements [ports.AcceptanceStore.Decide].
func (s *Store) Decide(ctx context.Context, d ports.AcceptanceDecision) ([]uint64, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if d.Outcome != ports.OutcomeConfirmed && d.Outcome != ports.OutcomeDropped && d.Outcome != ports.OutcomeExpired {
		return nil, fmt.Errorf("decide: %w: outcome %d", ports.ErrInvalidArgument, d.Outcome)
	}
	if s.writeMu != nil {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	var ids []uint64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		cur, err := s.lockCurrent(tx, d.GroupID)
		if err != nil {
			return err
		}
		pend, err := pendingIn(tx, d.GroupID)
		if err != nil {
			return err
		}
		if cur == nil || pend == nil || uint64(pend.CommitSeq) != d.CommitSeq {
			return fmt.Errorf("%w: commit %d is not the pending commit of group %x", ports.ErrStateMoved, d.CommitSeq, d.GroupID)
		}
		giTopic := append([]byte{byte(ports.TopicGroupInfo)}, d.GroupID...)
		if d.Outcome == ports.OutcomeConfirmed {
			if err := confirmIn(tx, d.GroupID, giTopic, pend); err != nil {
				return err
			}
		} else if err := discardIn(tx, d.GroupID, giTopic, pend); err != nil {
			return err
		}
		if err := closeCommit(tx, d.GroupID, d.CommitSeq, d.Outcome, d.DecidedNS); err != nil {
			return err
		}
		if d.Quarantine != "" {
			if err := quarantineIn(tx, d.GroupID, d.Quarantine, d.CommitSeq, d.DecidedNS); err != nil {
				return err
			}
		}
		if err := unquarantineIn(tx, d.GroupID, d.Unquarantine); err != nil {
			return err
		}
		if err := unblockIn(tx, d.GroupID, d.Unblock); err != nil {
			return err
		}
		if d.Block != nil {
			if err := blockIn(tx, d.Block); err != nil {
				return err
			}
		}
		if len(d.Notices) > 0 {
			ids, err = s.appendTx(tx, d.Notices)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, ports.ErrStateMoved) {
			return nil, fmt.Errorf("decide: %w", err)
		}
		return nil, s.fail(ctx, "decide", "append", err)
	}
	if len(ids) > 0 {
		s.hooks.idWait(0)
	}
	return ids, nil
}

// lockCurrent reads (and on PostgreSQL locks) the group's current state
// row; nil when the group has none.
func (s *Store) lockCurrent(tx *gorm.DB, groupID []byte) (*publicStateRow, error) {
	q := selectState
	if s.dialect == "postgres" {
		q += ` FOR UPDATE`
	}
	var rows []publicStateRow
	if err := tx.Raw(q, blob(groupID), slotCurrent).Scan(&rows).Error; err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return &rows[0], nil
}

// pendingIn reads the group's pending state row inside tx; nil when none.
func pendingIn(tx *gorm.DB, groupID []byte) (*publicStateRow, error) {
	var rows []publicStateRow
	if err := tx.Raw(selectState, blob(groupID), slotPending).Scan(&rows).Error; err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return &rows[0], nil
}

// confirmIn makes the pending state current and the current previous,
// and the pending GroupInfo the topic's newest.
func confirmIn(tx *gorm.DB, group, giTopic []byte, pend *publicStateRow) error {
	stmts := []struct {
		q    string
		args []any
	}{
		{`DELETE FROM delivery_public_states WHERE group_id = ? AND slot = ?`, []any{blob(group), slotPrevious}},
		{`INSERT INTO delivery_public_states (group_id, slot, epoch, state, commit_seq, commit_digest, group_info_seq)
			SELECT group_id, ?, epoch, state, commit_seq, commit_digest, group_info_seq FROM delivery_public_states WHERE group_id = ? AND slot = ?`,
			[]any{slotPrevious, blob(group), slotCurrent}},
		{`DELETE FROM delivery_public_states WHERE group_id = ? AND slot = ?`, []any{blob(group), slotCurrent}},
		{`UPDATE delivery_public_states SET slot = ? WHERE group_id = ? AND slot = ?`, []any{slotCurrent, blob(group), slotPending}},
	}
	if pend.GroupInfoSeq > 0 {
		stmts = append(stmts,
			struct {
				q    string
				args []any
			}{`UPDATE delivery_envelopes SET pending = 0 WHERE topic = ? AND sequence_id = ?`, []any{blob(giTopic), pend.GroupInfoSeq}},
			struct {
				q    string
				args []any
			}{`DELETE FROM delivery_envelopes WHERE topic = ? AND sequence_id < ?`, []any{blob(giTopic), pend.GroupInfoSeq}})
	} else {
		// No GroupInfo came with the commit: the current one's stays the
		// topic's newest, though of the epoch before.
		stmts = append(stmts, struct {
			q    string
			args []any
		}{`UPDATE delivery_public_states SET group_info_seq = (SELECT group_info_seq FROM delivery_public_states WHERE group_id = ? AND slot = ?)
			WHERE group_id = ? AND slot = ?`, []any{blob(group), slotPrevious, blob(group), slotCurrent}})
	}
	for _, st := range stmts {
		if err := tx.Exec(st.q, st.args...).Error; err != nil {
			return fmt.Errorf("confirm: %w", err)
		}
	}
	return nil
}

// discardIn deletes the pending state and its GroupInfo envelope.
func discardIn(tx *gorm.DB, group, giTopic []byte, pend *publicStateRow) error {
	if err := tx.Exec(`DELETE FROM delivery_public_states WHERE group_id = ? AND slot = ?`, blob(group), slotPending).Error; err != nil {
		return fmt.Errorf("discard pending state: %w", err)
	}
	if pend.GroupInfoSeq > 0 {
		if err := tx.Exec(`DELETE FROM delivery_envelopes WHERE topic = ? AND sequence_id = ?`, blob(giTopic), pend.GroupInfoSeq).Error; err != nil {
			return fmt.Errorf("discard pending group info: %w", err)
		}
	}
	return nil
}

// closeCommit records a pending commit's outcome and marks its reports
// decided.
func closeCommit(tx *gorm.DB, group []byte, seq uint64, outcome ports.AcceptanceOutcome, at int64) error {
	if err := tx.Exec(`UPDATE delivery_accepted_commits SET outcome = ?, decided_ns = ? WHERE group_id = ? AND commit_seq = ?`,
		int64(outcome), at, blob(group), int64(seq)).Error; err != nil {
		return err
	}
	return tx.Exec(`UPDATE delivery_acceptance_reports SET decided_ns = ? WHERE group_id = ? AND commit_seq = ?`, at, blob(group), int64(seq)).Error
}

func quarantineIn(tx *gorm.DB, group []byte, inbox string, seq uint64, at int64) error {
	return tx.Exec(`INSERT INTO delivery_quarantines (group_id, inbox_id, since_ns, commit_seq) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		blob(group), inbox, at, int64(seq)).Error
}

func unquarantineIn(tx *gorm.DB, group []byte, inboxes []string) error {
	for _, in := range inboxes {
		if err := tx.Exec(`DELETE FROM delivery_quarantines WHERE group_id = ? AND inbox_id = ?`, blob(group), in).Error; err != nil {
			return err
		}
	}
	return nil
}

// Quarantined implements [ports.AcceptanceStore.Quarantined].
func (s *Store) Quarantined(ctx context.Context, groupID []byte) ([]string, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var out []string
	err := s.db.WithContext(ctx).Raw(`SELECT inbox_id FROM delivery_quarantines WHERE group_id = ? ORDER BY inbox_id`, blob(groupID)).Scan(&out).Error
	if err != nil {
		return nil, s.fail(ctx, "quarantined", "pending", err)
	}
	return out, nil
}

// ChangeQuarantine implements [ports.AcceptanceStore.ChangeQuarantine].
func (s *Store) ChangeQuarantine(ctx context.Context, c ports.QuarantineChange) (bool, []uint64, error) {
	if err := s.check(ctx); err != nil {
		return false, nil, err
	}
	if s.writeMu != nil {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	changed := false
	var ids []uint64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		switch {
		case c.Lift:
			res := tx.Exec(`DELETE FROM delivery_quarantines WHERE group_id = ? AND inbox_id = ?`, blob(c.GroupID), c.InboxID)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				return fmt.Errorf("%w: inbox %s is not quarantined in group %x", ports.ErrNotFound, c.InboxID, c.GroupID)
			}
			changed = true
		case c.StuckCommit != 0:
			res := tx.Exec(`UPDATE delivery_accepted_commits SET stuck_quarantined = 1 WHERE group_id = ? AND commit_seq = ? AND stuck_quarantined = 0`,
				blob(c.GroupID), int64(c.StuckCommit))
			if res.Error != nil {
				return res.Error
			}
			if changed = res.RowsAffected == 1; changed {
				if err := quarantineIn(tx, c.GroupID, c.InboxID, c.StuckCommit, c.SinceNS); err != nil {
					return err
				}
			}
		default:
			res := tx.Exec(`INSERT INTO delivery_quarantines (group_id, inbox_id, since_ns, commit_seq) VALUES (?, ?, ?, 0) ON CONFLICT DO NOTHING`,
				blob(c.GroupID), c.InboxID, c.SinceNS)
			if res.Error != nil {
				return res.Error
			}
			changed = res.RowsAffected == 1
		}
		notices := c.Always
		if changed {
			notices = append(append([]ports.NewStoredEnvelope(nil), c.Always...), c.Notices...)
		}
		if len(notices) > 0 {
			var err error
			ids, err = s.appendTx(tx, notices)
			return err
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ports.ErrNotFound) {
			return false, nil, fmt.Errorf("change quarantine: %w", err)
		}
		return false, nil, s.fail(ctx, "change quarantine", "append", err)
	}
	if len(ids) > 0 {
		s.hooks.idWait(0)
	}
	return changed, ids, nil
}

// DeleteDecidedBefore implements [ports.AcceptanceStore.DeleteDecidedBefore].
func (s *Store) DeleteDecidedBefore(ctx context.Context, beforeNS int64) (int64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	if s.writeMu != nil {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	var n int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Exec(`DELETE FROM delivery_acceptance_reports WHERE decided_ns <> 0 AND decided_ns < ?`, beforeNS)
		if res.Error != nil {
			return res.Error
		}
		n = res.RowsAffected
		return tx.Exec(`DELETE FROM delivery_accepted_commits WHERE outcome <> 0 AND decided_ns < ?`, beforeNS).Error
	})
	if err != nil {
		return 0, s.fail(ctx, "delete decided", "delete", err)
	}
	return n, nil
}

// expectPending checks an advance's expectation of the group's pending
// commit, inside the transaction that locked its current state.
func expectPending(tx *gorm.DB, a ports.PublicStateAdvance) error {
	if a.Register {
		return nil
	}
	if a.Pending == nil && a.Supersede == 0 && a.State == nil {
		return nil // a GroupInfo of the current epoch
	}
	pend, err := pendingIn(tx, a.GroupID)
	if err != nil {
		return err
	}
	switch {
	case a.Supersede != 0 && (pend == nil || uint64(pend.CommitSeq) != a.Supersede):
		return fmt.Errorf("%w: group %x has no pending commit %d to supersede", ports.ErrStateMoved, a.GroupID, a.Supersede)
	case a.Supersede == 0 && pend != nil:
		return fmt.Errorf("%w: group %x has a pending commit (%d)", ports.ErrStateMoved, a.GroupID, pend.CommitSeq)
	}
	return nil
}

// writePending stores an advance's commit as the group's pending commit.
func writePending(tx *gorm.DB, a ports.PublicStateAdvance, envs []ports.NewStoredEnvelope, ids []uint64) error {
	commitSeq, digest := int64(ids[a.Commit]), envs[a.Commit].DedupKey
	var giSeq int64
	if a.GroupInfo >= 0 {
		giSeq = int64(ids[a.GroupInfo])
	}
	if err := tx.Exec(`INSERT INTO delivery_public_states (group_id, slot, epoch, state, commit_seq, commit_digest, group_info_seq)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, blob(a.GroupID), slotPending, int64(a.Epoch), blob(a.State), commitSeq, nullBlob(digest), giSeq).Error; err != nil {
		return fmt.Errorf("store pending state: %w", err)
	}
	if err := tx.Exec(`INSERT INTO delivery_accepted_commits (group_id, commit_seq, committer, external, created_ns) VALUES (?, ?, ?, ?, ?)`,
		blob(a.GroupID), commitSeq, a.Pending.Committer, boolInt(a.Pending.External), a.Pending.CreatedNS).Error; err != nil {
		return fmt.Errorf("store pending commit: %w", err)
	}
	mark := func(i int) error {
		return tx.Exec(`UPDATE delivery_envelopes SET pending = 1 WHERE topic = ? AND sequence_id = ?`, blob(envs[i].Topic), int64(ids[i])).Error
	}
	if err := mark(a.Commit); err != nil {
		return err
	}
	if a.GroupInfo >= 0 {
		return mark(a.GroupInfo)
	}
	return nil
}

// supersedeIn discards the pending commit a one-phase advance replaces.
func supersedeIn(tx *gorm.DB, a ports.PublicStateAdvance) error {
	pend, err := pendingIn(tx, a.GroupID)
	if err != nil {
		return err
	}
	giTopic := append([]byte{byte(ports.TopicGroupInfo)}, a.GroupID...)
	if err := discardIn(tx, a.GroupID, giTopic, pend); err != nil {
		return err
	}
	return closeCommit(tx, a.GroupID, a.Supersede, ports.OutcomeSuperseded, a.SupersededNS)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
