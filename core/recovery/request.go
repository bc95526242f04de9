package recovery

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// Request sends a readd request for every conversation whose fork state
// is forked, whose state is active and which the policy selects, unless
// one was sent since its state was last replaced from a Welcome (FORK-050,
// FORK-051). It lists every active group; [Recovery.RequestGroups] reads
// only the groups its caller names. It returns the local failures, joined;
// a conversation whose send failed is tried again at a later pass only
// when the send certainly reached nobody.
func (r *Recovery) Request(ctx context.Context) error {
	if r.o.CommitLogDisabled {
		return nil // every fork state reads unknown (FORK-004)
	}
	active := true
	var gs []ports.Group
	err := r.tx(ctx, func(tx ports.Tx) (err error) {
		gs, err = tx.Groups().List(ctx, ports.GroupFilter{Active: &active})
		return err
	})
	if err != nil {
		return fmt.Errorf("readd requests: %w", err)
	}
	var ids [][]byte
	for _, g := range gs {
		if g.ForkState == ports.ForkForked {
			ids = append(ids, g.ID)
		}
	}
	return r.RequestGroups(ctx, ids)
}

// RequestGroups is [Recovery.Request] over the named groups only: a
// caller that knows which conversations are forked (the client's last
// sync view, a fork event) names them, and the pass then reads those
// groups and no other (COMP-292). A named group that is not forked, not
// active, not selected or of another conversation type is skipped.
func (r *Recovery) RequestGroups(ctx context.Context, ids [][]byte) error {
	if r.o.CommitLogDisabled {
		return nil // every fork state reads unknown (FORK-004)
	}
	r.pass.Lock()
	defer r.pass.Unlock()
	if err := r.resumeSends(ctx); err != nil {
		return fmt.Errorf("readd requests: %w", err)
	}
	var errs []error
	for _, id := range ids {
		if !r.o.Policy.Selects(id) {
			continue
		}
		if err := r.request(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("readd request for %x: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// PassGroups is [Recovery.Pass] with the requests limited to the named
// groups (COMP-292).
func (r *Recovery) PassGroups(ctx context.Context, forked [][]byte) error {
	return errors.Join(r.RequestGroups(ctx, forked), r.Respond(ctx))
}

// request records the attempt, then sends it. The record comes first so
// that a crash after the send never sends a second request (FORK-051).
func (r *Recovery) request(ctx context.Context, groupID []byte) error {
	now := r.o.Clock.Now()
	var req *contentspb.ReaddRequest
	var to []string
	err := r.tx(ctx, func(tx ports.Tx) error {
		req, to = nil, nil
		g, err := tx.Groups().Get(ctx, groupID)
		if errors.Is(err, ports.ErrNotFound) {
			return nil // named by a view older than its removal
		}
		if err != nil {
			return err
		}
		if !g.Active || g.ForkState != ports.ForkForked ||
			(g.ConversationType != ports.ConversationGroup && g.ConversationType != ports.ConversationDM) {
			return nil
		}
		st, err := getReadd(ctx, tx, groupID, r.ownKey())
		if err != nil {
			return err
		}
		if st.Requested || now.Before(st.NotBefore) {
			return nil // FORK-051, or a retry that is not due yet
		}
		view, err := r.o.MLS.Group(ctx, tx, groupID)
		if err != nil {
			return err
		}
		inboxes, err := readders(g.ConversationType, view)
		if err != nil {
			return err
		}
		delete(inboxes, r.o.Installation.InboxID) // its other installations are added with its inbox
		latest, err := latestAccepted(ctx, tx, groupID)
		if err != nil {
			return err
		}
		req = &contentspb.ReaddRequest{GroupId: groupID, LatestCommitSequenceId: latest}
		to = slices.Sorted(maps.Keys(inboxes))
		if err := tx.Blobs().Put(ctx, nsSending, hex.EncodeToString(groupID), []byte{1}); err != nil {
			return err
		}
		return tx.Readds().Upsert(ctx, groupID, r.ownKey(), func(s *ports.ReaddStatus) error {
			s.Requested, s.RequestedAt, s.NotBefore, s.UpdatedAt = true, latest, time.Time{}, now
			return nil
		})
	})
	if err != nil || req == nil {
		return err
	}
	msg := &contentspb.OneshotMessage{MessageType: &contentspb.OneshotMessage_ReaddRequest{ReaddRequest: req}}
	_, err = r.o.Host.SendOneshot(ctx, msg, to...)
	if !errors.Is(err, ErrNotSent) {
		if derr := r.sent(ctx, groupID); derr != nil {
			return errors.Join(err, derr)
		}
	}
	switch {
	case err == nil:
		r.emit(Event{Kind: RequestSent, GroupID: groupID, InstallationKey: r.ownKey(), CommitSequenceID: req.GetLatestCommitSequenceId()})
		return nil
	case errors.Is(err, ErrWelcomeNotStored):
		// Sent: the host publishes its Welcomes again until they are
		// stored (COMP-270), and this request stays the only one
		// (FORK-051).
		r.o.Logger.Warn("readd request's welcomes not stored yet", "group", fmt.Sprintf("%x", groupID), "err", err)
		r.emit(Event{Kind: RequestSent, GroupID: groupID, InstallationKey: r.ownKey(), CommitSequenceID: req.GetLatestCommitSequenceId(),
			Reason: err.Error()})
		return nil
	case errors.Is(err, ErrNotSent):
		// Nobody can hold it: clear the mark and try again later.
		if cerr := r.NotSent(ctx, groupID); cerr != nil {
			return errors.Join(err, cerr)
		}
		return err
	}
	// The outcome is unknown and the host could not keep the Welcomes to
	// publish them again (a local failure): a readder may hold one, so
	// it is not sent again (FORK-051).
	return err
}

// NotSent clears this installation's readd request mark of the group,
// with a retry time RetryDelay from now, for a request whose one-shot
// group reached nobody: a host that settles, after a restart, the
// one-shot group's commit of a request sent before the process stopped
// reports it so when the commit was lost or its Welcomes were refused
// before any was stored (COMP-275). The next pass due sends the request
// again; it is still the only one any readder holds (FORK-051).
func (r *Recovery) NotSent(ctx context.Context, groupID []byte) error {
	retry := r.o.Clock.Now().Add(r.o.RetryDelay)
	return r.tx(ctx, func(tx ports.Tx) error {
		if err := tx.Blobs().Delete(ctx, nsSending, hex.EncodeToString(groupID)); err != nil && !errors.Is(err, ports.ErrNotFound) {
			return err
		}
		return tx.Readds().Upsert(ctx, groupID, r.ownKey(), func(s *ports.ReaddStatus) error {
			s.Requested, s.NotBefore, s.UpdatedAt = false, retry, r.o.Clock.Now()
			return nil
		})
	})
}

// nsSending holds a record per readd request being sent, written with
// the mark and deleted once the send returned: one found at the start of
// a pass was left by a process that stopped while sending (COMP-276).
const nsSending = "recovery.sending"

// sent deletes the in-flight record of the group's request.
func (r *Recovery) sent(ctx context.Context, groupID []byte) error {
	return r.tx(ctx, func(tx ports.Tx) error {
		err := tx.Blobs().Delete(ctx, nsSending, hex.EncodeToString(groupID))
		if errors.Is(err, ports.ErrNotFound) {
			return nil
		}
		return err
	})
}

// OneshotResumer is an optional ability of a [Host]: it tells what
// became of the one-shot groups carrying a readd request for a group.
type OneshotResumer interface {
	// OneshotState reports, for the readd request of groupID, whether a
	// one-shot group created at or after since and carrying it still
	// holds an unsettled commit (pending), and whether one merged its add
	// commit (committed). The host settles one-shot commits on its own (a
	// sync) before the recovery's pass runs.
	OneshotState(ctx context.Context, groupID []byte, since time.Time) (pending, committed bool, err error)
}

// resumeSends settles the in-flight records a stopped process left
// (COMP-276): a request whose one-shot group merged its add commit was
// sent (its Welcomes are stored or kept in the host's outbox); one whose
// one-shot commit is still unsettled waits for the host; one with no
// one-shot commit at all reached nobody, and its mark is cleared so the
// request is sent again (FORK-051).
func (r *Recovery) resumeSends(ctx context.Context) error {
	h, ok := r.o.Host.(OneshotResumer)
	if !ok {
		return nil
	}
	var keys []string
	if err := r.tx(ctx, func(tx ports.Tx) (err error) {
		keys, err = tx.Blobs().Keys(ctx, nsSending, "")
		return err
	}); err != nil {
		return err
	}
	var errs []error
	for _, k := range keys {
		gid, err := hex.DecodeString(k)
		if err != nil {
			continue
		}
		var st ports.ReaddStatus
		if err := r.tx(ctx, func(tx ports.Tx) (err error) {
			st, err = getReadd(ctx, tx, gid, r.ownKey())
			return err
		}); err != nil {
			errs = append(errs, err)
			continue
		}
		if !st.Requested {
			errs = append(errs, r.sent(ctx, gid))
			continue
		}
		pending, committed, err := h.OneshotState(ctx, gid, st.UpdatedAt)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("resume request for %x: %w", gid, err))
		case pending:
		case committed:
			errs = append(errs, r.sent(ctx, gid))
		default:
			r.o.Logger.Warn("readd request left unsent by a stopped process: sending it again", "group", k)
			errs = append(errs, r.NotSent(ctx, gid))
		}
	}
	return errors.Join(errs...)
}

// latestAccepted returns the highest commit_sequence_id among the
// conversation's accepted remote entries, 0 when there is none. Accepted
// entries strictly increase in commit_sequence_id in topic order (the
// first row of FORK-083's chain table holds for every accepted entry), so
// the last one holds it.
func latestAccepted(ctx context.Context, tx ports.Tx, groupID []byte) (uint64, error) {
	last, err := tx.RemoteCommitLog().Last(ctx, groupID)
	if errors.Is(err, ports.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return last.CommitSequenceID, nil
}
