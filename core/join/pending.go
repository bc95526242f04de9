package join

import (
	"context"

	"github.com/regroup-mls/regroup/proto/backendpb"
)

// awaitAnchorAccepted applies two-phase commit acceptance (ADR-0030) to a
// Welcome's anchor (COMP-447): when the commit at message_cursor is one
// the delivery service holds pending, the Welcome is held until an
// acceptance notice on the topic decides it; confirmed, the Welcome goes
// on; dropped, expired or superseded, it is rejected, since no member
// ever reaches the epoch it leads to. An anchor without the pending mark
// took effect at once.
func (r *Receiver) awaitAnchorAccepted(ctx context.Context, c *candidate) error {
	if c.anchor == 0 {
		return nil
	}
	gid := c.staged.Group.GroupID
	after, pending := c.anchor-1, false
	for {
		envs, err := r.o.Transport.Query(ctx, groupTopic(gid), after, 100)
		if err != nil {
			return local(err)
		}
		moved := false
		for _, e := range envs {
			s := e.GetSequenceId()
			if s <= after {
				continue
			}
			after, moved = s, true
			if s == c.anchor {
				if pending = e.GetPending(); !pending {
					return nil
				}
				continue
			}
			n := e.GetEnvelope().GetAcceptanceNotice()
			if !pending || n == nil || n.GetCommitSequenceId() != c.anchor {
				continue
			}
			switch n.GetOutcome() {
			case backendpb.AcceptanceNotice_CONFIRMED:
				return nil
			case backendpb.AcceptanceNotice_DROPPED, backendpb.AcceptanceNotice_EXPIRED, backendpb.AcceptanceNotice_SUPERSEDED:
				return reject("COMP-447", "the commit at message_cursor %d was %s by the delivery service", c.anchor, n.GetOutcome())
			}
		}
		if !moved {
			break
		}
	}
	if !pending {
		return nil // not on the topic yet: the rules of section 7 decide
	}
	return hold(HoldPending, "COMP-447", "the commit at message_cursor %d is pending its acceptance", c.anchor)
}
