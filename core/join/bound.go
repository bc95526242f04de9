package join

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

// Default of [ReceiverOptions.MaxHeldPerSender] (COMP-253).
const DefaultMaxHeldPerSender = 32

const senderPrefix = "sender/"

func senderKey(seq uint64) string { return fmt.Sprintf("%s%020d", senderPrefix, seq) }

// senderClass is the class a held Welcome counts against (COMP-253): the
// adder's inbox once section 8 verified it, the group for a Welcome that
// waits for the removal from a group this client holds (JOIN-092), and
// otherwise the one class of Welcomes nobody can be held responsible for:
// unreadable, unattributed to a key package, or refused before the
// membership was checked.
func senderClass(c *candidate, hd *Hold) string {
	switch {
	case c == nil:
		return ""
	case c.verified:
		return "inbox:" + c.adder.InboxID
	case hd.Kind == HoldRemoval:
		return "group:" + hex.EncodeToString(c.staged.Group.GroupID)
	}
	return ""
}

// deleteHeld removes a held Welcome and its sender class.
func deleteHeld(ctx context.Context, tx ports.Tx, seq uint64) error {
	if err := tx.HeldWelcomes().Delete(ctx, seq); err != nil {
		return err
	}
	err := tx.Blobs().Delete(ctx, nsJoin, senderKey(seq))
	if errors.Is(err, ports.ErrNotFound) {
		return nil
	}
	return err
}

// enforceBound rejects held Welcomes under PROC-020 until no sender class
// holds more than MaxHeldPerSender and no more than MaxHeld are held in
// all; each rejection takes the oldest Welcome of the largest class, so a
// flood from one sender, or of unattributable Welcomes, evicts its own
// (COMP-253). It runs after the Welcomes read were attempted, so it
// bounds only what could not be completed or rejected.
func (r *Receiver) enforceBound(ctx context.Context) ([]Outcome, error) {
	var out []Outcome
	err := r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		out = nil
		n, err := tx.HeldWelcomes().Count(ctx)
		if err != nil || n <= min(r.o.MaxHeld, r.o.MaxHeldPerSender) {
			return err
		}
		hs, err := tx.HeldWelcomes().List(ctx)
		if err != nil {
			return err
		}
		classes := map[string][]ports.HeldWelcome{}
		for _, h := range hs {
			b, err := tx.Blobs().Get(ctx, nsJoin, senderKey(h.SequenceID))
			if err != nil && !errors.Is(err, ports.ErrNotFound) {
				return err
			}
			classes[string(b)] = append(classes[string(b)], h)
		}
		total := len(hs)
		for {
			largest := ""
			for k, v := range classes {
				if len(v) > len(classes[largest]) || (len(v) == len(classes[largest]) && k < largest) {
					largest = k
				}
			}
			victims := classes[largest]
			if total <= r.o.MaxHeld && len(victims) <= r.o.MaxHeldPerSender {
				return nil
			}
			h := victims[0]
			classes[largest], total = victims[1:], total-1
			rej := &Rejection{Rule: "PROC-020", Err: fmt.Errorf("more than %d welcomes are held, or %d of one sender; the oldest of the largest class is rejected", r.o.MaxHeld, r.o.MaxHeldPerSender)}
			if _, err := tx.ProcessedEnvelopes().Mark(ctx, r.Topic(), h.SequenceID); err != nil {
				return err
			}
			if err := r.recordRejection(ctx, tx, h, rej, h.GroupID); err != nil {
				return err
			}
			out = append(out, Outcome{SequenceID: h.SequenceID, GroupID: h.GroupID, Rejected: true, Rule: rej.Rule, Reason: rej.Err.Error()})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("bound held welcomes: %w", err)
	}
	return out, nil
}
