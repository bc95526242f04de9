package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
)

// Catch-up after a restore of the delivery service (ADR-0030 Decision 9,
// COMP-494 to COMP-497). A service restored from a backup holds a group's
// public state as it was at the backup, and its topic without the
// commits published after it. The client keeps the last commits it
// merged per group (the merged-commit log, Blobs "client.merged"), and
// uploads them, oldest first and after the identity updates it holds for
// the group's inboxes (devicelists.go), when the service refuses a commit of this
// client with [ports.ErrCatchUp] (or on request, [Client.UploadMerged]).
// It does not upload on the mere sight of a restored topic: a service
// without commit acceptance would store the uploads again, and members
// that did not merge them would take them for refused commits.
//
// An upload is an ordinary publish of the commit bytes to the group's
// topic; a commit the service does not take (of an epoch it passed
// already, or refused by its catch-up rules) is skipped. A commit read
// back from the topic that is in the log was merged already: it is
// skipped without the engine, not taken for a refused commit.
const nsMerged = "client.merged"

// Bounds of the merged-commit log per group: the newest maxMergedCommits
// commits, at most maxMergedBytes of them (the newest is always kept).
const (
	maxMergedCommits = 32
	maxMergedBytes   = 1 << 20
)

// mergedCommit is one entry of the merged-commit log.
type mergedCommit struct {
	epoch  uint64 // the epoch the commit was for
	commit []byte
}

// decodeMerged reads a merged-commit log: per entry the epoch (8 bytes),
// the commit's length (4 bytes) and the commit. A malformed tail ends
// the log.
func decodeMerged(b []byte) []mergedCommit {
	var out []mergedCommit
	for len(b) >= 12 {
		epoch, n := binary.BigEndian.Uint64(b), binary.BigEndian.Uint32(b[8:])
		if uint64(len(b)-12) < uint64(n) {
			break
		}
		out = append(out, mergedCommit{epoch: epoch, commit: b[12 : 12+n]})
		b = b[12+n:]
	}
	return out
}

func encodeMerged(cs []mergedCommit) []byte {
	var out []byte
	for _, c := range cs {
		out = binary.BigEndian.AppendUint64(out, c.epoch)
		out = binary.BigEndian.AppendUint32(out, uint32(len(c.commit)))
		out = append(out, c.commit...)
	}
	return out
}

// mergedLog returns the group's merged-commit log, oldest first.
func mergedLog(ctx context.Context, tx ports.Tx, groupID []byte) ([]mergedCommit, error) {
	v, err := tx.Blobs().Get(ctx, nsMerged, hex.EncodeToString(groupID))
	if errors.Is(err, ports.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeMerged(v), nil
}

// recordMerged appends a merged commit for epoch to the group's log.
func recordMerged(ctx context.Context, tx ports.Tx, groupID []byte, epoch uint64, commit []byte) error {
	log, err := mergedLog(ctx, tx, groupID)
	if err != nil {
		return err
	}
	log = trimMerged(append(log, mergedCommit{epoch: epoch, commit: commit}))
	return tx.Blobs().Put(ctx, nsMerged, hex.EncodeToString(groupID), encodeMerged(log))
}

// trimMerged keeps the newest maxMergedCommits entries of log that fit
// in maxMergedBytes of commits, the newest one always.
func trimMerged(log []mergedCommit) []mergedCommit {
	size := 0
	for i := len(log) - 1; i >= 0; i-- {
		size += len(log[i].commit)
		if len(log)-i > maxMergedCommits || (size > maxMergedBytes && i < len(log)-1) {
			return log[i+1:]
		}
	}
	return log
}

// mergedBefore reports whether commit is in the group's merged-commit
// log: this client merged it already.
func mergedBefore(ctx context.Context, tx ports.Tx, groupID, commit []byte) (bool, error) {
	log, err := mergedLog(ctx, tx, groupID)
	if err != nil {
		return false, err
	}
	h := sha256.Sum256(commit)
	for _, c := range log {
		if hc := sha256.Sum256(c.commit); bytes.Equal(hc[:], h[:]) {
			return true, nil
		}
	}
	return false, nil
}

// uploadMerged publishes the identity updates this installation holds
// for the group's inboxes (devicelists.go), then the group's
// merged-commit log, oldest first, to a delivery service that may be in
// catch-up. It returns how many commits the service took or already
// held, and lost when it refused one as of another chain
// ([ports.ErrOtherChain]: this branch lost); a refusal of one commit
// (another epoch, a catch-up rule) moves on to the next, an unavailable
// service ends the upload.
func (c *Client) uploadMerged(ctx context.Context, groupID []byte) (taken int, lost bool, err error) {
	var log []mergedCommit
	if err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) (err error) {
		log, err = mergedLog(ctx, tx, groupID)
		return err
	}); err != nil {
		return 0, false, err
	}
	// Device lists first (amendment rule 1): the service checks every
	// commit below against the newest lists it then holds.
	if err := c.uploadDeviceLists(ctx, groupID); err != nil {
		return 0, false, fmt.Errorf("catch-up upload: %w", err)
	}
	for _, m := range log {
		_, err := c.deps.Transport.Publish(ctx, commitBatch(groupID, m.commit, nil))
		switch {
		case err == nil:
			taken++
		case errors.Is(err, ports.ErrInvalidArgument), errors.Is(err, ports.ErrEpochConflict),
			errors.Is(err, ports.ErrCatchUp), errors.Is(err, ports.ErrCommitPending):
			lost = lost || errors.Is(err, ports.ErrOtherChain)
			c.logger.Debug("merged commit not taken in catch-up", "group", fmt.Sprintf("%x", groupID), "epoch", m.epoch, "err", err)
		default:
			return taken, lost, fmt.Errorf("catch-up upload of group %x: %w", groupID, err)
		}
	}
	return taken, lost, nil
}

// resyncLost resyncs the group onto the chain the delivery service holds
// after the service refused this client's chain as another one
// (COMP-522), as [Conversation.Resync] does; the caller holds the
// group's lock. A failure is logged: the app can still resync.
func (c *Client) resyncLost(ctx context.Context, groupID []byte) {
	if _, err := c.joinExternal(ctx, groupID, externalResync); err != nil {
		c.logger.Warn("resync after a lost catch-up branch failed", "group", fmt.Sprintf("%x", groupID), "err", err)
	}
}

// UploadMerged uploads the identity updates this installation holds for
// the conversation's inboxes and then its merged commits to the delivery
// service, oldest first, as the client does by itself on meeting a
// restored service, and returns how many commits the service took or
// already held. When the service refused one as of another chain, a
// super admin's, the client resyncs the group onto that chain (COMP-522).
func (c *Client) UploadMerged(ctx context.Context, groupID []byte) (int, error) {
	defer c.lock(groupID)()
	n, lost, err := c.uploadMerged(ctx, groupID)
	if lost && err == nil {
		c.resyncLost(ctx, groupID)
	}
	return n, err
}

// CatchUpStoppedEvent reports that the delivery service, in catch-up
// after a restore, stopped the group on conflicting chains uploaded for
// Epoch (COMP-494): it takes no commit of the group but a super admin's
// pointer to a successor (COMP-520), so its super admins repair it with
// [Conversation.MoveToNewGroup]. SuperAdmin reports that this
// installation's user is one of them in the epoch it holds.
type CatchUpStoppedEvent struct {
	GroupID    []byte
	Epoch      uint64
	SuperAdmin bool
}

func (CatchUpStoppedEvent) event() {}

// stoppedEvent is the event of a STOPPED notice of group g. The role is
// read from the state this installation holds; when it cannot be read the
// event goes out without it, so the notice never costs the pass.
func (c *Client) stoppedEvent(ctx context.Context, tx ports.Tx, g ports.Group, epoch uint64) Event {
	ev := CatchUpStoppedEvent{GroupID: bytes.Clone(g.ID), Epoch: epoch}
	view, err := c.deps.MLS.Group(ctx, tx, g.ID)
	if err == nil {
		var r policy.Roles
		if r, err = policy.RolesOf(view); err == nil {
			ev.SuperAdmin = r.SuperAdmin(c.InboxID())
		}
	}
	if err != nil {
		c.logger.Warn("stopped group: role not read", "group", fmt.Sprintf("%x", g.ID), "err", err)
	}
	return ev
}
