package ports

import (
	"context"
	"time"
)

// MessageKind says what a stored [Message] is.
type MessageKind int32

const (
	// MessageApplication is an application message a member sent.
	MessageApplication MessageKind = 1
	// MessageGroupUpdated is the record a client keeps of a commit it
	// applied: who was added and removed, which metadata changed. It is the
	// retained role evidence of fork-recovery section 3.
	MessageGroupUpdated MessageKind = 2
	// MessageLeaveRequest is a member's request to leave (ADR-0030
	// Decision 7).
	MessageLeaveRequest MessageKind = 3
)

// Message is one message a client holds for a conversation: an
// application message it received or sent, or a group-update record.
// Messages survive a Welcome that replaces the group's state (JOIN-044).
type Message struct {
	GroupID []byte
	// ID is assigned by the store on Insert: 1 for the store's first
	// message, strictly increasing across all groups.
	ID uint64
	// SequenceID is the envelope's sequence id on the group's message
	// topic; 0 for a sent message whose publish has not been confirmed.
	SequenceID uint64
	Kind       MessageKind
	// SenderInbox and SenderInstallation name the sending member (for a
	// group update, the committer).
	SenderInbox        string
	SenderInstallation []byte
	// Epoch is the MLS epoch the message was sent in.
	Epoch uint64
	// Content is the application payload, or the encoded group update.
	Content []byte
	// PayloadHash identifies a sent message's published bytes, so that the
	// client recognises its own message when it reads the topic; empty for
	// received messages.
	PayloadHash []byte
	// Own reports a message this installation sent.
	Own bool
	// SentAt is the delivery service's timestamp, or the local time of
	// sending until the publish is confirmed.
	SentAt time.Time
}

// Messages stores the messages of every conversation.
type Messages interface {
	// Insert stores m and returns it with its assigned ID. A message with the
	// same group id and non-zero SequenceID as a stored one, and the same
	// kind, sender inbox and installation, epoch and content, is not stored
	// twice: Insert returns the stored one and inserted = false. A
	// different message at a stored one's sequence id is stored beside it:
	// a delivery service restored from a backup hands out ids again
	// (COMP-466).
	Insert(ctx context.Context, m Message) (stored Message, inserted bool, err error)
	// ByPayloadHash returns the group's own message with that payload hash,
	// or an error wrapping [ErrNotFound].
	ByPayloadHash(ctx context.Context, groupID, hash []byte) (Message, error)
	// SetSequenceID records the sequence id the delivery service assigned
	// to the message with that ID, and its timestamp, also when another
	// message of the group holds that id (COMP-466).
	SetSequenceID(ctx context.Context, id, seq uint64, sentAt time.Time) error
	// List returns up to limit messages of the group in topic order: those
	// with a sequence id greater than afterSeq ascending (messages sharing
	// one in the order they were stored), then the sent
	// messages not yet confirmed (sequence id 0) in the order they were
	// stored; limit <= 0 means no limit.
	List(ctx context.Context, groupID []byte, afterSeq uint64, limit int) ([]Message, error)
}

// MessageTx is an optional interface of a [Tx] whose store keeps messages.
// The client SDK requires it (client.New refuses a store without it), so
// the storage contract suite fails a store that lacks it unless the
// harness declares that the store will not back a client; a store built
// before it existed keeps compiling.
type MessageTx interface {
	Messages() Messages
}
