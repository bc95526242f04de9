package client

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// An intent is this installation's own commit on its way through the
// topic: built and pending in the engine, published, then either read back
// and merged (GMOD-018) or beaten by another commit for the same epoch.
// It is stored with the engine's pending commit, so a restart resumes it:
// a pending intent is republished with the same bytes, a merged one sends
// its Welcomes (COMP-187).
type intent struct {
	State   string `json:"state"`
	Commit  []byte `json:"commit"`
	Welcome []byte `json:"welcome,omitempty"`
	// GroupInfo is the signed GroupInfo of the epoch the commit leads
	// to, published with the commit on the group's GroupInfo topic
	// (COMP-395); empty in an intent stored before GroupInfo was kept.
	GroupInfo  []byte           `json:"group_info,omitempty"`
	Recipients []join.Recipient `json:"recipients,omitempty"`
	// MergedAt is the commit's sequence id once merged.
	MergedAt uint64 `json:"merged_at,omitempty"`
	// Held is the commit's sequence id once read back marked pending
	// (two-phase acceptance): it is held, not merged, until its
	// decision (COMP-435).
	Held uint64 `json:"held,omitempty"`
	// Reason is why a rejected commit was invalid.
	Reason string `json:"reason,omitempty"`
	// Strict makes a refusal of the Welcomes a failure of the commit, for
	// a commit whose Welcomes are its purpose (a one-shot group's).
	Strict bool `json:"strict,omitempty"`
	// Deliver keeps Welcomes the delivery service did not store in the
	// Welcome outbox, which publishes them again until they are stored:
	// a readd commit's Welcome is the requester's only way back
	// (FORK-062, COMP-243).
	Deliver bool `json:"deliver,omitempty"`
}

// welcomes says what a commit does when the delivery service does not
// store its Welcomes.
type welcomes int

const (
	// welcomesLogged logs a refusal and ends the commit.
	welcomesLogged welcomes = iota
	// welcomesStrict makes a refusal a failure of the commit.
	welcomesStrict
	// welcomesDelivered keeps them in the Welcome outbox (COMP-243).
	welcomesDelivered
)

const (
	intentPending = "pending"
	intentMerged  = "merged"
	intentLost    = "lost"
	// intentRejected is an own commit that read back invalid: no member
	// applies it.
	intentRejected = "rejected"
	// intentDropped is an own pending commit a witness refused.
	intentDropped = "dropped"
	nsIntent      = "client.intent"
)

func loadIntent(ctx context.Context, tx ports.Tx, groupID []byte) (*intent, error) {
	b, err := tx.Blobs().Get(ctx, nsIntent, hex.EncodeToString(groupID))
	if errors.Is(err, ports.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var in intent
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("stored commit intent of %x: %w", groupID, err)
	}
	return &in, nil
}

func saveIntent(ctx context.Context, tx ports.Tx, groupID []byte, in *intent) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return tx.Blobs().Put(ctx, nsIntent, hex.EncodeToString(groupID), b)
}

func deleteIntent(ctx context.Context, tx ports.Tx, groupID []byte) error {
	return tx.Blobs().Delete(ctx, nsIntent, hex.EncodeToString(groupID))
}

// builder builds one attempt of an own commit on the group's current
// state, inside the transaction that stores it. It must not do I/O other
// than through tx.
type builder func(ctx context.Context, tx ports.Tx, view ports.GroupView) (ports.CommitOptions, []join.Recipient, error)

// commit runs an own commit to its end: it settles any earlier intent of
// the group, processes the topic so the commit builds on the newest
// state, builds and publishes it, reads it back and merges it, then sends
// the Welcomes of the installations it added with message_cursor set to
// its sequence id. A commit beaten by a concurrent one is rebuilt, up to
// Options.CommitRetries times. It returns the commit's sequence id.
func (c *Client) commit(ctx context.Context, groupID []byte, build builder) (uint64, error) {
	return c.commitAs(ctx, groupID, build, welcomesLogged)
}

// commitAs is commit; w says what a refusal of the Welcomes does.
func (c *Client) commitAs(ctx context.Context, groupID []byte, build builder, w welcomes) (uint64, error) {
	unlock := c.lock(groupID)
	defer c.driving.start(groupID)()
	defer func() { unlock() }()
	if err := c.await(ctx, groupID, &unlock, func() error {
		_, _, err := c.driveIntent(ctx, groupID)
		return err
	}); err != nil {
		return 0, err
	}
	for attempt := 0; attempt < c.opts.CommitRetries; attempt++ {
		if err := c.processGroup(ctx, groupID); err != nil {
			return 0, err
		}
		in := &intent{State: intentPending, Strict: w == welcomesStrict, Deliver: w == welcomesDelivered}
		err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
			g, err := tx.Groups().Get(ctx, groupID)
			if err != nil {
				return err
			}
			if !g.Active {
				return ErrInactiveConversation
			}
			view, err := c.deps.MLS.Group(ctx, tx, groupID)
			if err != nil {
				return err
			}
			opts, recipients, err := build(ctx, tx, view)
			if err != nil {
				return err
			}
			if opts.IncludeByReference == nil {
				opts.IncludeByReference = includeByReference
			}
			out, err := c.deps.MLS.Commit(ctx, tx, groupID, opts)
			if err != nil {
				return err
			}
			in.Commit, in.Welcome, in.GroupInfo, in.Recipients = out.Commit, out.Welcome, c.groupInfoToSend(groupID, out.GroupInfo), recipients
			return saveIntent(ctx, tx, groupID, in)
		})
		if err != nil {
			return 0, fmt.Errorf("commit: %w", err)
		}
		var (
			seq  uint64
			done bool
		)
		err = c.await(ctx, groupID, &unlock, func() (err error) {
			seq, done, err = c.driveIntent(ctx, groupID)
			return err
		})
		if err != nil || done {
			return seq, err
		}
	}
	return 0, fmt.Errorf("commit: %w after %d attempts", ErrCommitLost, c.opts.CommitRetries)
}

// includeByReference is what this client's commits include of the
// proposals other members sent on their own (COMP-245): only the draft
// SelfRemove, a member's request to leave, which any member may commit.
// Every other standalone proposal stays out, so that nothing a member
// proposes can make an honest commit invalid or impossible to build.
func includeByReference(p ports.Proposal) bool {
	return p.Type == ports.ProposalSelfRemove && p.SenderType == ports.SenderMember
}

// settleIntent finishes an intent left by an earlier attempt or process
// before a new commit is built. The caller holds the group's lock.
func (c *Client) settleIntent(ctx context.Context, groupID []byte) error {
	var in *intent
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) (err error) {
		in, err = loadIntent(ctx, tx, groupID)
		return err
	})
	if err != nil || in == nil {
		return err
	}
	_, _, err = c.driveIntent(ctx, groupID)
	if errors.Is(err, ErrCommitAwaiting) {
		return nil // decided by a later pass
	}
	return err
}

// await runs step until it ends other than awaiting a pending commit's
// decision (COMP-437): between tries it releases the group's lock, so
// that the group's messages flow meanwhile, and waits a growing delay.
// When ctx ends first it returns an error wrapping [ErrCommitAwaiting]
// and ctx's error, holding the lock again.
func (c *Client) await(ctx context.Context, groupID []byte, unlock *func(), step func() error) error {
	delay := 20 * time.Millisecond
	for {
		err := step()
		if err != nil && ctx.Err() != nil && !errors.Is(err, ErrCommitAwaiting) && c.holdsIntent(ctx, groupID) {
			// ctx ended while the commit was being published or read
			// back: it stays held and a later sync settles it, as when
			// ctx ends between tries.
			return fmt.Errorf("commit: %w: %w", ErrCommitAwaiting, err)
		}
		if !errors.Is(err, ErrCommitAwaiting) {
			return err
		}
		(*unlock)()
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			*unlock = c.lock(groupID)
			return fmt.Errorf("%w: %w", err, ctx.Err())
		case <-t.C:
		}
		*unlock = c.lock(groupID)
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// driveIntent moves the group's stored intent forward: it publishes a
// pending commit (the same bytes as any earlier attempt), reads the topic
// back, and sends the Welcomes of a merged one. done reports that the
// intent ended merged (seq is its sequence id); done false with a nil
// error means it was lost and the caller may rebuild.
func (c *Client) driveIntent(ctx context.Context, groupID []byte) (seq uint64, done bool, err error) {
	in, err := c.intent(ctx, groupID)
	if err != nil || in == nil {
		return 0, false, err
	}
	if in.State == intentPending && in.Held == 0 {
		if other, err := c.otherPending(ctx, groupID); err != nil || other {
			// Another commit of the group pends: this one would be
			// refused; it waits for that one's decision.
			return 0, false, errors.Join(err, fmt.Errorf("commit: %w", ErrCommitAwaiting))
		}
		_, err := publishRetry(ctx, c.deps.Transport, commitBatch(groupID, in.Commit, in.GroupInfo))
		if errors.Is(err, ports.ErrCatchUp) {
			// The service is in catch-up after a restore (catchup.go): it
			// takes the merged commits it lacks first, then this commit
			// once more; refused again, the service does not take it now.
			// A chain refused as another one lost to a super admin's:
			// the client resyncs onto the service's (COMP-522).
			_, lost, uerr := c.uploadMerged(ctx, groupID)
			c.logErr("catch-up", uerr)
			if _, err = publishRetry(ctx, c.deps.Transport, commitBatch(groupID, in.Commit, in.GroupInfo)); errors.Is(err, ports.ErrCatchUp) {
				err = c.dropIntent(ctx, groupID, true, err)
				if lost || errors.Is(err, ports.ErrOtherChain) {
					c.resyncLost(ctx, groupID)
				}
				return 0, true, err
			}
		}
		if err != nil {
			if errors.Is(err, ports.ErrCommitPending) {
				// Refused while another commit (or this one, stored by an
				// earlier attempt) pends: read the topic and wait for
				// the decision.
				if err := c.processGroup(ctx, groupID); err != nil {
					return 0, false, awaitUnavailable(err)
				}
				return 0, false, fmt.Errorf("commit: %w", ErrCommitAwaiting)
			}
			if errors.Is(err, ports.ErrInvalidArgument) { // refused: it was never stored
				return 0, false, c.dropIntent(ctx, groupID, true, err)
			}
			if errors.Is(err, ports.ErrEpochConflict) {
				// Another commit won the epoch on a service that follows
				// the group's public state: this one was never stored.
				// Lost, as if read back behind the winner: the caller
				// catches up and rebuilds the change.
				return 0, false, c.dropIntent(ctx, groupID, true, nil)
			}
			return 0, false, fmt.Errorf("commit: publish: %w", err)
		}
		if err := c.processGroup(ctx, groupID); err != nil {
			if held, _ := c.intent(ctx, groupID); held != nil && held.Held != 0 {
				return 0, false, awaitUnavailable(err) // read back pending already
			}
			return 0, false, err
		}
		if in, err = c.intent(ctx, groupID); err != nil || in == nil {
			return 0, false, err
		}
	} else if in.State == intentPending {
		// Held pending: read on for its decision; a delivery service
		// out of reach is waited for like the decision.
		if err := c.processGroup(ctx, groupID); err != nil {
			return 0, false, awaitUnavailable(err)
		}
		if in, err = c.intent(ctx, groupID); err != nil || in == nil {
			return 0, false, err
		}
	}
	switch in.State {
	case intentMerged:
		if err := c.sendWelcomes(ctx, groupID, in); err != nil {
			if in.Deliver || (in.Strict && unknownWelcomes(err)) {
				return in.MergedAt, true, c.holdWelcomes(ctx, groupID, in, err)
			}
			return in.MergedAt, false, err
		}
		return in.MergedAt, true, c.dropIntent(ctx, groupID, false, nil)
	case intentLost:
		return 0, false, c.dropIntent(ctx, groupID, false, nil)
	case intentRejected:
		return 0, true, c.dropIntent(ctx, groupID, false, fmt.Errorf("%w: %s", ErrNotPermitted, in.Reason))
	case intentDropped:
		return 0, true, c.dropIntent(ctx, groupID, false, fmt.Errorf("%w (reasons: %s)", ErrCommitDropped, in.Reason))
	}
	if in.State == intentPending && in.Held != 0 {
		return 0, false, fmt.Errorf("commit %d: %w", in.Held, ErrCommitAwaiting)
	}
	// Published but not yet visible on the topic: the workers settle it.
	return 0, false, fmt.Errorf("commit: published but not yet read back: %w", ports.ErrUnavailable)
}

// awaitUnavailable makes a delivery service out of reach, while an own
// commit is published and read back, a wait like that for a decision: the
// intent keeps the commit, and the next try publishes the same bytes or
// reads them back.
func awaitUnavailable(err error) error {
	if errors.Is(err, ports.ErrUnavailable) {
		return fmt.Errorf("commit: %w (%v)", ErrCommitAwaiting, err)
	}
	return err
}

// holdsIntent reports that the group's stored intent still holds a
// pending commit, read past the end of the caller's context.
func (c *Client) holdsIntent(ctx context.Context, groupID []byte) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	in, err := c.intent(ctx, groupID)
	return err == nil && in != nil && in.State == intentPending
}

func (c *Client) intent(ctx context.Context, groupID []byte) (in *intent, err error) {
	err = c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		in, err = loadIntent(ctx, tx, groupID)
		return err
	})
	return in, err
}

// dropIntent deletes the intent, and the engine's pending commit with it
// when clearPending is set; it returns cause.
func (c *Client) dropIntent(ctx context.Context, groupID []byte, clearPending bool, cause error) error {
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		if clearPending {
			if err := c.deps.MLS.ClearPending(ctx, tx, groupID); err != nil {
				return err
			}
		}
		return deleteIntent(ctx, tx, groupID)
	})
	if cause != nil {
		return fmt.Errorf("commit: %w", cause)
	}
	return err
}

// sendWelcomes publishes the Welcomes of a merged commit, anchored at its
// sequence id (JOIN-036), at most 256 envelopes per request. A failure of
// the publish is a [*welcomeError]; a refusal is logged and ends the
// sending, unless the intent is strict.
func (c *Client) sendWelcomes(ctx context.Context, groupID []byte, in *intent) error {
	if len(in.Recipients) == 0 || len(in.Welcome) == 0 {
		return nil
	}
	envs, err := c.sender.Envelopes(ctx, in.Welcome, in.MergedAt, in.Recipients)
	if err != nil {
		return fmt.Errorf("welcomes of %x: %w", groupID, err)
	}
	sent := false
	for len(envs) > 0 {
		n := min(len(envs), 256)
		if _, err := publishRetry(ctx, c.deps.Transport, envs[:n]); err != nil {
			if errors.Is(err, ports.ErrInvalidArgument) && !in.Strict && !in.Deliver {
				c.logger.Error("welcomes refused by the delivery service", "group", fmt.Sprintf("%x", groupID), "err", err)
				return nil
			}
			return &welcomeError{sent: sent, err: fmt.Errorf("welcomes of %x: %w", groupID, err)}
		}
		sent, envs = true, envs[n:]
	}
	return nil
}

// welcomeError is a failed publish of a merged commit's Welcomes; sent
// reports that an earlier batch of them was stored.
type welcomeError struct {
	sent bool
	err  error
}

func (e *welcomeError) Error() string { return e.err.Error() }
func (e *welcomeError) Unwrap() error { return e.err }

// publishRetry publishes envs, retrying an unavailable or rate-limited
// delivery service a few times with a growing delay. A publish whose
// outcome stays unknown returns the last error.
func publishRetry(ctx context.Context, tr ports.Transport, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	delay := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		seqs, err := tr.Publish(ctx, envs)
		if err == nil {
			if len(seqs) != len(envs) {
				return nil, fmt.Errorf("publish: %d sequence ids for %d envelopes: %w", len(seqs), len(envs), ports.ErrUnavailable)
			}
			return seqs, nil
		}
		if attempt >= 3 || !(errors.Is(err, ports.ErrUnavailable) || errors.Is(err, ports.ErrRateLimited)) {
			return nil, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		delay *= 2
	}
}
