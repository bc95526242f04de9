package recovery

import (
	"bytes"
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

// Readded records a readd commit the client merged, whoever published it
// (FORK-064): in tx, the transaction that merges it, the commit's
// sequence id becomes the newest readd of each readded installation, and
// a request of another installation kept here whose
// latest_commit_sequence_id is below it is answered and no longer kept.
// The client calls it for every merged commit that removes and adds back
// the same installation.
func (r *Recovery) Readded(ctx context.Context, tx ports.Tx, groupID []byte, keys [][]byte, seq uint64) error {
	now := r.o.Clock.Now()
	for _, k := range keys {
		own := bytes.Equal(k, r.ownKey())
		err := tx.Readds().Upsert(ctx, groupID, k, func(s *ports.ReaddStatus) error {
			if seq > s.RespondedAt {
				s.RespondedAt = seq
			}
			// This installation's own mark stays until a Welcome replaces
			// its state (FORK-051).
			if !own && s.Requested && s.RequestedAt < seq {
				s.Requested = false
			}
			s.UpdatedAt = now
			return nil
		})
		if err != nil {
			return fmt.Errorf("record readd of %x at %d: %w", k, seq, err)
		}
	}
	return nil
}

// RepairForked is the opt-in repair of a member whose epoch secrets
// diverged (Policy.RepairDiverged, COMP-205). The join code asks it,
// where JOIN-042 alone would refuse a Welcome because the held state g
// is active, whether the Welcome may replace that state; it runs in the
// transaction that reads g and held. It answers true only when the
// policy opts in, the conversation is a group or DM whose fork state is
// forked, this installation sent a readd request for it that no Welcome
// has answered yet (FORK-051's mark), and the adder (JOIN-025) is a leaf
// of held whose inbox, as held names it, is a permitted readder.
func (r *Recovery) RepairForked(ctx context.Context, tx ports.Tx, g ports.Group, held ports.GroupView, adder ports.Member) (bool, error) {
	if !r.o.Policy.RepairDiverged || r.o.CommitLogDisabled || g.ForkState != ports.ForkForked || !held.Active ||
		(g.ConversationType != ports.ConversationGroup && g.ConversationType != ports.ConversationDM) {
		return false, nil
	}
	if bytes.Equal(adder.SignatureKey, r.ownKey()) {
		return false, nil
	}
	st, err := getReadd(ctx, tx, g.ID, r.ownKey())
	if err != nil || !st.Requested {
		return false, err
	}
	leaf, ok := leafOf(held, adder.SignatureKey)
	if !ok {
		return false, nil
	}
	permitted, err := readders(g.ConversationType, held)
	if err != nil {
		return false, nil // no readder can be named in a state whose metadata does not decode
	}
	return permitted[leaf.InboxID], nil
}
