package client

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// pageSize bounds the envelopes of one query of a group topic.
const pageSize = 100

// groupTopic returns a group's message topic: 0x00 || group id.
func groupTopic(groupID []byte) []byte {
	return append([]byte{byte(ports.TopicGroupMessages)}, groupID...)
}

// Sync processes every envelope of the conversation's message topic that
// the client has not processed yet, in order.
func (cv *Conversation) Sync(ctx context.Context) error {
	defer cv.c.lock(cv.id)()
	return cv.c.processGroup(ctx, cv.id)
}

// outcome is what processing one envelope did, reported after its
// transaction commits.
type outcome struct {
	events   []Event
	inactive bool
	merged   bool
	// recorded are the commit log's records, reported after commit.
	recorded []commitlog.Recorded
}

// processGroup processes the group's topic from the stored cursor to its
// end, strictly in sequence order (PROC-005, PROC-008). Envelopes are
// processed in batches of up to batchSize per transaction, a commit always
// ending its batch, so a batch's effects and the cursor move together. A
// failure a retry can change (storage, transport) stops the pass without
// moving the cursor past what committed; the next pass retries from
// there. An inactive group is not processed: its cursor stays at the
// commit that removed this installation (COMP-186), where a re-add
// Welcome's anchor lands. A one-shot group is processed only by the
// commit that sends it (COMP-200): nothing else calls this for one. The
// caller holds the group's lock.
func (c *Client) processGroup(ctx context.Context, groupID []byte) error {
	for {
		g, err := c.group(ctx, groupID)
		if err != nil {
			return err
		}
		if !g.Active {
			return nil
		}
		envs, err := c.deps.Transport.Query(ctx, groupTopic(groupID), g.Cursor, pageSize)
		if err != nil {
			return fmt.Errorf("read group %x: %w", groupID, err)
		}
		// A page is an input: served out of order, it is still processed
		// in sequence order, or an envelope served after a higher one
		// would fall below the cursor and be lost.
		slices.SortStableFunc(envs, bySequenceID)
		cursor, progressed := g.Cursor, false
		var batch []*envelope
		flush := func() (stop bool, err error) {
			if len(batch) == 0 {
				return false, nil
			}
			out, err := c.processBatch(ctx, groupID, batch)
			if err != nil {
				return true, fmt.Errorf("group %x envelopes %d to %d: %w", groupID, batch[0].seq, batch[len(batch)-1].seq, err)
			}
			batch, progressed = batch[:0], true
			for _, r := range out.recorded {
				c.log.Notify(r)
			}
			c.events.emit(out.events...)
			if out.merged {
				c.logDue(groupID)
			}
			return out.inactive, nil
		}
		for _, env := range envs {
			seq := env.GetSequenceId()
			// Sequence ids are not authenticated: one at or below the
			// cursor was processed, and one the store cannot hold is
			// skipped without moving the cursor (COMP-185).
			if seq <= cursor || seq > math.MaxInt64 {
				continue
			}
			cursor = seq
			e := &envelope{seq: seq, at: time.Unix(0, env.GetServerTimestampNs()).UTC(), payload: env.GetEnvelope().GetGroupMessage()}
			batch = append(batch, e)
			if h, ok := peekHeader(e.payload); (ok && h.commit()) || len(batch) == batchSize {
				if stop, err := flush(); err != nil || stop {
					return err
				}
			}
		}
		if stop, err := flush(); err != nil || stop {
			return err
		}
		if !progressed {
			return nil
		}
	}
}

// bySequenceID orders envelopes by ascending sequence id.
func bySequenceID(a, b *backendpb.OriginatorEnvelope) int {
	return cmp.Compare(a.GetSequenceId(), b.GetSequenceId())
}

// batchSize bounds the envelopes processed in one transaction.
const batchSize = 32

func (c *Client) group(ctx context.Context, groupID []byte) (g ports.Group, err error) {
	err = c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		g, err = tx.Groups().Get(ctx, groupID)
		return err
	})
	return g, err
}

// processBatch processes envelopes in one transaction: for each, the
// engine processes it, the commit log records a commit's outcome
// (FORK-001, FORK-002), the message or group update is stored; then the
// cursor moves to the last one, all or nothing. A commit that removes this
// installation ends the batch.
func (c *Client) processBatch(ctx context.Context, groupID []byte, batch []*envelope) (outcome, error) {
	var out outcome
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		out = outcome{}
		g, err := tx.Groups().Get(ctx, groupID)
		if err != nil {
			return err
		}
		last := g.Cursor
		for _, e := range batch {
			if e.seq <= last || out.inactive || !g.Active {
				continue
			}
			if err := c.handle(ctx, tx, g, e, &out); err != nil {
				return err
			}
			last = e.seq
		}
		if last == g.Cursor {
			return nil
		}
		return tx.Groups().Update(ctx, groupID, func(gr *ports.Group) error {
			gr.Cursor = last
			gr.UpdatedAt = c.deps.Clock.Now()
			if out.inactive {
				gr.Active = false
			}
			return nil
		})
	})
	return out, err
}

// envelope is one group-topic envelope being processed.
type envelope struct {
	seq     uint64
	at      time.Time
	payload []byte
}

func (e *envelope) hash() []byte {
	h := sha256.Sum256(e.payload)
	return h[:]
}

func (c *Client) handle(ctx context.Context, tx ports.Tx, g ports.Group, e *envelope, out *outcome) error {
	h, ok := peekHeader(e.payload)
	if !ok {
		c.logger.Warn("group envelope is not an MLS message", "group", fmt.Sprintf("%x", g.ID), "seq", e.seq)
		return nil
	}
	if !h.commit() {
		own, err := messagesOf(tx).ByPayloadHash(ctx, g.ID, e.hash())
		switch {
		case err == nil:
			confirmed, err := confirmSent(ctx, tx, own, e.seq, e.at)
			if confirmed {
				own.SequenceID, own.SentAt = e.seq, e.at
				out.events = append(out.events, MessageEvent{Message: own})
			}
			return err
		case !errors.Is(err, ports.ErrNotFound):
			return err
		}
	}
	before, err := c.deps.MLS.Group(ctx, tx, g.ID)
	if err != nil {
		return err
	}
	p, err := c.deps.MLS.Process(ctx, tx, g.ID, e.payload)
	if err != nil {
		if !messageFailure(err) {
			return err
		}
		return c.failed(ctx, tx, g, e, h, before, err, out)
	}
	switch p.Kind {
	case ports.ProcessedApplication:
		return c.received(ctx, tx, g, e, before, p, out)
	case ports.ProcessedCommit:
		return c.applyCommit(ctx, tx, g, e, h, before, p, out)
	}
	return nil // a standalone proposal: this client commits proposals inline only
}

// messageFailure reports an error that is a property of the message, one
// of the three classes ports.MLS promises; anything else is local and is
// retried.
func messageFailure(err error) bool {
	return errors.Is(err, ports.ErrWrongEpoch) || errors.Is(err, ports.ErrUndecryptable) || errors.Is(err, ports.ErrInvalid)
}

// failed records a terminal failure: for a commit the commit log's entry
// (FORK-002) and the maybe_forked diagnostic (FORK-073); an application
// message that cannot be read is logged, except below the join anchor,
// where the client holds no secrets (JOIN-066).
func (c *Client) failed(ctx context.Context, tx ports.Tx, g ports.Group, e *envelope, h header, before ports.GroupView, perr error, out *outcome) error {
	if !h.commit() {
		if e.seq >= g.JoinAnchor {
			c.logger.Warn("message not readable", "group", fmt.Sprintf("%x", g.ID), "seq", e.seq, "err", perr)
		}
		return nil
	}
	rec, err := c.log.RecordFailure(ctx, tx, commitlog.Failure{GroupID: g.ID, CommitSequenceID: e.seq, View: before, Err: perr})
	if err != nil {
		return err
	}
	out.recorded = append(out.recorded, rec)
	result, _ := commitlog.ResultOf(perr)
	out.events = append(out.events, CommitRejectedEvent{GroupID: g.ID, CommitSequenceID: e.seq, Result: result, Reason: perr.Error()})
	return nil
}

// received stores an application message.
func (c *Client) received(ctx context.Context, tx ports.Tx, g ports.Group, e *envelope, before ports.GroupView, p ports.Processed, out *outcome) error {
	kind, ok := kindOf(p.AuthenticatedData)
	if !ok {
		c.logger.Warn("message of unknown kind", "group", fmt.Sprintf("%x", g.ID), "seq", e.seq)
		return nil
	}
	m, ins, err := messagesOf(tx).Insert(ctx, ports.Message{GroupID: g.ID, SequenceID: e.seq, Kind: kind,
		SenderInbox: p.Sender.InboxID, SenderInstallation: p.Sender.SignatureKey, Epoch: before.Epoch,
		Content: p.Application, SentAt: e.at})
	if err != nil {
		return err
	}
	if ins {
		out.events = append(out.events, MessageEvent{Message: m})
	}
	return nil
}

// applyCommit checks a staged commit against the group's permissions
// (GMOD-021) and either records it as invalid or merges it and records
// the merge (FORK-001) and its group update.
func (c *Client) applyCommit(ctx context.Context, tx ports.Tx, g ports.Group, e *envelope, h header, before ports.GroupView, p ports.Processed, out *outcome) error {
	if p.Staged == nil {
		return fmt.Errorf("engine staged no state for a commit: %w", ports.ErrInvalid)
	}
	in, err := loadIntent(ctx, tx, g.ID)
	if err != nil {
		return err
	}
	ch, err := diffViews(before, *p.Staged, p.Proposals)
	if err == nil {
		err = checkCommit(before, *p.Staged, p.Sender, p.SenderType, ch)
	}
	if err != nil {
		// Every member rejects it, this installation's own commit included,
		// or the committer alone would move on (GMOD-021).
		if p.Own {
			if in != nil && in.State == intentPending {
				in.State, in.Reason = intentRejected, err.Error()
				if err := saveIntent(ctx, tx, g.ID, in); err != nil {
					return err
				}
			}
			if err := c.deps.MLS.ClearPending(ctx, tx, g.ID); err != nil {
				return err
			}
		}
		return c.failed(ctx, tx, g, e, h, before, fmt.Errorf("%w: %v", ports.ErrInvalid, err), out)
	}
	switch {
	case p.Own && in != nil && in.State == intentPending:
		// This installation's own commit, read back (GMOD-018).
		in.State, in.MergedAt = intentMerged, e.seq
		if err := saveIntent(ctx, tx, g.ID, in); err != nil {
			return err
		}
	case !p.Own:
		// Another commit won the race for this epoch: a pending commit of
		// this installation can never be merged now.
		if in != nil && in.State == intentPending {
			in.State = intentLost
			if err := saveIntent(ctx, tx, g.ID, in); err != nil {
				return err
			}
		}
		if err := c.deps.MLS.ClearPending(ctx, tx, g.ID); err != nil {
			return err
		}
	}
	after, err := c.deps.MLS.MergeStaged(ctx, tx, g.ID)
	if err != nil {
		return err
	}
	return c.merged(ctx, tx, g, e, before, after, p.Sender, ch, out)
}

// merged records a merged commit: the commit-log entry, the group-update
// record that is the commit's retained role evidence, the group's new
// minimum protocol version, and the events.
func (c *Client) merged(ctx context.Context, tx ports.Tx, g ports.Group, e *envelope, before, after ports.GroupView, sender ports.Member, ch change, out *outcome) error {
	var readded [][]byte
	for _, m := range ch.readded {
		readded = append(readded, m.SignatureKey)
	}
	rec, err := c.log.RecordMerge(ctx, tx, commitlog.Merge{GroupID: g.ID, CommitSequenceID: e.seq, Before: before, After: after,
		Readded: readded, ChangeClass: ch.class(), AddedSuperAdmins: ch.addedSuperAdmins, RoleEvidence: true})
	if err != nil {
		return err
	}
	if len(readded) > 0 { // FORK-064, whoever published the readd
		if err := c.rec.Readded(ctx, tx, g.ID, readded, e.seq); err != nil {
			return err
		}
	}
	out.recorded = append(out.recorded, rec)
	upd := groupUpdate{Added: ch.addedInboxes, Removed: ch.removedInboxes, Readded: readded,
		AddedSuperAdmins: ch.addedSuperAdmins, Components: ch.components}
	if _, _, err := messagesOf(tx).Insert(ctx, ports.Message{GroupID: g.ID, SequenceID: e.seq, Kind: ports.MessageGroupUpdated,
		SenderInbox: sender.InboxID, SenderInstallation: sender.SignatureKey, Epoch: before.Epoch,
		Content: upd.encode(), SentAt: e.at}); err != nil {
		return err
	}
	if d, err := metadata.FromExtensions(after.Extensions); err == nil {
		if v, ok, err := d.MinProtocolVersion(); ok && err == nil {
			if err := tx.Groups().Update(ctx, g.ID, func(gr *ports.Group) error {
				gr.MinProtocolVersion = v.String()
				return nil
			}); err != nil {
				return err
			}
		}
	}
	out.merged, out.inactive = true, !after.Active
	if len(ch.added)+len(ch.removed)+len(ch.readded) > 0 || !after.Active {
		out.events = append(out.events, MembershipEvent{GroupID: g.ID, CommitSequenceID: e.seq,
			Added: ch.addedInboxes, Removed: ch.removedInboxes, Readded: readded, RemovedSelf: !after.Active})
	}
	if names := componentNames(ch.components); len(names) > 0 {
		out.events = append(out.events, MetadataEvent{GroupID: g.ID, CommitSequenceID: e.seq, Changed: names})
	}
	return nil
}

func componentNames(ids []uint16) []string {
	var out []string
	for _, id := range ids {
		switch id {
		case metadata.ComponentName:
			out = append(out, "name")
		case metadata.ComponentSuperAdminList:
			out = append(out, "super admins")
		case metadata.ComponentAdminList:
			out = append(out, "admins")
		case metadata.ComponentMinProtocol:
			out = append(out, "minimum protocol version")
		}
	}
	return out
}
