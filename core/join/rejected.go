package join

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// RejectedWelcome is the record of a terminal rejection (JOIN-048).
type RejectedWelcome struct {
	// SequenceID is the Welcome's sequence id on the welcome topic.
	SequenceID uint64 `json:"seq"`
	// GroupID is the group the Welcome named, nil when it was never read.
	GroupID []byte `json:"group,omitempty"`
	// Rule is the requirement the Welcome failed; Reason says how.
	Rule       string    `json:"rule"`
	Reason     string    `json:"reason"`
	RejectedAt time.Time `json:"at"`
	// ServerTimestamp is the delivery service's timestamp on the Welcome.
	ServerTimestamp time.Time `json:"server_ts"`
}

// rejectedRecord is the stored form: version 1 (COMP-163).
type rejectedRecord struct {
	V int `json:"v"`
	RejectedWelcome
}

const rejectedPrefix = "rejected/"

func rejectedKey(seq uint64) string { return fmt.Sprintf("%s%020d", rejectedPrefix, seq) }

// recordRejection stores the record, deletes the held Welcome and drops
// the oldest records beyond MaxRejected, in the caller's transaction.
func (r *Receiver) recordRejection(ctx context.Context, tx ports.Tx, h ports.HeldWelcome, rej *Rejection, gid []byte) error {
	b, err := json.Marshal(rejectedRecord{V: 1, RejectedWelcome: RejectedWelcome{SequenceID: h.SequenceID, GroupID: gid,
		Rule: rej.Rule, Reason: rej.Err.Error(), RejectedAt: r.o.Clock.Now().UTC(), ServerTimestamp: h.ServerTimestamp}})
	if err != nil {
		return err
	}
	if err := tx.Blobs().Put(ctx, nsJoin, rejectedKey(h.SequenceID), b); err != nil {
		return err
	}
	if err := deleteHeld(ctx, tx, h.SequenceID); err != nil {
		return err
	}
	keys, err := tx.Blobs().Keys(ctx, nsJoin, rejectedPrefix)
	if err != nil {
		return err
	}
	for _, k := range keys[:max(0, len(keys)-r.o.MaxRejected)] {
		if err := tx.Blobs().Delete(ctx, nsJoin, k); err != nil {
			return err
		}
	}
	return nil
}

// Rejected returns the kept rejection records in sequence id order.
func (r *Receiver) Rejected(ctx context.Context) ([]RejectedWelcome, error) {
	var out []RejectedWelcome
	err := r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		out = nil
		keys, err := tx.Blobs().Keys(ctx, nsJoin, rejectedPrefix)
		if err != nil {
			return err
		}
		for _, k := range keys {
			b, err := tx.Blobs().Get(ctx, nsJoin, k)
			if err != nil {
				return err
			}
			var rec rejectedRecord
			if err := json.Unmarshal(b, &rec); err != nil || rec.V != 1 {
				return fmt.Errorf("rejection record %s: version %d: %w", k, rec.V, ports.ErrInvalid)
			}
			out = append(out, rec.RejectedWelcome)
		}
		return nil
	})
	return out, err
}
