package commitlog

import (
	"bytes"
	"context"
	"errors"

	"github.com/regroup-mls/regroup/ports"
)

// The fork state of section 5 depends on two numbers of the current
// membership: the shared commit (the highest commit sequence id held by
// both a local entry, other than a removal entry, and an accepted entry)
// and the newest local commit. Both only grow while a membership lasts,
// because neither log loses entries, so each new local or accepted entry
// moves them with one indexed lookup in the other log; the state itself is
// then two more lookups. No pass re-reads either log.

// tracker keeps a conversation's [ports.ForkComparison] current inside one
// transaction and stores the fork state it gives.
type tracker struct {
	tx      ports.Tx
	g       ports.Group
	c       ports.ForkComparison
	changed bool
	skip    bool // forked already: FORK-041 keeps it, nothing to track
}

// track loads the comparison of g's current membership. One stored for
// another membership, or none (a store written before comparisons were
// kept), is computed from the two logs once, and so is one that rebuild
// asks for (accepted entries were withdrawn).
func track(ctx context.Context, tx ports.Tx, g ports.Group, rebuild bool) (*tracker, error) {
	t := &tracker{tx: tx, g: g, skip: g.ForkState == ports.ForkForked}
	if t.skip {
		return t, nil
	}
	c, ok, err := tx.RemoteCommitLog().Comparison(ctx, g.ID)
	if err != nil {
		return nil, err
	}
	if ok && c.Membership == g.Membership && !rebuild {
		t.c = c
		return t, nil
	}
	local, err := tx.LocalCommitLog().List(ctx, g.ID, 0, 0)
	if err != nil {
		return nil, err
	}
	remote, err := tx.RemoteCommitLog().List(ctx, g.ID, 0, 0)
	if err != nil {
		return nil, err
	}
	t.c = ComputeComparison(local, remote, g.Membership)
	t.c.GroupID = g.ID
	t.changed = true
	return t, nil
}

// local notes a local entry recorded in this transaction.
func (t *tracker) local(ctx context.Context, e ports.LocalCommitLogEntry) error {
	if t.skip || e.Membership != t.c.Membership || e.RemovedThisInstallation {
		return nil
	}
	if e.CommitSequenceID > t.c.NewestLocal {
		t.c.NewestLocal, t.changed = e.CommitSequenceID, true
	}
	if e.CommitSequenceID <= t.c.Shared {
		return nil
	}
	_, err := t.tx.RemoteCommitLog().ByCommit(ctx, t.g.ID, e.CommitSequenceID)
	switch {
	case err == nil:
		t.c.Shared, t.changed = e.CommitSequenceID, true
	case !errors.Is(err, ports.ErrNotFound):
		return err
	}
	return nil
}

// remote notes an entry accepted in this transaction.
func (t *tracker) remote(ctx context.Context, r ports.RemoteCommitLogEntry) error {
	if t.skip || r.CommitSequenceID <= t.c.Shared {
		return nil
	}
	l, err := t.tx.LocalCommitLog().ByCommit(ctx, t.g.ID, t.c.Membership, r.CommitSequenceID)
	switch {
	case err == nil:
		if !l.RemovedThisInstallation {
			t.c.Shared, t.changed = r.CommitSequenceID, true
		}
	case !errors.Is(err, ports.ErrNotFound):
		return err
	}
	return nil
}

// finish stores the comparison and the fork state it gives (FORK-082),
// keeping forked (FORK-041). It returns the state and, for a transition to
// forked, the event to report once the transaction commits.
func (t *tracker) finish(ctx context.Context) (ports.ForkState, *ForkEvent, error) {
	if t.skip {
		return ports.ForkForked, nil, nil
	}
	if t.changed {
		if err := t.tx.RemoteCommitLog().PutComparison(ctx, t.c); err != nil {
			return 0, nil, err
		}
	}
	state, shared, err := t.state(ctx)
	if err != nil {
		return 0, nil, err
	}
	if state != t.g.ForkState {
		if err := t.tx.Groups().Update(ctx, t.g.ID, func(gr *ports.Group) error {
			if gr.ForkState != ports.ForkForked {
				gr.ForkState = state
			}
			return nil
		}); err != nil {
			return 0, nil, err
		}
	}
	if state != ports.ForkForked || shared == nil {
		return state, nil, nil
	}
	return state, &ForkEvent{
		GroupID:          bytes.Clone(t.g.ID),
		CommitSequenceID: shared.Local.CommitSequenceID,
		Local:            shared.Local.AppliedEpochAuthenticator,
		Remote:           shared.Remote.AppliedEpochAuthenticator,
		RemoteAuthor:     shared.Remote.AuthorInstallationKey,
	}, nil
}

// state applies the table of section 5 to the comparison.
func (t *tracker) state(ctx context.Context) (ports.ForkState, *Shared, error) {
	if t.c.Shared == 0 {
		return ports.ForkUnknown, nil, nil
	}
	l, err := t.tx.LocalCommitLog().ByCommit(ctx, t.g.ID, t.c.Membership, t.c.Shared)
	if err != nil {
		return 0, nil, err
	}
	r, err := t.tx.RemoteCommitLog().ByCommit(ctx, t.g.ID, t.c.Shared)
	if err != nil {
		return 0, nil, err
	}
	s := &Shared{Local: l, Remote: r}
	switch {
	case !bytes.Equal(l.AppliedEpochAuthenticator, r.AppliedEpochAuthenticator):
		return ports.ForkForked, s, nil
	case t.c.NewestLocal > t.c.Shared:
		return ports.ForkUnknown, s, nil
	}
	return ports.ForkNotForked, s, nil
}

// ComputeComparison computes a [ports.ForkComparison] from a
// conversation's whole local and accepted logs: the shared commit and the
// newest local commit of the membership, removal entries left out.
func ComputeComparison(local []ports.LocalCommitLogEntry, remote []ports.RemoteCommitLogEntry, membership uint64) ports.ForkComparison {
	c := ports.ForkComparison{Membership: membership}
	accepted := make(map[uint64]bool, len(remote))
	for _, r := range remote {
		accepted[r.CommitSequenceID] = true
	}
	for _, l := range local {
		if l.Membership != membership || l.RemovedThisInstallation {
			continue
		}
		c.NewestLocal = max(c.NewestLocal, l.CommitSequenceID)
		if accepted[l.CommitSequenceID] {
			c.Shared = max(c.Shared, l.CommitSequenceID)
		}
	}
	return c
}
