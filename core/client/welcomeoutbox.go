package client

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/regroup-mls/regroup/core/recovery"
	"github.com/regroup-mls/regroup/ports"
)

// nsWelcomeOutbox holds the Welcomes of merged commits that must reach
// their recipients (COMP-243), keyed by group id and commit sequence id.
const nsWelcomeOutbox = "client.welcome-outbox"

// heldWelcomes are a merged commit's Welcomes the delivery service has not
// stored yet.
type heldWelcomes struct {
	Intent   intent    `json:"intent"`
	Attempts int       `json:"attempts"`
	NextAt   time.Time `json:"next_at"`
	LastErr  string    `json:"last_error,omitempty"`
}

// welcomeRetry bounds the delay between two publishes of held Welcomes:
// it doubles from its first value at each failure up to its last.
var welcomeRetry = [2]time.Duration{time.Second, 10 * time.Minute}

func welcomeOutboxKey(groupID []byte, seq uint64) string {
	return hex.EncodeToString(groupID) + "/" + strconv.FormatUint(seq, 10)
}

// holdWelcomes moves a merged intent's Welcomes, which cause kept from
// being stored, into the Welcome outbox and ends the intent, in one
// transaction: the group's next commit is not held up, and the Welcomes
// are published again until stored. It returns an error wrapping
// [recovery.ErrWelcomeNotStored].
func (c *Client) holdWelcomes(ctx context.Context, groupID []byte, in *intent, cause error) error {
	h := heldWelcomes{Intent: *in, Attempts: 1, NextAt: c.deps.Clock.Now().Add(welcomeRetry[0]), LastErr: cause.Error()}
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	err = c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		if err := tx.Blobs().Put(ctx, nsWelcomeOutbox, welcomeOutboxKey(groupID, in.MergedAt), b); err != nil {
			return err
		}
		return deleteIntent(ctx, tx, groupID)
	})
	if err != nil {
		return fmt.Errorf("commit %d: keep its welcomes: %w", in.MergedAt, err)
	}
	c.logger.Warn("welcomes not stored; kept to publish again", "group", fmt.Sprintf("%x", groupID), "commit", in.MergedAt, "err", cause)
	if !in.Strict { // a one-shot group's are never streamed (FORK-052)
		c.events.emit(WelcomesPendingEvent{GroupID: groupID, CommitSequenceID: in.MergedAt, Attempts: 1, Reason: cause.Error()})
	}
	return fmt.Errorf("commit %d: %w: %v", in.MergedAt, recovery.ErrWelcomeNotStored, cause)
}

// resendWelcomes publishes again the held Welcomes whose time has come.
// Stored ones leave the outbox and are reported; a failure doubles the
// delay before the next attempt and is reported too.
func (c *Client) resendWelcomes(ctx context.Context) error {
	type due struct {
		key string
		h   heldWelcomes
	}
	var dues []due
	now := c.deps.Clock.Now()
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		dues = nil
		keys, err := tx.Blobs().Keys(ctx, nsWelcomeOutbox, "")
		if err != nil {
			return err
		}
		for _, k := range keys {
			b, err := tx.Blobs().Get(ctx, nsWelcomeOutbox, k)
			if err != nil {
				return err
			}
			var h heldWelcomes
			if err := json.Unmarshal(b, &h); err != nil {
				c.logger.Error("held welcomes do not decode; dropped", "key", k, "err", err)
				if err := tx.Blobs().Delete(ctx, nsWelcomeOutbox, k); err != nil {
					return err
				}
				continue
			}
			if !now.Before(h.NextAt) {
				dues = append(dues, due{k, h})
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("welcome outbox: %w", err)
	}
	var errs []error
	for _, d := range dues {
		gid, _, _ := splitWelcomeOutboxKey(d.key)
		sendErr := c.sendWelcomes(ctx, gid, &d.h.Intent)
		err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
			if sendErr == nil {
				return tx.Blobs().Delete(ctx, nsWelcomeOutbox, d.key)
			}
			h := d.h
			h.Attempts++
			h.LastErr = sendErr.Error()
			h.NextAt = now.Add(min(welcomeRetry[0]<<min(h.Attempts-1, 20), welcomeRetry[1]))
			b, err := json.Marshal(h)
			if err != nil {
				return err
			}
			return tx.Blobs().Put(ctx, nsWelcomeOutbox, d.key, b)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("welcome outbox: %w", err))
			continue
		}
		oneshot := d.h.Intent.Strict // never streamed (FORK-052)
		if sendErr != nil {
			if !oneshot {
				c.events.emit(WelcomesPendingEvent{GroupID: gid, CommitSequenceID: d.h.Intent.MergedAt, Attempts: d.h.Attempts + 1, Reason: sendErr.Error()})
			}
			if !errors.Is(sendErr, ports.ErrInvalidArgument) {
				errs = append(errs, sendErr)
			}
			continue
		}
		if !oneshot {
			c.events.emit(WelcomesStoredEvent{GroupID: gid, CommitSequenceID: d.h.Intent.MergedAt})
		}
	}
	return errors.Join(errs...)
}

func splitWelcomeOutboxKey(k string) ([]byte, uint64, bool) {
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == '/' {
			gid, err1 := hex.DecodeString(k[:i])
			seq, err2 := strconv.ParseUint(k[i+1:], 10, 64)
			return gid, seq, err1 == nil && err2 == nil
		}
	}
	return nil, 0, false
}
