package deliverydb

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

// Public states (commit acceptance). delivery_public_states holds one row
// per group and slot. Slot 0 is the group's current state: the
// validator's encoding, its epoch, the sequence id and digest of the
// commit that led to it and the sequence id of the newest accepted
// GroupInfo (whose envelope lives on the group's GroupInfo topic; older
// ones are deleted when a newer one is stored). The slot keeps the table
// open to the two-phase protocol, which stores a pending commit's state
// beside the current one (slot 1) and keeps the previous epoch's (slot 2)
// in rows of the same shape (acceptance.go).
//
// [Store.AppendWithState] locks the groups' rows (on PostgreSQL with
// SELECT … FOR UPDATE, in ascending group order, before the topic rows
// delivery_append locks; on SQLite the single writer excludes every
// other), checks each advance's expectation, appends the envelopes and
// writes the new states in one transaction. A registration that races
// another inserts into the same primary key and fails on it.
const (
	slotCurrent = 0
)

func publicStatesTable(bytesType, intType string) string {
	return `CREATE TABLE delivery_public_states (group_id ` + bytesType + ` NOT NULL, slot ` + intType + ` NOT NULL,
		epoch ` + intType + ` NOT NULL, state ` + bytesType + ` NOT NULL,
		commit_seq ` + intType + ` NOT NULL DEFAULT 0, commit_digest ` + bytesType + `,
		group_info_seq ` + intType + ` NOT NULL DEFAULT 0, PRIMARY KEY (group_id, slot))`
}

var _ ports.PublicStateStore = (*Store)(nil)

type publicStateRow struct {
	Epoch        int64  `gorm:"column:epoch"`
	State        []byte `gorm:"column:state"`
	CommitSeq    int64  `gorm:"column:commit_seq"`
	CommitDigest []byte `gorm:"column:commit_digest"`
	GroupInfoSeq int64  `gorm:"column:group_info_seq"`
}

func (r publicStateRow) stored(groupID []byte) ports.StoredPublicState {
	return ports.StoredPublicState{GroupID: groupID, Epoch: uint64(r.Epoch), State: r.State,
		CommitSeq: uint64(r.CommitSeq), CommitDigest: r.CommitDigest, GroupInfoSeq: uint64(r.GroupInfoSeq)}
}

const selectState = `SELECT epoch, state, commit_seq, commit_digest, group_info_seq FROM delivery_public_states WHERE group_id = ? AND slot = ?`

// PublicState implements [ports.PublicStateStore.PublicState].
func (s *Store) PublicState(ctx context.Context, groupID []byte) (ports.StoredPublicState, error) {
	if err := s.check(ctx); err != nil {
		return ports.StoredPublicState{}, err
	}
	var rows []publicStateRow
	if err := s.db.WithContext(ctx).Raw(selectState, blob(groupID), slotCurrent).Scan(&rows).Error; err != nil {
		return ports.StoredPublicState{}, s.fail(ctx, "public state", "public_state", err)
	}
	if len(rows) == 0 {
		return ports.StoredPublicState{}, fmt.Errorf("public state of group %x: %w", groupID, ports.ErrNotFound)
	}
	return rows[0].stored(groupID), nil
}

// AppendWithState implements [ports.PublicStateStore.AppendWithState]. It
// runs its own transaction beside the group commits of Append (on SQLite
// under the same writer lock).
func (s *Store) AppendWithState(ctx context.Context, envs []ports.NewStoredEnvelope, advances []ports.PublicStateAdvance) ([]uint64, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if len(advances) == 0 {
		return s.Append(ctx, envs)
	}
	adv := append([]ports.PublicStateAdvance(nil), advances...)
	sort.Slice(adv, func(i, j int) bool { return string(adv[i].GroupID) < string(adv[j].GroupID) })
	for i, a := range adv {
		if a.Commit >= len(envs) || a.GroupInfo >= len(envs) || i > 0 && string(adv[i-1].GroupID) == string(a.GroupID) {
			return nil, fmt.Errorf("append with state: %w: advance of group %x names no envelope of the batch or repeats a group", ports.ErrInvalidArgument, a.GroupID)
		}
	}
	if s.writeMu != nil {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	var ids []uint64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, a := range adv {
			if err := s.expect(tx, a); err != nil {
				return err
			}
			if err := expectPending(tx, a); err != nil {
				return err
			}
		}
		var err error
		if ids, err = s.appendTx(tx, envs); err != nil {
			return err
		}
		for _, a := range adv {
			if err := writeState(tx, a, envs, ids); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.TableName == "delivery_public_states" {
			err = fmt.Errorf("%w: a concurrent registration stored the group's state first", ports.ErrStateMoved)
		}
		if errors.Is(err, ports.ErrStateMoved) {
			return nil, fmt.Errorf("append with state: %w", err)
		}
		return nil, s.fail(ctx, "append with state", "append", err)
	}
	if len(ids) > 0 {
		s.hooks.idWait(0)
	}
	return ids, nil
}

// expect locks the group's current state (PostgreSQL) and checks the
// advance's expectation of it.
func (s *Store) expect(tx *gorm.DB, a ports.PublicStateAdvance) error {
	q := selectState
	if s.dialect == "postgres" {
		q += ` FOR UPDATE`
	}
	var rows []publicStateRow
	if err := tx.Raw(q, blob(a.GroupID), slotCurrent).Scan(&rows).Error; err != nil {
		return err
	}
	switch {
	case a.Register && len(rows) > 0:
		return fmt.Errorf("%w: group %x already has a state (epoch %d)", ports.ErrStateMoved, a.GroupID, rows[0].Epoch)
	case a.Register:
		return nil
	case len(rows) == 0:
		return fmt.Errorf("%w: group %x has no state", ports.ErrStateMoved, a.GroupID)
	case uint64(rows[0].Epoch) != a.From || uint64(rows[0].CommitSeq) != a.FromCommitSeq:
		return fmt.Errorf("%w: group %x is at epoch %d (commit %d), not %d (commit %d)", ports.ErrStateMoved, a.GroupID,
			rows[0].Epoch, rows[0].CommitSeq, a.From, a.FromCommitSeq)
	}
	return nil
}

// appendTx stores envs inside tx and returns their ids.
func (s *Store) appendTx(tx *gorm.DB, envs []ports.NewStoredEnvelope) ([]uint64, error) {
	if s.dialect != "postgres" {
		return s.appendIn(tx, envs)
	}
	q, ok := tx.Statement.ConnPool.(queryer)
	if !ok {
		return nil, fmt.Errorf("append with state: transaction of type %T cannot query", tx.Statement.ConnPool)
	}
	r := &appendReq{ctx: context.Background(), envs: envs}
	if err := s.pgAppendOn(q, []*appendReq{r}); err != nil {
		return nil, err
	}
	return r.ids, nil
}

// writeState writes an advance's new state and drops the GroupInfo
// envelopes its new GroupInfo supersedes.
func writeState(tx *gorm.DB, a ports.PublicStateAdvance, envs []ports.NewStoredEnvelope, ids []uint64) error {
	if a.Pending != nil {
		if a.Commit < 0 || a.State == nil {
			return fmt.Errorf("%w: a pending advance of group %x names no commit", ports.ErrInvalidArgument, a.GroupID)
		}
		return writePending(tx, a, envs, ids)
	}
	if a.Supersede != 0 {
		if err := supersedeIn(tx, a); err != nil {
			return err
		}
	}
	if err := unblockIn(tx, a.GroupID, a.Unblock); err != nil {
		return err
	}
	if err := unquarantineIn(tx, a.GroupID, a.Unquarantine); err != nil {
		return err
	}
	var giSeq int64
	if a.GroupInfo >= 0 {
		giSeq = int64(ids[a.GroupInfo])
		// A pending commit's GroupInfo stays until its decision.
		err := tx.Exec(`DELETE FROM delivery_envelopes WHERE topic = ? AND sequence_id < ? AND pending = 0`, blob(envs[a.GroupInfo].Topic), giSeq).Error
		if err != nil {
			return fmt.Errorf("drop superseded group infos: %w", err)
		}
	}
	if a.State == nil {
		if a.GroupInfo < 0 {
			return nil
		}
		return tx.Exec(`UPDATE delivery_public_states SET group_info_seq = ? WHERE group_id = ? AND slot = ?`,
			giSeq, blob(a.GroupID), slotCurrent).Error
	}
	var commitSeq int64
	var digest []byte
	if a.Commit >= 0 {
		commitSeq, digest = int64(ids[a.Commit]), envs[a.Commit].DedupKey
	}
	if a.Register {
		return tx.Exec(`INSERT INTO delivery_public_states (group_id, slot, epoch, state, commit_seq, commit_digest, group_info_seq)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, blob(a.GroupID), slotCurrent, int64(a.Epoch), blob(a.State), commitSeq, nullBlob(digest), giSeq).Error
	}
	set := `epoch = ?, state = ?, commit_seq = ?, commit_digest = ?`
	args := []any{int64(a.Epoch), blob(a.State), commitSeq, nullBlob(digest)}
	if a.GroupInfo >= 0 {
		set += `, group_info_seq = ?`
		args = append(args, giSeq)
	}
	return tx.Exec(`UPDATE delivery_public_states SET `+set+` WHERE group_id = ? AND slot = ?`,
		append(args, blob(a.GroupID), slotCurrent)...).Error
}

// nullBlob is b as a nullable column value.
func nullBlob(b []byte) any {
	if b == nil {
		return nil
	}
	return blob(b)
}
