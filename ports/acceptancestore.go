package ports

import "context"

// Outcome of a commit that took two phases, as an [AcceptanceStore]
// records it.
type AcceptanceOutcome int

const (
	// OutcomePending: the commit still waits.
	OutcomePending AcceptanceOutcome = 0
	// OutcomeConfirmed: it took effect.
	OutcomeConfirmed AcceptanceOutcome = 1
	// OutcomeDropped: a witness refused it.
	OutcomeDropped AcceptanceOutcome = 2
	// OutcomeExpired: no witness reported in time.
	OutcomeExpired AcceptanceOutcome = 3
	// OutcomeSuperseded: a super admin's commit replaced it.
	OutcomeSuperseded AcceptanceOutcome = 4
)

// PendingCommit is a group's pending commit as an [AcceptanceStore]
// keeps it, beside the group's current public state.
type PendingCommit struct {
	GroupID []byte
	// CommitSeq is the commit's sequence id on the group's topic and
	// CommitDigest the SHA-256 of its MLSMessage.
	CommitSeq    uint64
	CommitDigest []byte
	// Epoch and State are the public state the commit leads to.
	Epoch uint64
	State []byte
	// GroupInfoSeq is the sequence id of the GroupInfo stored pending
	// with it, 0 when none.
	GroupInfoSeq uint64
	// Committer is the committer's inbox; External marks a resync or
	// recovery join.
	Committer string
	External  bool
	// CreatedNS is when it was accepted; FirstReportNS when its first
	// counting report was stored (0: none yet), which starts the grace
	// period.
	CreatedNS     int64
	FirstReportNS int64
}

// AcceptedCommit is what an [AcceptanceStore] keeps of a commit that
// took two phases after its decision.
type AcceptedCommit struct {
	GroupID   []byte
	CommitSeq uint64
	Committer string
	Outcome   AcceptanceOutcome
	DecidedNS int64
	// StuckQuarantined is set once a stuck report quarantined the
	// committer after the commit's confirmation.
	StuckQuarantined bool
}

// AcceptanceReport is one installation's stored report on a commit.
type AcceptanceReport struct {
	GroupID         []byte
	CommitSeq       uint64
	InstallationKey []byte
	InboxID         string
	Verdict         Verdict
	Reason          string
	// Counts is false for a report that does not decide: an OK by the
	// joining inbox's own installation on its resync or recovery join.
	Counts     bool
	ReportedNS int64
}

// AcceptanceDecision decides a group's pending commit.
type AcceptanceDecision struct {
	GroupID []byte
	// CommitSeq names the pending commit decided: the store must hold it
	// as the group's pending commit, or the call fails with
	// [ErrStateMoved] (another replica decided first).
	CommitSeq uint64
	// Outcome is [OutcomeConfirmed], [OutcomeDropped] or
	// [OutcomeExpired].
	Outcome   AcceptanceOutcome
	DecidedNS int64
	// Quarantine, when not empty, is the inbox quarantined in the group
	// (a drop).
	Quarantine string
	// Unquarantine lists the inboxes whose quarantine a confirmed commit
	// ends (it removed every leaf of theirs).
	Unquarantine []string
	// Block, when not nil, is the installation a drop blocks in the group
	// instead of quarantining an inbox; a store that is no [BlockStore]
	// refuses it with an error wrapping [ErrUnavailable].
	Block *BlockedInstallation
	// Unblock lists the installations whose block a confirmed commit
	// ends (it took their leaf out).
	Unblock [][]byte
	// Notices are appended to their topics in the same transaction.
	Notices []NewStoredEnvelope
}

// QuarantineChange adds or lifts one inbox's quarantine in a group.
type QuarantineChange struct {
	GroupID []byte
	InboxID string
	// Lift removes the quarantine (it must exist, else the call fails
	// with an error wrapping [ErrNotFound]); otherwise the inbox is
	// quarantined.
	Lift bool
	// StuckCommit, when adding, names the confirmed commit whose stuck
	// report quarantines: the quarantine is added only once per commit
	// (a second call changes nothing and reports false).
	StuckCommit uint64
	SinceNS     int64
	// Notices are appended, in the same transaction, when the change is
	// made.
	Notices []NewStoredEnvelope
	// Always are appended in that transaction whether or not it is.
	Always []NewStoredEnvelope
}

// AcceptanceStore is an optional interface of a [PublicStateStore] that
// runs commit acceptance in two phases (ADR-0030 Decisions 2 to 6): the
// groups' pending commits beside their current states, the reports on
// them, their decisions and the groups' quarantines. Every write is one
// transaction; a pending commit is decided at most once, also by
// several processes sharing the database.
type AcceptanceStore interface {
	PublicStateStore
	// PendingCommit returns the group's pending commit, or an error
	// wrapping [ErrNotFound].
	PendingCommit(ctx context.Context, groupID []byte) (PendingCommit, error)
	// PendingCommits returns every group's pending commit (without
	// State), in no order.
	PendingCommits(ctx context.Context) ([]PendingCommit, error)
	// PreviousState returns the group's previous state: the current one
	// before the last confirmed commit, or an error wrapping
	// [ErrNotFound].
	PreviousState(ctx context.Context, groupID []byte) (StoredPublicState, error)
	// AcceptedCommit returns what the store keeps of a commit that took
	// two phases, or an error wrapping [ErrNotFound].
	AcceptedCommit(ctx context.Context, groupID []byte, commitSeq uint64) (AcceptedCommit, error)
	// AddReport stores r unless its installation reported on the commit
	// before (then it reports false). A stored counting report on a
	// pending commit without reports sets its FirstReportNS.
	AddReport(ctx context.Context, r AcceptanceReport) (bool, error)
	// Reports returns the commit's reports, in the order stored.
	Reports(ctx context.Context, groupID []byte, commitSeq uint64) ([]AcceptanceReport, error)
	// Decide applies d in one transaction: the pending commit's state
	// becomes current (the current one kept as previous) or is
	// discarded with its GroupInfo, its reports are marked decided, the
	// quarantines change and the notices are appended. It returns the
	// notices' sequence ids.
	Decide(ctx context.Context, d AcceptanceDecision) ([]uint64, error)
	// Quarantined returns the inboxes quarantined in the group.
	Quarantined(ctx context.Context, groupID []byte) ([]string, error)
	// ChangeQuarantine applies c in one transaction and reports whether
	// it changed the quarantine; it returns the ids of the notices
	// appended.
	ChangeQuarantine(ctx context.Context, c QuarantineChange) (bool, []uint64, error)
	// DeleteDecidedBefore deletes the reports and decided commits
	// decided before beforeNS and returns how many reports it deleted.
	DeleteDecidedBefore(ctx context.Context, beforeNS int64) (int64, error)
}
