package client

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// notBeforeSkew backdates a leaf's not_before so that a peer whose clock
// runs a little behind accepts it.
const notBeforeSkew = time.Hour

// identityTopic returns the identity-update topic of an inbox: 0x02 ||
// the 32 bytes the hex inbox id encodes (COMP-070).
func identityTopic(inbox string) ([]byte, error) {
	raw, err := hex.DecodeString(inbox)
	if err != nil || len(raw) != 32 {
		return nil, fmt.Errorf("inbox id %q: %w", inbox, ports.ErrInvalidArgument)
	}
	return append([]byte{byte(ports.TopicIdentityUpdates)}, raw...), nil
}

// resolveInbox returns an inbox's association state at the newest identity
// sequence id the delivery service reports (API-244). An inbox with no
// identity update wraps [ports.ErrNotFound].
func (c *Client) resolveInbox(ctx context.Context, inbox string) (ports.AssociationState, error) {
	topic, err := identityTopic(inbox)
	if err != nil {
		return ports.AssociationState{}, err
	}
	seq, err := c.deps.Transport.HighestSequenceID(ctx, topic)
	if err != nil {
		return ports.AssociationState{}, fmt.Errorf("identity of %s: %w", inbox, err)
	}
	if seq == 0 {
		return ports.AssociationState{}, fmt.Errorf("identity of %s: no identity update: %w", inbox, ports.ErrNotFound)
	}
	st, err := c.stateAtReported(ctx, inbox, seq)
	if err != nil {
		return ports.AssociationState{}, fmt.Errorf("identity of %s: %w", inbox, err)
	}
	return st, nil
}

// stateAtReported resolves an inbox's state from the newest sequence id
// the delivery service reported, which no signature covers: a resolver
// that can (ports.NewestIdentity) answers at the highest verified update
// up to it (COMP-274); another resolves that exact id.
func (c *Client) stateAtReported(ctx context.Context, inbox string, seq uint64) (ports.AssociationState, error) {
	if ni, ok := c.deps.Identity.(ports.NewestIdentity); ok {
		return ni.NewestUpTo(ctx, inbox, seq)
	}
	return c.deps.Identity.AssociationState(ctx, inbox, seq)
}

// resolveInboxes resolves several inboxes as resolveInbox does: the newest
// identity sequence id of each, asked of the delivery service a few at a
// time, each state resolved beside it when the resolver takes a reported
// id (ports.NewestIdentity), or every state in one call when it can
// batch (ports.BatchIdentity). The states come back in the inboxes' order;
// the first inbox that cannot be resolved fails the call.
func (c *Client) resolveInboxes(ctx context.Context, inboxes []string) ([]ports.AssociationState, error) {
	batch, ok := c.deps.Identity.(ports.BatchIdentity)
	newest, isNewest := c.deps.Identity.(ports.NewestIdentity)
	if (!ok && !isNewest) || len(inboxes) < 2 {
		out := make([]ports.AssociationState, len(inboxes))
		for i, inbox := range inboxes {
			st, err := c.resolveInbox(ctx, inbox)
			if err != nil {
				return nil, err
			}
			out[i] = st
		}
		return out, nil
	}
	reqs := make([]ports.IdentityRequest, len(inboxes))
	errs := make([]error, len(inboxes))
	out := make([]ports.AssociationState, len(inboxes))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, inbox := range inboxes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			reqs[i].InboxID = inbox
			topic, err := identityTopic(inbox)
			if err != nil {
				errs[i] = err
				return
			}
			seq, err := c.deps.Transport.HighestSequenceID(ctx, topic)
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("identity of %s: %w", inbox, err)
			case seq == 0:
				errs[i] = fmt.Errorf("identity of %s: no identity update: %w", inbox, ports.ErrNotFound)
			case isNewest: // COMP-274
				if out[i], err = newest.NewestUpTo(ctx, inbox, seq); err != nil {
					errs[i] = fmt.Errorf("identity of %s: %w", inbox, err)
				}
			}
			reqs[i].SequenceID = seq
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if isNewest {
		return out, nil
	}
	res, err := batch.AssociationStates(ctx, reqs)
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		if r.Err != nil {
			return nil, fmt.Errorf("identity of %s: %w", inboxes[i], r.Err)
		}
		out[i] = r.State
	}
	return out, nil
}

// ownAssociation returns this inbox's newest association state, which must
// associate this installation.
func (c *Client) ownAssociation(ctx context.Context) (ports.AssociationState, error) {
	st, err := c.resolveInbox(ctx, c.InboxID())
	if errors.Is(err, ports.ErrNotFound) || errors.Is(err, ports.ErrUnavailable) {
		if held, herr := c.deps.Identity.Newest(ctx, c.InboxID()); herr == nil {
			st, err = held, nil
		}
	}
	if err != nil {
		return ports.AssociationState{}, err
	}
	if !slices.ContainsFunc(st.InstallationKeys, func(k []byte) bool { return bytes.Equal(k, c.InstallationKey()) }) {
		return ports.AssociationState{}, fmt.Errorf("inbox %s does not associate this installation at %d: %w",
			c.InboxID(), st.SequenceID, ErrNotPermitted)
	}
	return st, nil
}
