package client

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Two-phase commit acceptance (ADR-0030), the client's side. A commit the
// delivery service marks pending is read but not merged: this
// installation's own is held in the engine as its pending commit, another
// inbox's is processed without merging, checked and reported on
// ([ports.Witness]); either waits, its bytes stored with the group, until
// an acceptance notice on the group's topic decides it (COMP-435). A
// confirmed commit is processed again and merged, and only then recorded
// in the commit log; a dropped, expired or superseded one is forgotten
// (COMP-436).

var (
	// ErrCommitDropped reports an own commit a witness refused: the
	// delivery service dropped it and quarantines this inbox in the
	// group (ADR-0030 Decision 5). The change is not retried.
	ErrCommitDropped = errors.New("commit dropped: a witness refused it")
	// ErrCommitAwaiting reports an own commit still pending when the
	// caller's context ended: it stays held, and a later sync merges it
	// (and sends its Welcomes) or discards it; the app learns which from
	// a [CommitDecisionEvent] (COMP-437).
	ErrCommitAwaiting = errors.New("commit pending: awaiting its acceptance")
)

const nsPendingCommit = "client.pending_commit"

// pendingCommit is the group's commit the delivery service holds pending,
// as this installation read it: kept until a notice decides it.
type pendingCommit struct {
	Seq    uint64    `json:"seq"`
	At     time.Time `json:"at"`
	Commit []byte    `json:"commit"`
	// Own is this installation's own commit, held in the engine.
	Own bool `json:"own,omitempty"`
	// Committer is the committing inbox.
	Committer string `json:"committer,omitempty"`
	// Epoch and TreeHash are those of the state the commit leads to, as
	// this installation derived it; the GroupInfo published with the
	// commit must carry both.
	Epoch    uint64 `json:"epoch,omitempty"`
	TreeHash []byte `json:"tree_hash,omitempty"`
	// Verdict is this installation's report (0: none to send) and Reason
	// its class; Reported is set once the delivery service took it.
	Verdict  ports.Verdict `json:"verdict,omitempty"`
	Reason   string        `json:"reason,omitempty"`
	Reported bool          `json:"reported,omitempty"`
}

func loadPendingCommit(ctx context.Context, tx ports.Tx, groupID []byte) (*pendingCommit, error) {
	b, err := tx.Blobs().Get(ctx, nsPendingCommit, hex.EncodeToString(groupID))
	if errors.Is(err, ports.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pc pendingCommit
	if err := json.Unmarshal(b, &pc); err != nil {
		return nil, fmt.Errorf("stored pending commit of %x: %w", groupID, err)
	}
	return &pc, nil
}

func savePendingCommit(ctx context.Context, tx ports.Tx, groupID []byte, pc *pendingCommit) error {
	b, err := json.Marshal(pc)
	if err != nil {
		return err
	}
	return tx.Blobs().Put(ctx, nsPendingCommit, hex.EncodeToString(groupID), b)
}

func deletePendingCommit(ctx context.Context, tx ports.Tx, groupID []byte) error {
	return tx.Blobs().Delete(ctx, nsPendingCommit, hex.EncodeToString(groupID))
}

// acceptanceOutcome is what a batch leaves commit acceptance to do once
// its transaction committed.
type acceptanceOutcome struct {
	// report: the group's pending commit holds a report to send.
	report bool
	// stuck are confirmed commits this installation could not process.
	stuck []stuckReport
}

type stuckReport struct {
	seq    uint64
	reason string
}

// onPending handles a commit the delivery service marks pending: it is
// processed, never merged. This installation's own commit is held (the
// engine keeps it pending, the intent records where it stands); another
// inbox's is checked — the engine's processing (tags, path, credentials),
// then the role policy — and the verdict stored for the report, which is
// sent after the transaction, with the GroupInfo check (COMP-438).
func (c *Client) onPending(ctx context.Context, tx ports.Tx, g ports.Group, e *envelope, h header, out *outcome, cover func() error) error {
	before, err := c.deps.MLS.Group(ctx, tx, g.ID)
	if err != nil {
		return err
	}
	p, perr := c.deps.MLS.Process(ctx, tx, g.ID, e.payload)
	if perr != nil && !messageFailure(perr) {
		return perr // local: the envelope is read again
	}
	if err := cover(); err != nil {
		return err
	}
	pc := &pendingCommit{Seq: e.seq, At: e.at, Commit: bytes.Clone(e.payload), Epoch: before.Epoch + 1}
	switch {
	case perr != nil:
		pc.Verdict, pc.Reason = ports.VerdictRefused, reasonOf(perr)
	case p.Kind != ports.ProcessedCommit || p.Staged == nil:
		pc.Verdict, pc.Reason = ports.VerdictRefused, ports.ReportMalformed
	case p.Own:
		pc.Own, pc.Committer = true, c.InboxID()
		in, err := loadIntent(ctx, tx, g.ID)
		if err != nil {
			return err
		}
		if in != nil && in.State == intentPending {
			in.Held = e.seq
			if err := saveIntent(ctx, tx, g.ID, in); err != nil {
				return err
			}
		}
	default:
		pc.Committer, pc.Epoch, pc.TreeHash = p.Sender.InboxID, p.Staged.Epoch, bytes.Clone(p.Staged.TreeHash)
		_, _, cerr := c.checkCommit(ctx, tx, e, before, p)
		if need := (*needIdentity)(nil); errors.As(cerr, &need) {
			return need // fetched outside the transaction, then processed again
		}
		revoked, rerr := c.ownJoinRevoked(ctx, tx, p) // revoked.go
		if need := (*needIdentity)(nil); errors.As(rerr, &need) {
			return need
		}
		if rerr != nil {
			return rerr
		}
		switch {
		case !p.Staged.Active:
			// Removed by it: no witness (a member before and after).
		case p.Sender.InboxID == c.InboxID() && p.SenderType != ports.SenderNewMemberCommit:
			// Another installation of this inbox: no witness of its own
			// inbox's member commit.
		case revoked:
			pc.Verdict, pc.Reason = ports.VerdictRefused, ports.ReportCredential
		case cerr != nil:
			pc.Verdict, pc.Reason = ports.VerdictRefused, policyReason(cerr)
		default:
			pc.Verdict = ports.VerdictOK
		}
	}
	if err := savePendingCommit(ctx, tx, g.ID, pc); err != nil {
		return err
	}
	out.acceptance.report = out.acceptance.report || pc.Verdict != 0
	out.events = append(out.events, CommitPendingEvent{GroupID: bytes.Clone(g.ID), CommitSequenceID: e.seq, Own: pc.Own,
		Committer: pc.Committer, Verdict: pc.Verdict, Reason: pc.Reason})
	return nil
}

// reasonOf classifies an engine's refusal of a commit into a report
// reason class (ADR-0030 Decision 3, COMP-439).
func reasonOf(err error) string {
	s := strings.ToLower(err.Error())
	switch {
	case strings.Contains(s, "tag"):
		return ports.ReportTag
	case strings.Contains(s, "credential") || strings.Contains(s, "signature"):
		return ports.ReportCredential
	case errors.Is(err, ports.ErrUndecryptable) || strings.Contains(s, "path") || strings.Contains(s, "parent hash") ||
		strings.Contains(s, "tree hash"):
		return ports.ReportPath
	case errors.Is(err, ports.ErrWrongEpoch):
		return ports.ReportMalformed
	}
	return ports.ReportMalformed
}

// policyReason classifies a refusal by the client's own checks: the role
// policy, or a credential of an added installation.
func policyReason(err error) string {
	if strings.Contains(strings.ToLower(err.Error()), "credential") || strings.Contains(strings.ToLower(err.Error()), "association") {
		return ports.ReportCredential
	}
	return ports.ReportPolicy
}

// onNotice handles an acceptance notice. Only a notice naming the commit
// this installation holds pending decides anything (COMP-440): a notice
// on a delivery service without two phases, or a stale one, changes
// nothing but the events.
func (c *Client) onNotice(ctx context.Context, tx ports.Tx, g ports.Group, e *envelope, out *outcome, cover func() error) error {
	if err := cover(); err != nil {
		return err
	}
	n := e.notice
	switch n.GetOutcome() {
	case backendpb.AcceptanceNotice_CONFIRMED, backendpb.AcceptanceNotice_DROPPED,
		backendpb.AcceptanceNotice_EXPIRED, backendpb.AcceptanceNotice_SUPERSEDED:
		pc, err := loadPendingCommit(ctx, tx, g.ID)
		if err != nil {
			return err
		}
		if pc == nil || pc.Seq != n.GetCommitSequenceId() {
			c.logger.Info("acceptance notice of a commit not held", "group", fmt.Sprintf("%x", g.ID), "seq", e.seq,
				"commit", n.GetCommitSequenceId(), "outcome", n.GetOutcome().String())
			return nil
		}
		if err := deletePendingCommit(ctx, tx, g.ID); err != nil {
			return err
		}
		ev := CommitDecisionEvent{GroupID: bytes.Clone(g.ID), CommitSequenceID: pc.Seq, Own: pc.Own, Committer: pc.Committer,
			Outcome: outcomeName(n.GetOutcome()), Reasons: reportReasons(n)}
		if n.GetOutcome() == backendpb.AcceptanceNotice_CONFIRMED {
			out.events = append(out.events, ev)
			return c.confirmed(ctx, tx, g, pc, out)
		}
		out.events = append(out.events, ev)
		return c.discarded(ctx, tx, g, pc, n.GetOutcome(), ev.Reasons)
	case backendpb.AcceptanceNotice_QUARANTINED, backendpb.AcceptanceNotice_LIFTED:
		lifted := n.GetOutcome() == backendpb.AcceptanceNotice_LIFTED
		if len(n.GetInboxId()) > 0 {
			if err := updateQuarantine(ctx, tx, g.ID, string(n.GetInboxId()), lifted); err != nil {
				return err
			}
		}
		out.events = append(out.events, QuarantineEvent{GroupID: bytes.Clone(g.ID), InboxID: string(n.GetInboxId()),
			InstallationKey: bytes.Clone(n.GetInstallationKey()), Lifted: lifted})
	case backendpb.AcceptanceNotice_STUCK:
		ev := StuckReportEvent{GroupID: bytes.Clone(g.ID), CommitSequenceID: n.GetCommitSequenceId(),
			Committer: string(n.GetInboxId()), Reasons: reportReasons(n)}
		if rs := n.GetReports(); len(rs) > 0 {
			ev.InstallationKey, ev.InboxID = bytes.Clone(rs[0].GetInstallationKey()), string(rs[0].GetInboxId())
		}
		out.events = append(out.events, ev)
	case backendpb.AcceptanceNotice_BLOCKED:
		out.events = append(out.events, QuarantineEvent{GroupID: bytes.Clone(g.ID), InstallationKey: bytes.Clone(n.GetInstallationKey())})
	case backendpb.AcceptanceNotice_STOPPED:
		out.events = append(out.events, c.stoppedEvent(ctx, tx, g, n.GetEpoch())) // catchup.go
	}
	return nil
}

// confirmed merges a confirmed commit: processed again on the state it was
// read on (nothing merged meanwhile) and applied as any commit, which
// records its commit-log entry at its own sequence id. One this
// installation cannot process now is a stuck report and a repair
// (ADR-0030 Decision 6, COMP-441).
func (c *Client) confirmed(ctx context.Context, tx ports.Tx, g ports.Group, pc *pendingCommit, out *outcome) error {
	e := &envelope{seq: pc.Seq, at: pc.At, payload: pc.Commit}
	h, _ := peekHeader(pc.Commit)
	before, err := c.deps.MLS.Group(ctx, tx, g.ID)
	if err != nil {
		return err
	}
	p, err := c.deps.MLS.Process(ctx, tx, g.ID, pc.Commit)
	if err != nil {
		if !messageFailure(err) {
			return err
		}
		out.acceptance.stuck = append(out.acceptance.stuck, stuckReport{seq: pc.Seq, reason: reasonOf(err)})
		if err := markStuck(ctx, tx, g.ID, pc.Seq, reasonOf(err)); err != nil {
			return err
		}
		return c.failed(ctx, tx, g, e, h, before, err, out)
	}
	if p.Kind != ports.ProcessedCommit {
		out.acceptance.stuck = append(out.acceptance.stuck, stuckReport{seq: pc.Seq, reason: ports.ReportMalformed})
		return markStuck(ctx, tx, g.ID, pc.Seq, ports.ReportMalformed)
	}
	merged := out.merged
	out.merged = false
	if err := c.applyCommit(ctx, tx, g, e, h, before, p, out); err != nil {
		return err
	}
	if !out.merged { // refused by this installation's role policy
		out.acceptance.stuck = append(out.acceptance.stuck, stuckReport{seq: pc.Seq, reason: ports.ReportPolicy})
		if err := markStuck(ctx, tx, g.ID, pc.Seq, ports.ReportPolicy); err != nil {
			return err
		}
	}
	out.merged = out.merged || merged
	return nil
}

// discarded forgets a dropped, expired or superseded commit. This
// installation's own is cleared from the engine; its intent ends dropped
// (a typed error to the caller) or lost (the caller builds the change
// again on the new state, COMP-442).
func (c *Client) discarded(ctx context.Context, tx ports.Tx, g ports.Group, pc *pendingCommit, o backendpb.AcceptanceNotice_Outcome, reasons []string) error {
	if !pc.Own {
		return nil
	}
	in, err := loadIntent(ctx, tx, g.ID)
	if err != nil {
		return err
	}
	if in != nil && in.State == intentPending {
		if o == backendpb.AcceptanceNotice_DROPPED {
			in.State, in.Reason = intentDropped, strings.Join(reasons, ",")
		} else {
			in.State = intentLost
		}
		if err := saveIntent(ctx, tx, g.ID, in); err != nil {
			return err
		}
	}
	return c.deps.MLS.ClearPending(ctx, tx, g.ID)
}

func outcomeName(o backendpb.AcceptanceNotice_Outcome) string {
	return strings.ToLower(o.String())
}

// reportReasons lists the reason classes of a notice's reports, each once.
func reportReasons(n *backendpb.AcceptanceNotice) []string {
	var out []string
	for _, r := range n.GetReports() {
		if r.GetReason() != "" && ports.ValidReportReason(r.GetReason()) && !contains(out, r.GetReason()) {
			out = append(out, r.GetReason())
		}
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// otherPending reports whether the group holds another installation's
// commit pending that this installation's commit must wait for: a super
// admin's commit does not wait, it supersedes the pending one (ADR-0030
// Decision 2).
func (c *Client) otherPending(ctx context.Context, groupID []byte) (wait bool, err error) {
	err = c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		pc, err := loadPendingCommit(ctx, tx, groupID)
		if err != nil || pc == nil || pc.Own {
			return err
		}
		v, err := c.deps.MLS.Group(ctx, tx, groupID)
		if err != nil {
			return err
		}
		r, err := policy.RolesOf(v)
		wait = err != nil || !r.SuperAdmin(c.InboxID())
		return nil
	})
	return wait, err
}
