package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

// externalKind is which external commit this installation makes.
type externalKind int

const (
	externalResync externalKind = iota + 1
	externalRecover
)

// Resync rejoins the conversation by an external commit that removes this
// installation's own old leaf (COMP-398): the repair of a member
// installation that can no longer process its group — its state was lost
// or its epoch secrets diverged. It starts from the newest GroupInfo on
// the group's GroupInfo topic; when there is none, or it is older than the
// group's newest commit, it fails with an error wrapping
// [ErrNoGroupInfo], and a member that holds the epoch can publish it
// ([Conversation.PublishGroupInfo]). The joined state starts a new
// membership of the commit log anchored at the external commit, as a
// Welcome's does. It returns the external commit's sequence id.
func (cv *Conversation) Resync(ctx context.Context) (uint64, error) {
	defer cv.c.lock(cv.id)()
	var g ports.Group
	err := cv.c.tx(ctx, func(ctx context.Context, tx ports.Tx) (err error) {
		g, err = tx.Groups().Get(ctx, cv.id)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("resync: %w", err)
	}
	if g.ConversationType != ports.ConversationGroup && g.ConversationType != ports.ConversationDM {
		return 0, fmt.Errorf("resync: %w: conversation type %d", ErrNotPermitted, g.ConversationType)
	}
	return cv.c.joinExternal(ctx, cv.id, externalResync)
}

// RecoverGroup brings a fresh installation of an inbox whose installations
// in the group were all lost back into it (COMP-399): an external commit
// from the newest GroupInfo on the group's GroupInfo topic adds this
// installation and removes one of the inbox's lost leaves, then an
// ordinary commit removes the inbox's other lost leaves. The group id
// comes from the app: regroup keeps no list of an inbox's groups on the
// delivery service, so an app that wants recovery keeps the ids (its own
// backup, its server's records of the user). It fails with an error
// wrapping [ports.ErrAlreadyExists] when this installation already holds
// the group active, and with [ErrNoGroupInfo] as [Conversation.Resync]
// does.
func (c *Client) RecoverGroup(ctx context.Context, groupID []byte) (*Conversation, error) {
	unlock := c.lock(groupID)
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		g, err := tx.Groups().Get(ctx, groupID)
		switch {
		case errors.Is(err, ports.ErrNotFound):
			return nil
		case err != nil:
			return err
		case g.Active:
			return fmt.Errorf("group %x is held active: %w", groupID, ports.ErrAlreadyExists)
		}
		return nil
	})
	if err == nil {
		_, err = c.joinExternal(ctx, groupID, externalRecover)
	}
	unlock()
	if err != nil {
		return nil, fmt.Errorf("recover group: %w", err)
	}
	cv := &Conversation{c: c, id: bytes.Clone(groupID)}
	// The inbox's other lost installations: an external commit removes at
	// most one leaf (RFC 9420 §12.2), so the rest go in a member's commit,
	// which the role policy lets any member make for its own inbox.
	ms, err := cv.Members(ctx)
	if err != nil {
		return cv, fmt.Errorf("recover group: %w", err)
	}
	var lost [][]byte
	for _, m := range ms {
		if m.InboxID == c.InboxID() && !bytes.Equal(m.InstallationKey, c.InstallationKey()) {
			lost = append(lost, m.InstallationKey)
		}
	}
	if len(lost) > 0 {
		if err := cv.removeInstallations(ctx, lost); err != nil {
			return cv, fmt.Errorf("recover group: remove lost installations: %w", err)
		}
	}
	return cv, nil
}

// removeInstallations commits the removal of the leaves with these
// installation keys.
func (cv *Conversation) removeInstallations(ctx context.Context, keys [][]byte) error {
	_, err := cv.c.commit(ctx, cv.id, func(ctx context.Context, tx ports.Tx, view ports.GroupView) (ports.CommitOptions, []join.Recipient, error) {
		var opts ports.CommitOptions
		for _, m := range view.Members {
			if slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, m.SignatureKey) }) {
				opts.Remove = append(opts.Remove, m.LeafIndex)
			}
		}
		if len(opts.Remove) == 0 {
			return opts, nil, fmt.Errorf("nothing to remove: %w", ports.ErrAlreadyExists)
		}
		return opts, nil, nil
	})
	if errors.Is(err, ports.ErrAlreadyExists) {
		return nil
	}
	return err
}

// joinExternal makes an external commit of kind into the group and
// installs the joined state once the delivery service stored it ahead of
// any other commit of the GroupInfo's epoch, rebuilding from a newer
// GroupInfo up to Options.CommitRetries times. The caller holds the
// group's lock.
func (c *Client) joinExternal(ctx context.Context, groupID []byte, kind externalKind) (uint64, error) {
	x, ok := c.deps.MLS.(ports.MLSExternal)
	if !ok {
		return 0, fmt.Errorf("external commit: the engine does not join by external commit: %w", ports.ErrUnsupported)
	}
	gi, h, giSeq, err := c.newestGroupInfo(ctx, groupID)
	if err != nil {
		return 0, err
	}
	own := map[uint64]bool{} // the GroupInfos of this installation's lost attempts
	for attempt := 0; attempt < c.opts.CommitRetries; attempt++ {
		if attempt > 0 {
			if gi, h, giSeq, err = c.followGroupInfo(ctx, groupID, gi, h, giSeq, own); err != nil {
				return 0, err
			}
		}
		leaf, err := c.leafBundle(ctx)
		if err != nil {
			return 0, fmt.Errorf("external commit: %w", err)
		}
		var out ports.CommitOutput
		err = c.tx(ctx, func(ctx context.Context, tx ports.Tx) (err error) {
			out, err = x.JoinExternal(ctx, tx, gi, ports.ExternalJoinOptions{KeyPackage: leaf,
				Resync: kind == externalResync, Recover: kind == externalRecover})
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("external commit: %w", err)
		}
		seqs, err := publishRetry(ctx, c.deps.Transport, commitBatch(groupID, out.Commit, c.groupInfoToSend(groupID, out.GroupInfo)))
		if err != nil {
			return 0, errors.Join(fmt.Errorf("external commit: publish: %w", err), c.clearPending(ctx, groupID))
		}
		seq := seqs[0]
		for _, s := range seqs[1:] {
			own[s] = true
		}
		first, err := c.firstOfEpoch(ctx, groupID, giSeq, seq, h.epoch)
		if err != nil {
			return 0, err
		}
		if !first {
			// Another commit of the epoch came first: members refuse this
			// one, so it is never merged here.
			if err := c.clearPending(ctx, groupID); err != nil {
				return 0, err
			}
			continue
		}
		if err := c.awaitExternal(ctx, groupID, seq); err != nil {
			// ADR-0030: a resync or recovery join pends like any commit.
			return 0, errors.Join(err, c.clearPending(ctx, groupID))
		}
		if err := c.installExternal(ctx, groupID, seq); err != nil {
			return 0, err
		}
		return seq, nil
	}
	return 0, fmt.Errorf("external commit: %w after %d attempts", ErrCommitLost, c.opts.CommitRetries)
}

// followGroupInfo returns the GroupInfo of the group's newest epoch along
// the branch members applied, starting from one of it (gi of epoch h.epoch
// at seq): it reads the GroupInfo topic after seq and takes, for each next
// epoch, the first GroupInfo of that epoch, skipping those of this
// installation's own lost attempts. The topic holds them in the order of
// their commits (one batch each, one sequence counter), and the first
// commit of an epoch is the one members apply, so the first GroupInfo of
// an epoch is its winner's; a later one is a lost commit's. When the topic
// holds none of the next epoch it fails with [ErrNoGroupInfo]: the commit
// that won went without one (COMP-397).
func (c *Client) followGroupInfo(ctx context.Context, groupID, gi []byte, h groupInfoHeader, seq uint64, own map[uint64]bool) ([]byte, groupInfoHeader, uint64, error) {
	start, after := h.epoch, seq
	for {
		envs, err := c.deps.Transport.Query(ctx, groupInfoTopic(groupID), after, pageSize)
		if err != nil {
			return nil, h, 0, fmt.Errorf("group info of %x: %w", groupID, err)
		}
		if len(envs) == 0 {
			break
		}
		for _, e := range envs {
			s := e.GetSequenceId()
			if s <= after {
				continue
			}
			after = s
			next := e.GetEnvelope().GetGroupMessage()
			nh, ok := peekGroupInfo(next)
			if own[s] || !ok || !bytes.Equal(nh.groupID, groupID) || nh.epoch != h.epoch+1 {
				continue
			}
			gi, h, seq = next, nh, s
		}
	}
	if h.epoch == start {
		return nil, h, 0, fmt.Errorf("group %x: no GroupInfo of epoch %d after the one this installation used: %w", groupID, start+1, ErrNoGroupInfo)
	}
	return gi, h, seq, nil
}

// clearPending drops the engine's pending (external) commit of the group.
func (c *Client) clearPending(ctx context.Context, groupID []byte) error {
	return c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		return c.deps.MLS.ClearPending(ctx, tx, groupID)
	})
}

// firstOfEpoch reports whether the group's topic holds no commit of epoch
// at least epoch between the GroupInfo's envelope (whose commit, published
// in the same batch, precedes it) and the external commit at seq: then
// members process the external commit first in that epoch. An envelope
// whose framing names such a commit counts, authenticated or not: a
// forged one costs a retry, never a merge of a lost commit.
func (c *Client) firstOfEpoch(ctx context.Context, groupID []byte, after, seq, epoch uint64) (bool, error) {
	for after < seq {
		envs, err := c.deps.Transport.Query(ctx, groupTopic(groupID), after, pageSize)
		if err != nil {
			return false, fmt.Errorf("external commit: read group %x: %w", groupID, err)
		}
		if len(envs) == 0 {
			return false, fmt.Errorf("external commit: %d not yet readable on group %x: %w", seq, groupID, ports.ErrUnavailable)
		}
		for _, e := range envs {
			s := e.GetSequenceId()
			if s <= after {
				continue
			}
			after = s
			if s >= seq {
				return true, nil
			}
			if h, ok := peekHeader(e.GetEnvelope().GetGroupMessage()); ok && h.commit() && h.epoch >= epoch {
				return false, nil
			}
		}
	}
	return true, nil
}

// installExternal merges the external commit at seq and records the
// joined state: the group record with its cursor at the commit, and a new
// membership of the commit log anchored there (FORK-041), as a Welcome
// installed at that anchor would; the commit itself gets no local entry,
// as the commit that adds a Welcome's joiner gets none, since this
// installation never held the epoch before it.
func (c *Client) installExternal(ctx context.Context, groupID []byte, seq uint64) error {
	return c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		view, err := c.deps.MLS.MergePending(ctx, tx, groupID)
		if err != nil {
			return fmt.Errorf("external commit: merge: %w", err)
		}
		d, err := metadata.FromExtensions(view.Extensions)
		if err != nil {
			return fmt.Errorf("external commit: %w", err)
		}
		ct, err := d.ConversationType()
		if err != nil {
			return fmt.Errorf("external commit: %w", err)
		}
		root, err := d.GroupRootKey()
		if err != nil {
			return fmt.Errorf("external commit: %w", err)
		}
		keys, err := commitlog.DeriveKeys(root)
		if err != nil || !bytes.Equal(keys.GroupID, groupID) {
			return fmt.Errorf("external commit: %w: the group root does not name group %x", ports.ErrInvalid, groupID)
		}
		dmID := ""
		if ct == ports.ConversationDM {
			one, two, err := d.DMMembers()
			if err != nil {
				return fmt.Errorf("external commit: %w", err)
			}
			dmID = metadata.DMID(one, two)
		}
		floor := ""
		if v, ok, err := d.MinProtocolVersion(); ok && err == nil {
			floor = v.String()
		}
		now := c.deps.Clock.Now()
		rec := func(g *ports.Group) {
			g.ConversationType, g.DMID, g.Active = ct, dmID, true
			g.Cursor, g.JoinAnchor, g.GroupRoot, g.MinProtocolVersion = seq, seq, root, floor
			g.RestoredPlaceholder, g.MaybeForked, g.MaybeForkedReason = false, false, ""
			g.UpdatedAt = now
		}
		_, err = tx.Groups().Get(ctx, groupID)
		switch {
		case errors.Is(err, ports.ErrNotFound):
			g := ports.Group{ID: groupID, Consent: ports.ConsentAllowed, CreatedAt: now}
			rec(&g)
			err = tx.Groups().Insert(ctx, g)
		case err == nil:
			err = tx.Groups().Update(ctx, groupID, func(g *ports.Group) error { rec(g); return nil })
		}
		if err != nil {
			return err
		}
		if err := deleteIntent(ctx, tx, groupID); err != nil {
			return err
		}
		if err := c.log.BeginMembership(ctx, tx, groupID, view, seq); err != nil {
			return err
		}
		// The repair answers a readd request this installation kept.
		return tx.Readds().Upsert(ctx, groupID, c.InstallationKey(), func(s *ports.ReaddStatus) error {
			s.Requested, s.UpdatedAt = false, now
			return nil
		})
	})
}
