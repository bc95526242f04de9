package gormstore

import (
	"bytes"
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

// messageRow is one stored message. ID is the store-wide insertion order.
// The index messages_topic_position finds a group's messages by sequence
// id; since step 4 it is not unique: a delivery service restored from a
// backup without restore mode hands out ids again, so two messages of a
// group may share one (COMP-466). Sequence id 0 marks a sent message
// whose publish is unconfirmed.
type messageRow struct {
	ID                 uint64 `gorm:"primaryKey;autoIncrement"`
	GroupID            []byte `gorm:"not null;index:messages_group_order,priority:1"`
	SequenceID         uint64 `gorm:"not null"`
	Kind               int32  `gorm:"not null"`
	SenderInbox        string `gorm:"not null"`
	SenderInstallation []byte
	Epoch              uint64 `gorm:"not null"`
	Content            []byte
	PayloadHash        []byte `gorm:"index"`
	Own                bool   `gorm:"not null"`
	SentNs             int64  `gorm:"not null"`
}

func (messageRow) TableName() string { return "messages" }

func createMessages(tx *gorm.DB) error {
	if err := tx.Migrator().CreateTable(&messageRow{}); err != nil {
		return err
	}
	// Both dialects accept a partial unique index.
	return tx.Exec(`CREATE UNIQUE INDEX messages_topic_position ON messages (group_id, sequence_id) WHERE sequence_id > 0`).Error
}

func msgToRow(m ports.Message) messageRow {
	return messageRow{ID: m.ID, GroupID: m.GroupID, SequenceID: m.SequenceID, Kind: int32(m.Kind),
		SenderInbox: m.SenderInbox, SenderInstallation: nonEmpty(m.SenderInstallation), Epoch: m.Epoch,
		Content: nonEmpty(m.Content), PayloadHash: nonEmpty(m.PayloadHash), Own: m.Own, SentNs: toNs(m.SentAt)}
}

func msgFromRow(r messageRow) ports.Message {
	return ports.Message{ID: r.ID, GroupID: r.GroupID, SequenceID: r.SequenceID, Kind: ports.MessageKind(r.Kind),
		SenderInbox: r.SenderInbox, SenderInstallation: r.SenderInstallation, Epoch: r.Epoch,
		Content: r.Content, PayloadHash: r.PayloadHash, Own: r.Own, SentAt: fromNs(r.SentNs)}
}

type messages struct{ t *tx }

func (m messages) Insert(ctx context.Context, msg ports.Message) (ports.Message, bool, error) {
	const op = "insert message"
	if err := checkKey(op, "group id", msg.GroupID); err != nil {
		return ports.Message{}, false, err
	}
	if err := checkU64(op, msg.SequenceID, msg.Epoch); err != nil {
		return ports.Message{}, false, err
	}
	if msg.SequenceID > 0 {
		var rows []messageRow
		err := m.t.q(ctx).Where("group_id = ? AND sequence_id = ?", msg.GroupID, msg.SequenceID).Order("id").Find(&rows).Error
		if err != nil {
			return ports.Message{}, false, fail(ctx, op, err)
		}
		for _, row := range rows {
			if sameMessage(row, msg) {
				return msgFromRow(row), false, nil
			}
		}
	}
	row := msgToRow(msg)
	row.ID = 0
	if err := m.t.q(ctx).Create(&row).Error; err != nil {
		return ports.Message{}, false, fail(ctx, op, err)
	}
	return msgFromRow(row), true, nil
}

// sameMessage reports whether the stored row is msg stored before: the
// same kind, sender, epoch and content (COMP-466).
func sameMessage(row messageRow, msg ports.Message) bool {
	return row.Kind == int32(msg.Kind) && row.SenderInbox == msg.SenderInbox &&
		bytes.Equal(row.SenderInstallation, msg.SenderInstallation) && row.Epoch == msg.Epoch &&
		bytes.Equal(row.Content, msg.Content)
}

// reissuedPositions is step 4: the index on (group, sequence id) stops
// being unique (COMP-466). The rows stay as they are.
func reissuedPositions(tx *gorm.DB) error {
	if err := tx.Exec(`DROP INDEX messages_topic_position`).Error; err != nil {
		return err
	}
	return tx.Exec(`CREATE INDEX messages_topic_position ON messages (group_id, sequence_id) WHERE sequence_id > 0`).Error
}

// payloadByGroup is step 5: ByPayloadHash, which every sent message and
// every message read runs, looks a message up by group and payload hash.
// With an index on the hash alone, SQLite's planner chose the group's
// index and read every message of the group; the index on both columns
// takes its place (COMP-552).
func payloadByGroup(tx *gorm.DB) error {
	if err := tx.Exec(`CREATE INDEX messages_by_payload ON messages (group_id, payload_hash)`).Error; err != nil {
		return err
	}
	return tx.Exec(`DROP INDEX idx_messages_payload_hash`).Error
}

// positionsIndexed is step 6: the index on (group, sequence id) covers
// every row, unconfirmed messages (sequence id 0) included. Insert looks
// a received message up by group and sequence id on every message read,
// and neither SQLite nor a generic PostgreSQL plan can use an index whose
// WHERE clause (sequence_id > 0) the query implies only through a bound
// value: SQLite planned the lookup on the group's index and read every
// message of the group (COMP-554).
func positionsIndexed(tx *gorm.DB) error {
	if err := tx.Exec(`DROP INDEX messages_topic_position`).Error; err != nil {
		return err
	}
	return tx.Exec(`CREATE INDEX messages_topic_position ON messages (group_id, sequence_id)`).Error
}

func (m messages) ByPayloadHash(ctx context.Context, groupID, hash []byte) (ports.Message, error) {
	const op = "message by payload hash"
	if len(hash) == 0 {
		return ports.Message{}, checkKey(op, "payload hash", nil)
	}
	var row messageRow
	err := m.t.q(ctx).Where("group_id = ? AND payload_hash = ? AND own", groupID, hash).
		Order("id").Take(&row).Error
	if err != nil {
		return ports.Message{}, fail(ctx, op, err)
	}
	return msgFromRow(row), nil
}

func (m messages) SetSequenceID(ctx context.Context, id, seq uint64, sentAt time.Time) error {
	const op = "set message sequence id"
	if err := checkU64(op, id, seq); err != nil {
		return err
	}
	res := m.t.q(ctx).Model(&messageRow{}).Where("id = ?", id).
		Updates(map[string]any{"sequence_id": seq, "sent_ns": toNs(sentAt)})
	if res.Error != nil {
		return fail(ctx, op, res.Error)
	}
	if res.RowsAffected == 0 {
		return fail(ctx, op, gorm.ErrRecordNotFound)
	}
	return nil
}

func (m messages) List(ctx context.Context, groupID []byte, afterSeq uint64, limit int) ([]ports.Message, error) {
	const op = "list messages"
	if err := checkU64(op, afterSeq); err != nil {
		return nil, err
	}
	q := m.t.q(ctx).Where("group_id = ? AND (sequence_id > ? OR sequence_id = 0)", groupID, afterSeq).
		Order("CASE WHEN sequence_id = 0 THEN 1 ELSE 0 END, sequence_id, id")
	if limit > 0 {
		q = q.Limit(limit)
	}
	var rows []messageRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fail(ctx, op, err)
	}
	out := make([]ports.Message, len(rows))
	for i, r := range rows {
		out[i] = msgFromRow(r)
	}
	return out, nil
}
