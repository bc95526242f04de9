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
	"github.com/regroup-mls/regroup/core/internal/readpos"
	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/policy"
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
	// acceptance is what commit acceptance does after commit (reports).
	acceptance acceptanceOutcome
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
//
// The stored cursor moves only over envelopes the client authenticated,
// or up to an id below one it authenticated (COMP-240): an envelope the
// engine refuses, or that is no MLS message, is junk until an
// authenticated envelope follows it, and a commit's refusal is recorded
// (FORK-002) only then. Sequence ids are the delivery service's to
// choose, so one envelope at 2^63−1 cannot move the cursor past the
// honest envelopes that arrive after it with lower ids.
func (c *Client) processGroup(ctx context.Context, groupID []byte) error {
	if err := c.processTopic(ctx, groupID); err != nil {
		return err
	}
	return c.acceptancePass(ctx, groupID) // ADR-0030 Decisions 3, 6
}

// processTopic is processGroup's pass over the topic.
func (c *Client) processTopic(ctx context.Context, groupID []byte) error {
	g, err := c.group(ctx, groupID)
	if err != nil {
		return err
	}
	if !g.Active {
		return nil
	}
	oneshot := g.ConversationType == ports.ConversationOneshot
	key := string(groupID)
	pass := c.tails.Start(key, g.Cursor)
	defer pass.End()
	j := c.junk.take(key, g.Cursor)
	defer func() { c.junk.put(key, j) }()
	for {
		envs, err := c.deps.Transport.Query(ctx, groupTopic(groupID), pass.Pos(), pageSize)
		if err != nil {
			return fmt.Errorf("read group %x: %w", groupID, err)
		}
		// A page is an input: served out of order, it is still processed
		// in sequence order, or an envelope served after a higher one
		// would fall below the read position and be lost.
		slices.SortStableFunc(envs, bySequenceID)
		start := pass.Pos()
		var batch []*envelope
		flush := func() (stop bool, err error) {
			if len(batch) == 0 {
				return false, nil
			}
			out, err := c.processBatch(ctx, groupID, batch, pass, j)
			if need := (*needIdentity)(nil); errors.As(err, &need) {
				forget, ferr := c.resolveIdentity(ctx, need)
				defer forget()
				if err = ferr; err == nil {
					out, err = c.processBatch(ctx, groupID, batch, pass, j)
				}
			}
			if err != nil {
				return true, fmt.Errorf("group %x envelopes %d to %d: %w", groupID, batch[0].seq, batch[len(batch)-1].seq, err)
			}
			batch = batch[:0]
			for _, r := range out.recorded {
				c.log.Notify(r)
			}
			if !oneshot { // FORK-052: a one-shot group is never streamed
				c.events.emit(out.events...)
			}
			if out.merged || len(out.recorded) > 0 {
				c.logDue(groupID) // a new local entry to publish (COMP-282)
			}
			c.afterAcceptance(ctx, groupID, out)
			return out.inactive || len(out.acceptance.stuck) > 0, nil
		}
		for _, env := range envs {
			seq := env.GetSequenceId()
			// One at or below the read position was read, and one the
			// store cannot hold is skipped without moving it (COMP-185).
			if seq <= pass.Pos() || seq > math.MaxInt64 || (len(batch) > 0 && seq <= batch[len(batch)-1].seq) {
				continue
			}
			e := &envelope{seq: seq, at: time.Unix(0, env.GetServerTimestampNs()).UTC(), payload: env.GetEnvelope().GetGroupMessage(),
				pending: env.GetPending(), notice: env.GetEnvelope().GetAcceptanceNotice()}
			batch = append(batch, e)
			if h, ok := peekHeader(e.payload); (ok && h.commit()) || e.notice != nil || len(batch) == batchSize {
				if stop, err := flush(); err != nil || stop {
					return err
				}
			}
		}
		if stop, err := flush(); err != nil || stop {
			return err
		}
		if !pass.EndPage(pass.Pos() > start) {
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
// cursor moves to the last authenticated one (COMP-240), all or nothing.
// A commit that removes this installation ends the batch. What the batch
// read reaches pass and j only once the transaction committed.
func (c *Client) processBatch(ctx context.Context, groupID []byte, batch []*envelope, pass *readpos.Pass, j *junk) (outcome, error) {
	var (
		out   outcome
		nj    *junk
		reads []read
	)
	// A batch of only this process's own confirmed messages moves only
	// the cursor, which a later read moves again (COMP-551).
	txf, own := c.tx, c.ownSent.only(batch)
	if own {
		txf = c.txRelaxed
	}
	err := txf(ctx, func(ctx context.Context, tx ports.Tx) error {
		out, nj, reads = outcome{}, j.clone(), nil
		g, err := tx.Groups().Get(ctx, groupID)
		if err != nil {
			return err
		}
		last := g.Cursor
		for _, e := range batch {
			if e.seq <= last || out.inactive { // processGroup reads active groups only
				continue
			}
			if nj.has(e) {
				reads = append(reads, read{e.seq, false}) // refused before, in this same state
				continue
			}
			// cover records the refusals of the junk before an
			// authenticated envelope, which now stand in the group's
			// sequence (FORK-002), and drops any junk after it, which
			// must be read again in the new state.
			cover := func() error {
				for _, d := range nj.before(e.seq) {
					if err := c.failed(ctx, tx, g, d.e, d.h, d.before, d.err, &out); err != nil {
						return err
					}
				}
				nj.reset(e.seq)
				return nil
			}
			d, err := c.handle(ctx, tx, g, e, &out, cover)
			if err != nil {
				return err
			}
			if d != nil {
				nj.add(*d)
				reads = append(reads, read{e.seq, false})
				continue
			}
			reads = append(reads, read{e.seq, true})
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
	if err != nil {
		return out, err
	}
	c.ownSent.forget(batch)
	for _, r := range reads {
		pass.Read(r.seq, r.authenticated)
	}
	*j = *nj
	return out, nil
}

// read is one envelope a batch read, for the pass's positions.
type read struct {
	seq           uint64
	authenticated bool
}

// envelope is one group-topic envelope being processed.
type envelope struct {
	seq     uint64
	at      time.Time
	payload []byte
	// pending marks a commit the delivery service holds as its group's
	// pending commit (two-phase acceptance); notice is a service-authored
	// acceptance notice, which has no payload.
	pending bool
	notice  *backendpb.AcceptanceNotice
}

func (e *envelope) hash() []byte {
	h := sha256.Sum256(e.payload)
	return h[:]
}

// handle processes one envelope. It returns the envelope as junk when
// the client cannot authenticate it: no MLS message, or one the engine
// refuses (COMP-240); its effects wait until an authenticated envelope
// follows. cover is called once the envelope is authenticated, before any
// of its effects.
func (c *Client) handle(ctx context.Context, tx ports.Tx, g ports.Group, e *envelope, out *outcome, cover func() error) (*deferred, error) {
	if e.notice != nil {
		return nil, c.onNotice(ctx, tx, g, e, out, cover)
	}
	h, ok := peekHeader(e.payload)
	if ok && e.pending && h.commit() {
		return nil, c.onPending(ctx, tx, g, e, h, out, cover)
	}
	if !ok {
		c.logger.Warn("group envelope is not an MLS message", "group", fmt.Sprintf("%x", g.ID), "seq", e.seq)
		return &deferred{e: e}, nil
	}
	if !h.commit() {
		own, err := messagesOf(tx).ByPayloadHash(ctx, g.ID, e.hash())
		switch {
		case err == nil && own.SequenceID != 0 && own.SequenceID != e.seq:
			// The payload of an own message confirmed at another id: a copy
			// the delivery service placed here, which proves nothing.
			return &deferred{e: e}, nil
		case err == nil:
			// This installation's own message: the payload it published.
			if err := cover(); err != nil {
				return nil, err
			}
			confirmed, err := confirmSent(ctx, tx, own, e.seq, e.at)
			if confirmed {
				own.SequenceID, own.SentAt = e.seq, e.at
				out.events = append(out.events, MessageEvent{Message: own})
			}
			return nil, err
		case !errors.Is(err, ports.ErrNotFound):
			return nil, err
		}
	}
	if h.commit() {
		// A commit merged already, uploaded again in a catch-up (catchup.go)
		// or stored again by a publish retried: a copy, which proves nothing
		// and moves no cursor (FORK-080, COMP-271), nor is it recorded as
		// a refused commit.
		if done, err := mergedBefore(ctx, tx, g.ID, e.payload); err != nil {
			return nil, err
		} else if done {
			return &deferred{e: e}, nil
		}
	}
	before, err := c.deps.MLS.Group(ctx, tx, g.ID)
	if err != nil {
		return nil, err
	}
	p, err := c.deps.MLS.Process(ctx, tx, g.ID, e.payload)
	if err != nil {
		// A local failure is retried: the transaction rolls back and the
		// envelope is read again (the cursor does not move past it).
		if !messageFailure(err) {
			return nil, err
		}
		if !ports.Authenticated(err) {
			return &deferred{e: e, h: h, mls: true, before: before, err: err}, nil
		}
		// A member's message the engine refused: terminal at once.
		if err := cover(); err != nil {
			return nil, err
		}
		return nil, c.failed(ctx, tx, g, e, h, before, err, out)
	}
	if err := cover(); err != nil {
		return nil, err
	}
	switch p.Kind {
	case ports.ProcessedApplication:
		return nil, c.received(ctx, tx, g, e, before, p, out)
	case ports.ProcessedCommit:
		return nil, c.applyCommit(ctx, tx, g, e, h, before, p, out)
	}
	return nil, nil // a standalone proposal: this client commits proposals inline only
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
	// Read again after the service reissued ids: evaluated before
	// (COMP-466).
	if mark, err := replayMark(ctx, tx, g.ID); err != nil || e.seq <= mark {
		return err
	}
	if !h.commit() {
		// JOIN-066: only a message after the join anchor is reported as
		// missed; the member holds no secrets for those before.
		if join.Reportable(g.JoinAnchor, e.seq) {
			c.logger.Warn("message not readable", "group", fmt.Sprintf("%x", g.ID), "seq", e.seq, "err", perr)
			out.events = append(out.events, MessageMissedEvent{GroupID: g.ID, SequenceID: e.seq, Reason: perr.Error()})
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

// received stores an application message. One its sender's role does
// not let it send — a viewer's, judged by the sender's leaf in the
// group's state — is discarded (COMP-388).
func (c *Client) received(ctx context.Context, tx ports.Tx, g ports.Group, e *envelope, before ports.GroupView, p ports.Processed, out *outcome) error {
	kind, ok := kindOf(p.AuthenticatedData)
	if !ok {
		c.logger.Warn("message of unknown kind", "group", fmt.Sprintf("%x", g.ID), "seq", e.seq)
		return nil
	}
	if r, err := policy.RolesOf(before); err == nil {
		if err := policy.MaySend(r, p.Sender.InboxID, kind); err != nil {
			c.logger.Warn("message discarded", "group", fmt.Sprintf("%x", g.ID), "seq", e.seq, "reason", err)
			return nil
		}
	}
	if kind == ports.MessageLeaveRequest { // leave.go
		if keep, err := c.receivedLeave(ctx, tx, g, e.seq, before, p, out); err != nil || !keep {
			return err
		}
	}
	m, ins, err := messagesOf(tx).Insert(ctx, ports.Message{GroupID: g.ID, SequenceID: e.seq, Kind: kind,
		SenderInbox: p.Sender.InboxID, SenderInstallation: p.Sender.SignatureKey, Epoch: before.Epoch,
		Content: p.Application, SentAt: e.at})
	if err != nil {
		return err
	}
	if ins && kind != ports.MessageLeaveRequest { // a leave request's event is its own
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
	ch, resynced, err := c.checkCommit(ctx, tx, e, before, p)
	if need := (*needIdentity)(nil); errors.As(err, &need) {
		return need // fetched outside the transaction, then processed again
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
	return c.merged(ctx, tx, g, e, before, after, p.Sender, ch, resynced, out)
}

// checkCommit checks a staged commit against the group's permissions
// (GMOD-021). For a resync it also returns the joiner's installation
// key: a resync starts a new publisher tenure (FORK-089, COMP-401).
func (c *Client) checkCommit(ctx context.Context, tx ports.Tx, e *envelope, before ports.GroupView, p ports.Processed) (policy.Change, []byte, error) {
	ch, err := policy.Diff(before, *p.Staged, p.Proposals)
	var resynced []byte
	pc := policy.Commit{Before: before, After: *p.Staged, Sender: p.Sender, SenderType: p.SenderType,
		Proposals: p.Proposals, SequenceID: e.seq}
	switch {
	case err != nil:
	case p.SenderType == ports.SenderNewMemberCommit:
		// Only a resync or a recovery join (COMP-396, COMP-400); the
		// association check stands in for checkAdded, which reads the
		// GROUP_MEMBERSHIP an external commit cannot change.
		var kind policy.ExternalKind
		if kind, err = policy.External(pc, c.associatedIn(ctx, tx)); err == nil && kind == policy.Resync {
			// FORK-089: a resync removes the joiner's installation and adds
			// it back in one commit, so it starts a new publisher tenure
			// (COMP-401).
			resynced = p.Sender.SignatureKey
		}
	default:
		if err = policy.Check(pc, ch); err == nil {
			err = c.checkAdded(ctx, tx, *p.Staged, ch)
		}
	}
	return ch, resynced, err
}

// merged records a merged commit: the commit-log entry, the group-update
// record that is the commit's retained role evidence, the group's new
// minimum protocol version, and the events.
func (c *Client) merged(ctx context.Context, tx ports.Tx, g ports.Group, e *envelope, before, after ports.GroupView, sender ports.Member, ch policy.Change, resynced []byte, out *outcome) error {
	var readded [][]byte
	for _, m := range ch.Readded {
		readded = append(readded, m.SignatureKey)
	}
	tenures := readded
	if resynced != nil {
		tenures = append(slices.Clip(readded), resynced)
	}
	rec, err := c.log.RecordMerge(ctx, tx, commitlog.Merge{GroupID: g.ID, CommitSequenceID: e.seq, Before: before, After: after,
		Readded: tenures, ChangeClass: ch.Class(), AddedSuperAdmins: ch.AddedSuperAdmins, RoleEvidence: true})
	if err != nil {
		return err
	}
	if len(readded) > 0 { // FORK-064, whoever published the readd
		if err := c.rec.Readded(ctx, tx, g.ID, readded, e.seq); err != nil {
			return err
		}
	}
	out.recorded = append(out.recorded, rec)
	if err := recordMerged(ctx, tx, g.ID, before.Epoch, e.payload); err != nil { // catchup.go
		return err
	}
	upd := groupUpdate{Added: ch.AddedInboxes, Removed: ch.RemovedInboxes, Readded: readded,
		AddedSuperAdmins: ch.AddedSuperAdmins, Components: ch.Components}
	if _, _, err := messagesOf(tx).Insert(ctx, ports.Message{GroupID: g.ID, SequenceID: e.seq, Kind: ports.MessageGroupUpdated,
		SenderInbox: sender.InboxID, SenderInstallation: sender.SignatureKey, Epoch: before.Epoch,
		Content: upd.encode(), SentAt: e.at}); err != nil {
		return err
	}
	// The stored floor follows the component, its removal included: a
	// floor a commit removed is no floor (FORK-063 raises it again).
	floor := ""
	if d, err := metadata.FromExtensions(after.Extensions); err == nil {
		if v, ok, err := d.MinProtocolVersion(); ok && err == nil {
			floor = v.String()
		}
	}
	if floor != g.MinProtocolVersion {
		if err := tx.Groups().Update(ctx, g.ID, func(gr *ports.Group) error {
			gr.MinProtocolVersion = floor
			return nil
		}); err != nil {
			return err
		}
	}
	out.merged, out.inactive = true, !after.Active
	if len(ch.Added)+len(ch.Removed)+len(ch.Readded) > 0 || !after.Active {
		out.events = append(out.events, MembershipEvent{GroupID: g.ID, CommitSequenceID: e.seq,
			Added: ch.AddedInboxes, Removed: ch.RemovedInboxes, Readded: readded, RemovedSelf: !after.Active})
	}
	if names := componentNames(ch.Components); len(names) > 0 {
		out.events = append(out.events, MetadataEvent{GroupID: g.ID, CommitSequenceID: e.seq, Changed: names})
	}
	out.events = append(out.events, successorEvents(g.ID, e.seq, after, ch)...) // move.go
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
		case metadata.ComponentViewerList:
			out = append(out, "viewers")
		case metadata.ComponentPolicyVersion:
			out = append(out, "role policy version")
		case metadata.ComponentSuccessor:
			out = append(out, "successor")
		}
	}
	return out
}
