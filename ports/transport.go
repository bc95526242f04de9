package ports

import (
	"context"

	"github.com/regroup-mls/regroup/proto/backendpb"
)

// TopicKind is the first byte of a topic (TOPIC-001); the identifier
// follows it.
type TopicKind byte

const (
	// TopicGroupMessages carries a group's MLS messages; identifier: the
	// group id, 16 or 32 bytes.
	TopicGroupMessages TopicKind = 0x00
	// TopicWelcomes carries Welcomes; identifier: the installation key or a
	// pointee destination, 32 bytes.
	TopicWelcomes TopicKind = 0x01
	// TopicIdentityUpdates carries an inbox's identity updates; identifier:
	// the inbox id, 32 bytes.
	TopicIdentityUpdates TopicKind = 0x02
	// TopicKeyPackages carries an installation's key packages; identifier:
	// the installation key, 32 bytes.
	TopicKeyPackages TopicKind = 0x03
	// TopicCommitLog carries a conversation's sealed commit-log entries;
	// identifier: the commit-log id, 32 bytes.
	TopicCommitLog TopicKind = 0x04
)

// TopicCursor names a topic and the sequence id after which to read it.
type TopicCursor struct {
	Topic []byte
	// After is exclusive: envelopes with sequence id > After are returned.
	After uint64
}

// Transport reaches a delivery service. Every method honours ctx's deadline
// and cancellation.
//
// The delivery service guarantees (API-201, API-286 to API-289, COMP-041):
// sequence ids come from one counter shared by all topics, so a topic's ids
// strictly increase, have gaps, and are never reused; a read returns a
// prefix of the topic in sequence id order; a publish that follows a
// visible envelope, on any topic, gets a higher sequence id.
//
// What a transport returns belongs to the caller: no envelope it hands out
// shares memory with another caller's or with what it stores, and an
// envelope changed after Publish returned changes nothing stored.
type Transport interface {
	// Publish stores the envelopes and returns the sequence id assigned to
	// each, in order. An envelope the service refuses for what it is fails
	// with an error wrapping [ErrInvalidArgument] naming the reason; then
	// none of the batch is stored. An error wrapping [ErrUnavailable] or
	// [ErrRateLimited] leaves the outcome unknown: the caller retries, and a
	// retried envelope whose bytes equal a stored one's may be stored again
	// with a new id (the caller's own determinism makes it a duplicate),
	// except a sealed commit-log entry, which a service stores once per
	// topic: its retry returns the stored entry's id (COMP-144). A service
	// refuses a call beyond one of its limits with [ErrRateLimited].
	Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error)
	// Query returns up to limit envelopes of the topic with sequence id >
	// after, ascending; limit <= 0 lets the service choose a page size. A
	// shorter page does not mean the topic ended; an empty one does.
	Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error)
	// QueryNewest returns the envelope with the highest sequence id on the
	// topic, or an error wrapping [ErrNotFound] when the topic is empty.
	QueryNewest(ctx context.Context, topic []byte) (*backendpb.OriginatorEnvelope, error)
	// HighestSequenceID returns the highest sequence id on the topic, 0 when
	// it is empty (API-244).
	HighestSequenceID(ctx context.Context, topic []byte) (uint64, error)
	// Subscribe delivers, for each cursor, every envelope after it in
	// sequence id order and then every new one as it is stored, with no gap
	// and no duplicate across reconnects, nor between the stored envelopes
	// and the new ones (an envelope stored while the subscription starts
	// is delivered once). It ends when ctx is cancelled or
	// the subscription is closed.
	Subscribe(ctx context.Context, cursors []TopicCursor) (Subscription, error)
}

// Subscription is a stream of envelopes from [Transport.Subscribe].
type Subscription interface {
	// Next blocks for the next envelope. It returns ctx's error when ctx
	// ends, and an error wrapping [ErrClosed] after Close.
	Next(ctx context.Context) (*backendpb.OriginatorEnvelope, error)
	// Close ends the subscription.
	Close() error
}
