package keypackage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// A delivery service restored from a backup deletes every stored key
// package (COMP-463), and one restored carelessly serves a package older
// than the current one, which may have been used since. The manager reads
// what its topic serves at its first tick and then at most once per
// TickInterval; when the service serves no package, or one older than
// the current package's publish, it rotates: senders get a new package.

// unserved reports whether the service serves no package of this
// installation, or one older than the current one; it reads the topic
// only when a check is due.
func (m *Manager) unserved(ctx context.Context, s snapshot) (bool, error) {
	if s.current < 0 {
		return false, nil
	}
	now := m.o.Clock.Now()
	m.checkMu.Lock()
	due := m.checkedAt.IsZero() || !now.Before(m.checkedAt.Add(m.o.TickInterval))
	if due {
		m.checkedAt = now
	}
	m.checkMu.Unlock()
	if !due {
		return false, nil
	}
	env, err := m.o.Transport.QueryNewest(ctx, m.topic())
	if errors.Is(err, ports.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("key package: read the served package: %w", err)
	}
	return env.GetSequenceId() < s.recs[s.current].PublishSequenceID, nil
}

// RecheckServed makes the next tick read what the topic serves, whenever
// the last read was: the client calls it when its connection to the
// delivery service broke, since a service restored from a backup comes
// back after one.
func (m *Manager) RecheckServed() {
	m.checkMu.Lock()
	m.checkedAt = time.Time{}
	m.checkMu.Unlock()
}
