package ports

import "context"

// CommitLogOverviewTx is an optional interface of a [Tx]: what a client
// needs to know about the commit logs of all its conversations, read at
// once, so that a sync reads the logs that changed and not every log
// (COMP-280). A client whose store lacks it reads positions one group at
// a time.
type CommitLogOverviewTx interface {
	// CommitLogOverview returns the overview repository of this
	// transaction.
	CommitLogOverview() CommitLogOverview
}

// CommitLogOverview reads the commit-log state of every conversation.
type CommitLogOverview interface {
	// ReadPositions returns every stored read position
	// ([RemoteCommitLog.ReadPosition]) keyed by the group id's bytes; a
	// group with none is absent (its position is 0).
	ReadPositions(ctx context.Context) (map[string]uint64, error)
	// Unconfirmed returns the ids of the groups holding a local entry
	// above their confirmed publish progress, or local entries and no
	// publish progress: a superset of the groups with an entry still to
	// publish, ordered by id.
	Unconfirmed(ctx context.Context) ([][]byte, error)
}
