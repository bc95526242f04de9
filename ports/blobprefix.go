package ports

import "context"

// BlobPrefixReader is an optional interface of a [Blobs] that reads the
// start of a value without the rest. The MLS engine reads the header of a
// staged Welcome (its write tag, some 30 bytes) this way to learn whether
// the decoded state it keeps is the one the transaction sees, instead of
// reading a blob the size of the group's tree; a Blobs without it costs
// that whole read. A decorator of Blobs that stores other bytes than it
// is given (encrypting them, say) must not offer it; one that stores them
// as given may forward it.
type BlobPrefixReader interface {
	// GetPrefix returns the first n bytes of the value Get would return
	// (all of it when it is shorter, none when n <= 0), in the same
	// transaction and with the same ownership, or an error wrapping
	// [ErrNotFound] when there is no value.
	GetPrefix(ctx context.Context, namespace, key string, n int) ([]byte, error)
}
