package client

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
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
	st, err := c.deps.Identity.AssociationState(ctx, inbox, seq)
	if err != nil {
		return ports.AssociationState{}, fmt.Errorf("identity of %s: %w", inbox, err)
	}
	return st, nil
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
