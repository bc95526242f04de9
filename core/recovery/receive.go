package recovery

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/ports"
)

// OnOneshot acts on the message of a validated one-shot Welcome
// (FORK-052); the join code calls it ([join.ReceiverOptions.OnOneshot])
// and never installs or lists the group. A ReaddRequest is kept for
// [Recovery.Respond] when this installation's consent for its group is
// allowed and the Welcome's adder is a leaf of this installation's tree
// of that group (FORK-053); otherwise, and for a message of a kind this
// client does not act on, it returns a [*join.Rejection] naming the rule,
// and the Welcome is rejected. Any other error is local and keeps the
// Welcome for a retry.
func (r *Recovery) OnOneshot(ctx context.Context, o join.Oneshot) error {
	req := o.Message.GetReaddRequest()
	if req == nil {
		return &join.Rejection{Rule: "FORK-052", Err: errors.New("a one-shot message of a kind this client does not act on")}
	}
	gid, latest := req.GetGroupId(), req.GetLatestCommitSequenceId()
	if len(gid) != 16 && len(gid) != 32 {
		return &join.Rejection{Rule: "FORK-053", Err: fmt.Errorf("a readd request names a group id of %d bytes", len(gid))}
	}
	if latest > math.MaxInt64 {
		// No envelope has such an id, so no readder ever holds that
		// position (COMP-202), and no store holds the value.
		return &join.Rejection{Rule: "FORK-080", Err: fmt.Errorf("latest_commit_sequence_id %d is above every sequence id", latest)}
	}
	err := r.tx(ctx, func(tx ports.Tx) error {
		if err := r.checkRequester(ctx, tx, gid, o.Adder); err != nil {
			return err
		}
		now := r.o.Clock.Now()
		return tx.Readds().Upsert(ctx, gid, o.Adder.SignatureKey, func(s *ports.ReaddStatus) error {
			if !s.Requested || latest > s.RequestedAt {
				s.RequestedAt = latest // a later request supersedes one still held
			}
			s.Requested, s.UpdatedAt = true, now
			return nil
		})
	})
	if err != nil {
		return err
	}
	r.emit(Event{Kind: RequestReceived, GroupID: gid, InstallationKey: o.Adder.SignatureKey, CommitSequenceID: latest})
	return nil
}

// checkRequester applies FORK-053: consent allowed for the group, and the
// adder (JOIN-025) a leaf of this installation's tree of it. A request
// for a conversation this client does not hold, or one that is not a
// group or DM, is discarded the same way.
func (r *Recovery) checkRequester(ctx context.Context, tx ports.Tx, gid []byte, adder ports.Member) error {
	g, err := tx.Groups().Get(ctx, gid)
	if errors.Is(err, ports.ErrNotFound) {
		return &join.Rejection{Rule: "FORK-053", Err: fmt.Errorf("a readd request for group %x, which this client does not hold", gid)}
	}
	if err != nil {
		return err
	}
	if g.ConversationType != ports.ConversationGroup && g.ConversationType != ports.ConversationDM {
		return &join.Rejection{Rule: "FORK-053", Err: fmt.Errorf("a readd request for a conversation of type %d", g.ConversationType)}
	}
	if g.Consent != ports.ConsentAllowed {
		return &join.Rejection{Rule: "FORK-053", Err: fmt.Errorf("consent for group %x is %d, not allowed", gid, g.Consent)}
	}
	view, err := r.o.MLS.Group(ctx, tx, gid)
	if errors.Is(err, ports.ErrGroupNotFound) {
		return &join.Rejection{Rule: "FORK-053", Err: fmt.Errorf("no MLS state for group %x", gid)}
	}
	if err != nil {
		return err
	}
	if _, ok := leafOf(view, adder.SignatureKey); !ok {
		return &join.Rejection{Rule: "FORK-053", Err: fmt.Errorf("the requester %x is not a leaf of group %x", adder.SignatureKey, gid)}
	}
	return nil
}
