package ports

import "context"

// MaxHighestTopics is the number of topics one batched highest-id read
// names at most: a delivery service accepts at least this many in one
// call, and a caller with more splits them (COMP-279).
const MaxHighestTopics = 1024

// HighestReader is an optional interface of a [Transport]: the highest
// sequence ids of many topics in one call, so that a client holding
// thousands of topics learns which of them moved without one call per
// topic. Callers detect it with a type assertion and fall back to
// [Transport.HighestSequenceID].
type HighestReader interface {
	// HighestSequenceIDs returns, for each topic in order, what
	// [Transport.HighestSequenceID] returns for it: the highest sequence
	// id ever assigned on the topic, 0 when none was. topics holds 1 to
	// [MaxHighestTopics] topics; a call with none, with more, or naming a
	// topic the caller may not read fails as a whole with an error
	// wrapping [ErrInvalidArgument] (or [ErrUnauthenticated]) that names
	// the topic's index. The answer, like every id a service hands out,
	// is an input the caller bounds before it moves a stored position.
	HighestSequenceIDs(ctx context.Context, topics [][]byte) ([]uint64, error)
}

// DeliveryHighestReader is [HighestReader] on the inbound side: a
// [DeliveryService] that implements it serves batched highest-id reads
// for the caller the adapter established.
type DeliveryHighestReader interface {
	// HighestSequenceIDs is [HighestReader.HighestSequenceIDs] for caller.
	HighestSequenceIDs(ctx context.Context, caller Caller, topics [][]byte) ([]uint64, error)
}

// EnvelopeHighestReader is an optional interface of an [EnvelopeStore]
// that reads the highest ids of many topics in one database round trip.
// A delivery service without it calls [EnvelopeStore.Highest] per topic.
type EnvelopeHighestReader interface {
	// HighestMany returns [EnvelopeStore.Highest] of each topic, in
	// order.
	HighestMany(ctx context.Context, topics [][]byte) ([]uint64, error)
}
