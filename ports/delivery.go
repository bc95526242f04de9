package ports

import (
	"context"

	"github.com/regroup-mls/regroup/proto/backendpb"
)

// AuthContext is the Ed25519ctx context string of the signature a client
// makes over a server challenge to prove its installation key (companion
// definitions: connections to regroupd are authenticated by an
// installation-key signature over a server challenge).
const AuthContext = "regroup delivery auth v1"

// PublishContext is the Ed25519ctx context string of the publish signature
// over a CommitLogEntryTBS (companion definitions: publish signature,
// API-300).
const PublishContext = "regroup commit-log publish v1"

// Caller is who a delivery-service request comes from.
type Caller struct {
	// InstallationKey is the 32-byte Ed25519 installation key the caller's
	// connection proved by signing a server challenge; nil for an
	// anonymous caller.
	InstallationKey []byte
}

// Authenticated reports whether the caller proved an installation key.
func (c Caller) Authenticated() bool { return len(c.InstallationKey) != 0 }

// DeliveryService is the inbound port of the delivery service: what a
// server adapter (gRPC) or an in-process transport serves. Its guarantees
// are [Transport]'s; every method also takes the [Caller] the adapter
// established, and refuses with an error wrapping [ErrUnauthenticated] a
// request that needs an identity the caller does not have. Reading a
// topic whose identifier is a capability (commit-log and welcome topics)
// and the public topics (identity updates, key packages) needs none.
type DeliveryService interface {
	// Publish admits and stores the batch atomically and returns each
	// envelope's sequence id, in order (see [Transport.Publish]).
	Publish(ctx context.Context, caller Caller, envs []*backendpb.ClientEnvelope) ([]uint64, error)
	// Query returns up to limit envelopes after the cursor, ascending (see
	// [Transport.Query]).
	Query(ctx context.Context, caller Caller, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error)
	// QueryNewest returns the topic's newest envelope or an error wrapping
	// [ErrNotFound] (see [Transport.QueryNewest]).
	QueryNewest(ctx context.Context, caller Caller, topic []byte) (*backendpb.OriginatorEnvelope, error)
	// HighestSequenceID returns the highest sequence id ever assigned on
	// the topic, 0 when none was (see [Transport.HighestSequenceID]).
	HighestSequenceID(ctx context.Context, caller Caller, topic []byte) (uint64, error)
	// Subscribe streams every envelope after each cursor, then new ones, in
	// order per topic (see [Transport.Subscribe]).
	Subscribe(ctx context.Context, caller Caller, cursors []TopicCursor) (Subscription, error)
	// Authenticate checks signature, an Ed25519ctx signature with context
	// [AuthContext] over challenge by installationKey, and returns the
	// caller it proves. It fails with an error wrapping
	// [ErrUnauthenticated] when the signature does not verify. The adapter
	// issues the challenge and ensures it is fresh for the connection.
	Authenticate(ctx context.Context, challenge, installationKey, signature []byte) (Caller, error)
}

// NewStoredEnvelope is one envelope handed to [EnvelopeStore.Append].
type NewStoredEnvelope struct {
	// Topic is the kind byte followed by the identifier.
	Topic []byte
	// Envelope is the serialized ClientEnvelope.
	Envelope []byte
	// ServerTimestampNS is the time the service received it, nanoseconds
	// since the Unix epoch.
	ServerTimestampNS int64
	// ExpiresAtNS is when a retention sweep may delete it, nanoseconds
	// since the Unix epoch; 0 keeps it forever.
	ExpiresAtNS int64
	// DedupKey, when not nil, makes the envelope idempotent on its topic:
	// if an envelope of the same topic with the same DedupKey is already
	// stored (or comes earlier in the same batch), Append stores nothing
	// for it and returns that envelope's sequence id in its place.
	DedupKey []byte
}

// StoredEnvelope is one envelope as an [EnvelopeStore] returns it.
type StoredEnvelope struct {
	Topic             []byte
	SequenceID        uint64
	ServerTimestampNS int64
	// Envelope is the serialized ClientEnvelope, as appended.
	Envelope []byte
	// Pending is set on a commit (and its GroupInfo) stored as its group's
	// pending commit (commit acceptance in two phases, [AcceptanceStore]);
	// readers see it as OriginatorEnvelope.pending.
	Pending bool
}

// EnvelopeStore is the outbound port the delivery service keeps envelopes
// in. Implementations are safe for concurrent use.
type EnvelopeStore interface {
	// Append stores every envelope in one database transaction and returns
	// their sequence ids in input order. Ids are assigned inside that
	// transaction from one counter shared by every topic of the store
	// (COMP-041): the store's first envelope gets 1, and the ids of a
	// batch increase in input order. A topic's ids strictly increase, with
	// gaps where other topics took ids; an id is never reused, also after
	// a retention sweep or a rolled-back batch. An Append that starts after
	// an envelope is visible gets higher ids than it, on any topic
	// (API-289; FORK-077, JOIN-037 and JOIN-050 compare ids of different
	// topics). Within one topic, id x is never visible before a lower id of
	// the topic, so a reader that re-reads from its cursor misses nothing.
	// Either the whole batch is stored or none. An envelope whose DedupKey
	// is already stored on its topic takes no new id: its place in the
	// result holds the stored envelope's id (which may be lower than the
	// batch's new ids).
	//
	// Append returns only once the transaction that stores the batch has
	// committed or rolled back, even when ctx ends while it runs: a caller
	// that wakes readers after Append returns, whatever it returned, never
	// wakes them before the batch is visible. When ctx ends, a store may
	// give up on the batch (nothing stored, an error wrapping ctx's error)
	// or let it commit (its ids returned), but it reports which.
	Append(ctx context.Context, envs []NewStoredEnvelope) ([]uint64, error)
	// Range returns up to limit (> 0) envelopes of the topic with sequence
	// id > after, ascending, and stops before the envelope that would make
	// the sum of the returned Envelope lengths exceed maxBytes (> 0); the
	// first envelope is returned whatever its size. The budget is applied
	// while reading: of the envelopes it does not return, the store loads
	// at most the one that crossed the budget. A cursor above every
	// possible id (after > 2^63-1) yields no envelope.
	Range(ctx context.Context, topic []byte, after uint64, limit, maxBytes int) ([]StoredEnvelope, error)
	// Newest returns the topic's envelope with the highest sequence id
	// that is not [StoredEnvelope.Pending], or
	// an error wrapping [ErrNotFound] when it holds none.
	Newest(ctx context.Context, topic []byte) (StoredEnvelope, error)
	// Highest returns the highest sequence id ever assigned on the topic
	// (the topic's own, not the shared counter's), 0 when none was.
	Highest(ctx context.Context, topic []byte) (uint64, error)
	// DeleteExpired deletes every envelope whose ExpiresAtNS is non-zero
	// and not after nowNS, and returns how many it deleted.
	DeleteExpired(ctx context.Context, nowNS int64) (int64, error)
	// Close releases the database; later calls fail with [ErrClosed].
	Close() error
}

// EnvelopeWatcher is an optional interface of an [EnvelopeStore] that
// several delivery-service processes share: it reports appends made by any
// of them, so each can wake its own subscribers. The delivery service
// detects it with a type assertion.
type EnvelopeWatcher interface {
	// Watch calls changed with the topic of every committed append, from
	// any process, until ctx ends; changed(nil) means any topic may have
	// changed (for example after the watch reconnected and may have missed
	// reports). It returns ctx's error, or an error when watching is not
	// possible at all.
	Watch(ctx context.Context, changed func(topic []byte)) error
}
