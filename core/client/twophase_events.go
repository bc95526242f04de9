package client

import "github.com/regroup-mls/regroup/ports"

// Events of two-phase commit acceptance (ADR-0030). They carry reason
// classes and inbox ids, never content (COMP-444).

// CommitPendingEvent reports a commit the delivery service holds pending:
// this installation's own (held, not merged) or another inbox's, with
// the report this installation makes on it (Verdict 0: none).
type CommitPendingEvent struct {
	GroupID          []byte
	CommitSequenceID uint64
	Own              bool
	Committer        string
	Verdict          ports.Verdict
	Reason           string
}

// CommitDecisionEvent reports the decision on a pending commit: Outcome
// is "confirmed" (merged now), "dropped", "expired" or "superseded"
// (discarded); Reasons are the refusals' classes of a drop.
type CommitDecisionEvent struct {
	GroupID          []byte
	CommitSequenceID uint64
	Own              bool
	Committer        string
	Outcome          string
	Reasons          []string
}

// QuarantineEvent reports an inbox quarantined in a group, or its
// quarantine lifted; with InstallationKey alone, an installation blocked
// (or its block lifted).
type QuarantineEvent struct {
	GroupID         []byte
	InboxID         string
	InstallationKey []byte
	Lifted          bool
}

// StuckReportEvent reports a stuck report on a confirmed commit: one the
// delivery service relayed (Committer names the committing inbox), or
// one this installation sent (Own), which a resync follows.
type StuckReportEvent struct {
	GroupID          []byte
	CommitSequenceID uint64
	Committer        string
	Reasons          []string
	Own              bool
}

func (CommitPendingEvent) event()  {}
func (CommitDecisionEvent) event() {}
func (QuarantineEvent) event()     {}
func (StuckReportEvent) event()    {}
