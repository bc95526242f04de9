package commitlog

import (
	"context"
	"errors"
)

// SyncReport says what one [Log.Sync] did: its publish and its read, each
// with its own outcome.
type SyncReport struct {
	Publish PublishReport
	// PublishErr is the publish's error, nil when it succeeded or the
	// conversation has no commit log.
	PublishErr error
	Read       ReadReport
	// ReadErr is the read's error, nil when it succeeded.
	ReadErr error
}

// Sync publishes and then reads one conversation. The read runs whatever
// the publish did, so a publisher whose publishing keeps failing still
// learns from others' entries; the returned error joins both outcomes
// (errors.Is finds either).
func (l *Log) Sync(ctx context.Context, groupID []byte) (SyncReport, error) {
	var s SyncReport
	s.Publish, s.PublishErr = l.Publish(ctx, groupID)
	if errors.Is(s.PublishErr, ErrNoCommitLog) {
		s.PublishErr = nil
	}
	s.Read, s.ReadErr = l.Read(ctx, groupID)
	return s, errors.Join(s.PublishErr, s.ReadErr)
}
