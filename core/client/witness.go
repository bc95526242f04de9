package client

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/regroup-mls/regroup/core/internal/mlsframe"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// witness returns the transport's [ports.Witness], or nil when the
// delivery service takes no reports.
func (c *Client) witness() ports.Witness {
	w, _ := c.deps.Transport.(ports.Witness)
	return w
}

// afterAcceptance runs what a committed batch left to commit acceptance:
// the report on the group's pending commit. A report that fails stays
// stored unsent and is sent again at the group's next pass (COMP-443).
func (c *Client) afterAcceptance(ctx context.Context, groupID []byte, out outcome) {
	if out.acceptance.report {
		if err := c.sendReport(ctx, groupID); err != nil {
			c.logErr("acceptance report", err)
			c.acc.due(groupID)
		}
	}
	if len(out.acceptance.stuck) > 0 {
		c.acc.due(groupID)
	}
}

// sendReport sends this installation's report on the group's pending
// commit when it holds one not yet sent. An OK is sent only once the
// GroupInfo the committer published with the commit carries the epoch
// and tree hash this installation derived; one that does not, or none
// at all, is a refusal with reason group-info (ADR-0030 Decision 3).
func (c *Client) sendReport(ctx context.Context, groupID []byte) error {
	w := c.witness()
	if w == nil {
		return nil
	}
	var pc *pendingCommit
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) (err error) {
		pc, err = loadPendingCommit(ctx, tx, groupID)
		return err
	})
	if err != nil || pc == nil || pc.Reported || pc.Verdict == 0 {
		return err
	}
	r := ports.Report{GroupID: groupID, CommitSeq: pc.Seq, Verdict: pc.Verdict, Reason: pc.Reason}
	if r.Verdict == ports.VerdictOK {
		ok, err := c.pendingGroupInfoMatches(ctx, groupID, pc)
		if err != nil {
			return err
		}
		if !ok {
			r.Verdict, r.Reason = ports.VerdictRefused, ports.ReportGroupInfo
		}
	}
	if err := w.Report(ctx, r); err != nil && !errors.Is(err, ports.ErrInvalidArgument) && !errors.Is(err, ports.ErrNotFound) {
		return fmt.Errorf("report on %x commit %d: %w", groupID, pc.Seq, err)
	} else if err != nil {
		// Decided meanwhile, or no witness: nothing to send again.
		c.logger.Info("acceptance report not taken", "group", fmt.Sprintf("%x", groupID), "commit", pc.Seq, "err", err)
	}
	return c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		cur, err := loadPendingCommit(ctx, tx, groupID)
		if err != nil || cur == nil || cur.Seq != pc.Seq {
			return err
		}
		cur.Reported, cur.Verdict, cur.Reason = true, r.Verdict, r.Reason
		return savePendingCommit(ctx, tx, groupID, cur)
	})
}

// pendingGroupInfoMatches reads the GroupInfo topic after the pending
// commit for the GroupInfo published with it (marked pending) and checks
// its group, epoch and tree hash against the state this installation
// derived.
func (c *Client) pendingGroupInfoMatches(ctx context.Context, groupID []byte, pc *pendingCommit) (bool, error) {
	envs, err := c.deps.Transport.Query(ctx, groupInfoTopic(groupID), 0, pageSize)
	if err != nil {
		return false, fmt.Errorf("group info of %x: %w", groupID, err)
	}
	for _, e := range slices.Backward(envs) {
		if !e.GetPending() {
			continue
		}
		gi := e.GetEnvelope().GetGroupMessage()
		id, epoch, th, ok := mlsframe.PeekGroupInfoTreeHash(gi)
		return ok && bytes.Equal(id, groupID) && epoch == pc.Epoch && bytes.Equal(th, pc.TreeHash), nil
	}
	return false, nil
}

// Stuck installations (ADR-0030 Decision 6). A confirmed commit this
// installation cannot process is recorded with the group; the group's
// next pass reports it stuck and resyncs (COMP-441). A super admin's
// re-add, installed meanwhile, ends it without a resync.

const nsStuck = "client.stuck"

type stuckRecord struct {
	Seq      uint64 `json:"seq"`
	Reason   string `json:"reason"`
	Reported bool   `json:"reported,omitempty"`
}

func markStuck(ctx context.Context, tx ports.Tx, groupID []byte, seq uint64, reason string) error {
	return putJSON(ctx, tx, nsStuck, groupID, stuckRecord{Seq: seq, Reason: reason})
}

func putJSON(ctx context.Context, tx ports.Tx, ns string, groupID []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Blobs().Put(ctx, ns, hex.EncodeToString(groupID), b)
}

func getJSON(ctx context.Context, tx ports.Tx, ns string, groupID []byte, v any) (bool, error) {
	b, err := tx.Blobs().Get(ctx, ns, hex.EncodeToString(groupID))
	if errors.Is(err, ports.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("stored %s of %x: %w", ns, groupID, err)
	}
	return true, nil
}

// acceptanceState is the client's memory of the groups with a stuck
// record: those marked in this process, and whether the store was read
// for the others since the start.
type acceptanceState struct {
	mu      sync.Mutex
	stuck   map[string]bool
	checked map[string]bool
}

func (a *acceptanceState) due(groupID []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stuck == nil {
		a.stuck = map[string]bool{}
	}
	a.stuck[string(groupID)] = true
}

// take reports whether the group may hold a stuck record: marked, or not
// yet looked for since the client started.
func (a *acceptanceState) take(groupID []byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.checked == nil {
		a.checked = map[string]bool{}
	}
	k := string(groupID)
	first := !a.checked[k]
	a.checked[k] = true
	s := a.stuck[k]
	delete(a.stuck, k)
	return s || first
}

// acceptancePass sends a report left unsent and repairs a stuck group,
// when the group is due (COMP-443). The caller holds the group's lock and
// is not in a pass of the group.
func (c *Client) acceptancePass(ctx context.Context, groupID []byte) error {
	if !c.acc.take(groupID) {
		return nil
	}
	if err := c.sendReport(ctx, groupID); err != nil {
		c.acc.due(groupID)
		return err
	}
	return c.repairStuck(ctx, groupID)
}

// repairStuck reports and repairs a stuck group: a STUCK report on the
// commit, then a resync. A failed resync keeps the record for the next
// pass.
func (c *Client) repairStuck(ctx context.Context, groupID []byte) error {
	var (
		s     stuckRecord
		found bool
		g     ports.Group
	)
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) (err error) {
		if found, err = getJSON(ctx, tx, nsStuck, groupID, &s); err != nil || !found {
			return err
		}
		g, err = tx.Groups().Get(ctx, groupID)
		return err
	})
	if err != nil || !found {
		return err
	}
	if g.JoinAnchor > s.Seq || !g.Active {
		// Re-added (or removed) since: nothing left to repair.
		return c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
			return tx.Blobs().Delete(ctx, nsStuck, hex.EncodeToString(groupID))
		})
	}
	if w := c.witness(); w != nil && !s.Reported {
		reason := s.Reason
		if reason == "" {
			reason = ports.ReportTag
		}
		err := w.Report(ctx, ports.Report{GroupID: groupID, CommitSeq: s.Seq, Verdict: ports.VerdictStuck, Reason: reason})
		if err != nil && !errors.Is(err, ports.ErrInvalidArgument) && !errors.Is(err, ports.ErrNotFound) {
			c.acc.due(groupID)
			return fmt.Errorf("stuck report on %x commit %d: %w", groupID, s.Seq, err)
		}
		c.events.emit(StuckReportEvent{GroupID: bytes.Clone(groupID), CommitSequenceID: s.Seq, Reasons: []string{reason}, Own: true})
		s.Reported = true
		if err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error { return putJSON(ctx, tx, nsStuck, groupID, s) }); err != nil {
			return err
		}
	}
	at, err := c.joinExternal(ctx, groupID, externalResync)
	if err != nil {
		c.acc.due(groupID)
		return fmt.Errorf("resync of stuck group %x: %w", groupID, err)
	}
	qs, err := c.quarantineNotices(ctx, groupID, s.Seq, at)
	if err != nil {
		c.logger.Warn("quarantine notices before the resync not read", "group", fmt.Sprintf("%x", groupID), "err", err)
	}
	return c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		for _, q := range qs {
			if err := updateQuarantine(ctx, tx, groupID, q.inbox, q.lifted); err != nil {
				return err
			}
		}
		return tx.Blobs().Delete(ctx, nsStuck, hex.EncodeToString(groupID))
	})
}

type quarantineNotice struct {
	inbox  string
	lifted bool
}

// quarantineNotices reads the quarantine notices between the stuck
// commit and the resync that skipped them, for the quarantine list
// (COMP-449).
func (c *Client) quarantineNotices(ctx context.Context, groupID []byte, from, to uint64) ([]quarantineNotice, error) {
	var out []quarantineNotice
	for after := from; after < to; {
		envs, err := c.deps.Transport.Query(ctx, groupTopic(groupID), after, pageSize)
		if err != nil {
			return out, fmt.Errorf("group %x: %w", groupID, err)
		}
		moved := false
		for _, e := range envs {
			if e.GetSequenceId() <= after || e.GetSequenceId() >= to {
				continue
			}
			after, moved = e.GetSequenceId(), true
			n := e.GetEnvelope().GetAcceptanceNotice()
			lifted := n.GetOutcome() == backendpb.AcceptanceNotice_LIFTED
			if (lifted || n.GetOutcome() == backendpb.AcceptanceNotice_QUARANTINED) && len(n.GetInboxId()) > 0 {
				out = append(out, quarantineNotice{inbox: string(n.GetInboxId()), lifted: lifted})
			}
		}
		if !moved {
			break
		}
	}
	return out, nil
}

// Quarantines (ADR-0030 Decision 5) as the group's notices told them.

const nsQuarantine = "client.quarantine"

func updateQuarantine(ctx context.Context, tx ports.Tx, groupID []byte, inbox string, lifted bool) error {
	var list []string
	if _, err := getJSON(ctx, tx, nsQuarantine, groupID, &list); err != nil {
		return err
	}
	i := slices.Index(list, inbox)
	switch {
	case lifted && i >= 0:
		list = slices.Delete(list, i, i+1)
	case !lifted && i < 0:
		list = append(list, inbox)
		slices.Sort(list)
	default:
		return nil
	}
	return putJSON(ctx, tx, nsQuarantine, groupID, list)
}

// Quarantined lists the inboxes quarantined in the conversation, as the
// delivery service's notices on its topic told them, up to what this
// installation processed.
func (cv *Conversation) Quarantined(ctx context.Context) ([]string, error) {
	var list []string
	err := cv.c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		_, err := getJSON(ctx, tx, nsQuarantine, cv.id, &list)
		return err
	})
	return list, err
}

// LiftQuarantine asks the delivery service to lift an inbox's quarantine
// in the conversation; only a super admin's installation may. The
// LIFTED notice that follows on the topic updates [Conversation.Quarantined].
func (cv *Conversation) LiftQuarantine(ctx context.Context, inbox string) error {
	w := cv.c.witness()
	if w == nil {
		return fmt.Errorf("lift quarantine: the transport takes no acceptance calls: %w", ports.ErrUnsupported)
	}
	if err := w.Lift(ctx, ports.Lift{GroupID: cv.id, InboxID: []byte(inbox)}); err != nil {
		return fmt.Errorf("lift quarantine of %s: %w", inbox, err)
	}
	return nil
}
