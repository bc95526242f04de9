package join

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// install installs a candidate in one transaction (JOIN-046): the engine
// state, the group record with cursor = anchor, the commit log's new
// membership (FORK-041, FORK-088, FORK-089), the readd mark cleared
// (FORK-051) and the held Welcome deleted. Messages are other rows and
// stay (JOIN-044). The replacement rules run again on what the
// transaction reads, and the envelope is marked so that it applies at
// most once (JOIN-045).
func (r *Receiver) install(ctx context.Context, c *candidate) error {
	st := c.staged
	gid := st.Group.GroupID
	var joined *Joined
	err := r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		joined = nil
		first, err := tx.ProcessedEnvelopes().Mark(ctx, r.Topic(), c.held.SequenceID)
		if err != nil {
			return err
		}
		if !first {
			return deleteHeld(ctx, tx, c.held.SequenceID) // applied before
		}
		hg, err := r.heldGroup(ctx, tx, st)
		if err != nil {
			return err
		}
		replace, err := decideReplace(hg, st.Group.Epoch, st.Group.TreeHash, c.anchor)
		if err != nil {
			return err
		}
		view, err := r.welcomes.InstallWelcomeWith(ctx, tx, st.Handle, ports.InstallOptions{Replace: hg.g != nil})
		if err != nil {
			return err
		}
		// JOIN-054: what installs is what was validated.
		if view.Epoch != st.Group.Epoch || !bytes.Equal(view.TreeHash, st.Group.TreeHash) || !bytes.Equal(view.GroupID, gid) {
			return reject("JOIN-054", "the installed state (epoch %d) is not the validated one (epoch %d)", view.Epoch, st.Group.Epoch)
		}
		now := r.o.Clock.Now()
		rec := func(g *ports.Group) {
			g.ConversationType, g.DMID, g.Active = c.ct, c.dmID, true
			g.Cursor, g.JoinAnchor, g.GroupRoot, g.MinProtocolVersion = c.anchor, c.anchor, c.root, c.minVer
			g.RestoredPlaceholder, g.MaybeForked, g.MaybeForkedReason = false, false, ""
			g.UpdatedAt = now
		}
		if hg.g == nil {
			g := ports.Group{ID: gid, Consent: ports.ConsentUnknown, CreatedAt: now}
			rec(&g)
			err = tx.Groups().Insert(ctx, g)
		} else {
			err = tx.Groups().Update(ctx, gid, func(g *ports.Group) error { rec(g); return nil })
		}
		if err != nil {
			return err
		}
		if err := r.o.Log.BeginMembership(ctx, tx, gid, view, c.anchor); err != nil {
			return err
		}
		if err := tx.Readds().Upsert(ctx, gid, r.o.Installation.PublicKey(), func(s *ports.ReaddStatus) error {
			s.Requested, s.UpdatedAt = false, now
			return nil
		}); err != nil {
			return err
		}
		if err := deleteHeld(ctx, tx, c.held.SequenceID); err != nil {
			return err
		}
		joined = &Joined{GroupID: gid, ConversationType: c.ct, Adder: c.adder, Anchor: c.anchor, Epoch: view.Epoch,
			Replaced: replace && hg.view != nil, WelcomeSequenceID: c.held.SequenceID}
		return nil
	})
	if err != nil || joined == nil {
		return err
	}
	if r.o.OnJoined != nil {
		r.o.OnJoined(*joined)
	}
	if r.o.WelcomeAccepted != nil {
		// The join stands whatever this returns: a failure only delays
		// the rotation to the manager's schedule before not_after.
		_ = r.o.WelcomeAccepted(ctx, c.o.kp.Ref)
	}
	return nil
}

// oneshot hands a validated one-shot Welcome to OnOneshot and completes
// it; the group is never installed (FORK-052).
func (r *Receiver) oneshot(ctx context.Context, c *candidate) error {
	if r.o.OnOneshot == nil {
		return reject("FORK-052", "no handler for one-shot groups is configured")
	}
	msg, err := c.dict.OneshotMessage()
	if err != nil {
		return reject("JOIN-060", "%v", err)
	}
	if err := r.o.OnOneshot(ctx, Oneshot{GroupID: c.staged.Group.GroupID, Adder: c.adder, Message: msg, WelcomeSequenceID: c.held.SequenceID}); err != nil {
		if errors.Is(err, ErrRejected) {
			var rej *Rejection
			if errors.As(err, &rej) {
				return rej
			}
			return &Rejection{Rule: "FORK-052", Err: err}
		}
		return local(fmt.Errorf("one-shot handler: %w", err))
	}
	return r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		if _, err := tx.ProcessedEnvelopes().Mark(ctx, r.Topic(), c.held.SequenceID); err != nil {
			return err
		}
		if err := r.welcomes.DiscardWelcome(ctx, tx, c.staged.Handle); err != nil {
			return err
		}
		return deleteHeld(ctx, tx, c.held.SequenceID)
	})
}

// discardStaged deletes the Welcome's staged state, if the engine staged
// it, so its secrets do not outlive the decision.
func (r *Receiver) discardStaged(ctx context.Context, tx ports.Tx, gid []byte) error {
	if gid == nil {
		return nil
	}
	sts, err := r.welcomes.StagedWelcomes(ctx, tx, gid)
	if err != nil {
		return err
	}
	for _, st := range sts {
		if err := r.welcomes.DiscardWelcome(ctx, tx, st.Handle); err != nil {
			return err
		}
	}
	return nil
}

// keepHeld records a hold: the attempt count, the reason, and the
// deadline, which only ever moves earlier (JOIN-063). An unreadable or
// unresolved Welcome whose deadline has passed is rejected instead
// (JOIN-087, JOIN-084, JOIN-094, JOIN-035).
// class is the sender class the held Welcome counts against (COMP-253).
func (r *Receiver) keepHeld(ctx context.Context, h ports.HeldWelcome, gid []byte, class string, hd *Hold) error {
	now := r.o.Clock.Now()
	deadline := h.Deadline
	switch hd.Kind {
	case HoldUnreadable:
		if !deadline.IsZero() && !now.Before(deadline) {
			return r.rejectHeld(ctx, h, gid, &Rejection{Rule: hd.Rule, Err: fmt.Errorf("still unreadable at the deadline %v: %w", deadline, hd.Err)})
		}
		if d := now.Add(24 * time.Hour); deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
	case HoldPointee:
		if deadline.IsZero() {
			deadline = pointeeDeadline(h)
		}
		if !now.Before(deadline) {
			return r.rejectHeld(ctx, h, gid, &Rejection{Rule: "JOIN-094", Err: fmt.Errorf("pointee not retrieved by the deadline %v: %w", deadline, hd.Err)})
		}
	}
	reason := hd.Rule + ": " + hd.Err.Error()
	changed := false
	err := r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		if err := r.discardStaged(ctx, tx, gid); err != nil {
			return err
		}
		if err := tx.Blobs().Put(ctx, nsJoin, senderKey(h.SequenceID), []byte(class)); err != nil {
			return err
		}
		return tx.HeldWelcomes().Update(ctx, h.SequenceID, func(w *ports.HeldWelcome) error {
			changed = !bytes.HasPrefix([]byte(w.Reason), []byte(hd.Rule+":")) || w.Attempts == 0
			w.Attempts++
			w.Reason, w.Deadline = reason, deadline
			if gid != nil {
				w.GroupID = gid
			}
			return nil
		})
	})
	if errors.Is(err, ports.ErrNotFound) {
		return nil // completed or evicted meanwhile
	}
	if err != nil {
		return fmt.Errorf("hold welcome: %w", err)
	}
	if changed {
		r.report(Outcome{SequenceID: h.SequenceID, GroupID: gid, Held: true, Rule: hd.Rule, Reason: hd.Err.Error(), Deadline: deadline})
	}
	if hd.Kind == HoldRetry {
		return hd.Err
	}
	return nil
}

// rejectHeld records a terminal rejection, deletes the held Welcome and
// its staged state, and marks the envelope processed.
func (r *Receiver) rejectHeld(ctx context.Context, h ports.HeldWelcome, gid []byte, rej *Rejection) error {
	if gid == nil {
		gid = h.GroupID
	}
	err := r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		if err := r.discardStaged(ctx, tx, gid); err != nil {
			return err
		}
		if _, err := tx.ProcessedEnvelopes().Mark(ctx, r.Topic(), h.SequenceID); err != nil {
			return err
		}
		return r.recordRejection(ctx, tx, h, rej, gid)
	})
	if err != nil {
		return fmt.Errorf("reject welcome: %w", err)
	}
	r.report(Outcome{SequenceID: h.SequenceID, GroupID: gid, Rejected: true, Rule: rej.Rule, Reason: rej.Err.Error()})
	return nil
}
