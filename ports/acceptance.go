package ports

import (
	"context"
	"errors"
	"fmt"
)

// Commit acceptance in two phases (ADR-0030 Decisions 1–6). A commit by
// an inbox that is not a super admin in the epoch before it waits, as its
// group's single pending commit, until a witness (another inbox's
// installation that is a member before and after it) reports on it. The
// delivery service marks the stored commit pending
// (OriginatorEnvelope.pending) and later stores an AcceptanceNotice on
// the same group topic that decides it; reports and lifts go through a
// [Witness] transport.

// ErrCommitPending reports a commit the delivery service refused because
// another commit of the group is pending: the sender waits for that
// commit's decision on the group's topic and then builds its commit
// again. Like [ErrEpochConflict] it is a class of its own, never wrapped
// together with [ErrInvalidArgument]: the change it carries is not
// refused.
var ErrCommitPending = errors.New("another commit of the group is pending: retry after its decision")

// ErrQuarantined reports a commit the delivery service refused because
// its sender's inbox is quarantined in the group (or its installation is
// blocked there), until a super admin lifts it or removes the inbox.
// Retrying does not help. It wraps [ErrInvalidArgument].
var ErrQuarantined = fmt.Errorf("%w: quarantined in the group", ErrInvalidArgument)

// Verdict is what a witness reports on a commit.
type Verdict int

const (
	// VerdictOK: the witness processed the pending commit and checked the
	// GroupInfo published with it.
	VerdictOK Verdict = 1
	// VerdictRefused: the witness cannot process the pending commit.
	VerdictRefused Verdict = 2
	// VerdictStuck: the installation cannot process a commit that was
	// confirmed.
	VerdictStuck Verdict = 3
)

// Report reason classes (ADR-0030 Decision 3), one per refusal or stuck
// report.
const (
	// ReportTag: a membership or confirmation tag is wrong.
	ReportTag = "tag"
	// ReportPath: the path secret does not decrypt or does not fit.
	ReportPath = "path"
	// ReportGroupInfo: the GroupInfo published with the commit does not
	// match the epoch the witness derived.
	ReportGroupInfo = "group-info"
	// ReportPolicy: the witness's role policy refuses the commit.
	ReportPolicy = "policy"
	// ReportCredential: a credential chain or a revocation is wrong.
	ReportCredential = "credential"
	// ReportMalformed: the commit does not decode.
	ReportMalformed = "malformed"
)

// ReportReasons lists every report reason class.
var ReportReasons = []string{ReportTag, ReportPath, ReportGroupInfo, ReportPolicy, ReportCredential, ReportMalformed}

// ValidReportReason reports whether r is one of [ReportReasons].
func ValidReportReason(r string) bool {
	for _, x := range ReportReasons {
		if x == r {
			return true
		}
	}
	return false
}

// Report is one installation's report on a group's commit.
type Report struct {
	// GroupID names the group.
	GroupID []byte
	// CommitSeq is the sequence id of the commit on the group's topic.
	CommitSeq uint64
	// Verdict is the report; Reason is a [ReportReasons] class for
	// [VerdictRefused] and [VerdictStuck], empty for [VerdictOK].
	Verdict Verdict
	Reason  string
}

// Lift names what a super admin lifts in a group: an inbox's quarantine
// or an installation's block (exactly one is set).
type Lift struct {
	GroupID         []byte
	InboxID         []byte
	InstallationKey []byte
}

// Witness is an optional interface of a [Transport] whose delivery
// service runs commit acceptance in two phases. Both calls go over the
// authenticated connection, which names the reporting installation.
type Witness interface {
	// Report sends a report. The service keeps the first report of each
	// installation on a commit; a later one is answered with success and
	// ignored. A report on a commit that is not the group's pending one
	// (OK, refused) or not a confirmed one (stuck), or by an installation
	// that is no witness of it, fails with an error wrapping
	// [ErrInvalidArgument] or [ErrNotFound].
	Report(ctx context.Context, r Report) error
	// Lift lifts a quarantine or block. The caller's installation must be
	// a member of a super admin inbox in the group's current epoch;
	// otherwise it fails with an error wrapping [ErrInvalidArgument].
	Lift(ctx context.Context, l Lift) error
}

// DeliveryWitness is [Witness] on the inbound side: a [DeliveryService]
// that implements it serves reports and lifts for the caller the adapter
// established.
type DeliveryWitness interface {
	Report(ctx context.Context, caller Caller, r Report) error
	Lift(ctx context.Context, caller Caller, l Lift) error
}
