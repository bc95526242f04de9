package policy

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/ports"
)

// ExternalKind names the two external commits regroup accepts (ADR-0029
// as ADR-0030 relies on it, COMP-080).
type ExternalKind int

const (
	// Resync: a member installation that cannot process its group rejoins
	// and removes its own old leaf (same inbox, same signature key).
	Resync ExternalKind = iota + 1
	// RecoveryJoin: a new installation of a member inbox, associated with
	// that inbox, joins and removes a leaf of that inbox (a lost
	// installation).
	RecoveryJoin
)

func (k ExternalKind) String() string {
	switch k {
	case Resync:
		return "resync"
	case RecoveryJoin:
		return "recovery join"
	}
	return fmt.Sprintf("external kind %d", int(k))
}

// ErrExternalRefused is wrapped, beside [ErrNotPermitted], by every
// refusal of [External], as an [*ExternalError].
var ErrExternalRefused = errors.New("external commit is neither a resync nor a recovery join")

// What an [*ExternalError] names as wrong.
const (
	// ExternalNotExternal: the commit's sender is not a new member commit.
	ExternalNotExternal = "not-external"
	// ExternalProposal: a proposal other than ExternalInit, one Remove and
	// members' own SelfRemoves.
	ExternalProposal = "proposal"
	// ExternalRemoves: the commit removes no leaf, or more than one.
	ExternalRemoves = "removes"
	// ExternalInbox: the joiner's inbox is no member inbox of the epoch
	// before, or the removed leaf belongs to another inbox.
	ExternalInbox = "inbox"
	// ExternalKey: the joiner's signature key is another member's, or a
	// member installation's key removes a leaf not its own.
	ExternalKey = "key"
	// ExternalAssociation: the joiner's installation is not associated
	// with its inbox in that inbox's identity updates.
	ExternalAssociation = "association"
	// ExternalGroupContext: the group context extensions changed.
	ExternalGroupContext = "group-context"
)

// ExternalError is an external commit [External] refused. It wraps
// [ErrExternalRefused] and [ErrNotPermitted].
type ExternalError struct {
	// Reason is one of the External constants.
	Reason string
	// Detail says what was wrong.
	Detail string
}

func (e *ExternalError) Error() string {
	return fmt.Sprintf("%v (%s): %s", ErrExternalRefused, e.Reason, e.Detail)
}

// Unwrap returns the sentinels.
func (e *ExternalError) Unwrap() []error { return []error{ErrExternalRefused, ErrNotPermitted} }

func refuseExternal(reason, format string, args ...any) error {
	return &ExternalError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Associated reports whether installationKey is associated with inbox in
// that inbox's identity updates (COMP-123). The delivery service and the
// client each supply their own resolver; an error that is not a plain
// "no" (an unreachable resolver) is returned by [External] as it is, so a
// caller can retry rather than refuse.
type Associated func(inbox string, installationKey []byte) (bool, error)

// External decides whether an external commit is one of the two regroup
// accepts (COMP-396): a [Resync] — the joiner's inbox is a member inbox
// of the epoch before and the commit removes exactly the joiner's own old
// leaf, with the same inbox and signature key — or a [RecoveryJoin] — a
// signature key no member holds, of a member inbox, associated with that
// inbox per associated, removing exactly one leaf of that same inbox. In
// both, the joiner's installation must be associated with its inbox, the
// commit carries no proposal but its ExternalInit, that Remove and
// SelfRemoves members sent of themselves (COMP-304), and leaves the group
// context extensions unchanged. Every other commit is refused with an
// [*ExternalError] naming what was wrong. c.Sender is the leaf the joiner
// takes, as [ports.Processed.Sender] reports it.
//
// It judges membership and keys only; the role policy's other rules (the
// GROUP_MEMBERSHIP component, immutable components) hold because the
// group context cannot change.
func External(c Commit, associated Associated) (ExternalKind, error) {
	if c.SenderType != ports.SenderNewMemberCommit {
		return 0, refuseExternal(ExternalNotExternal, "sender type %d is not a new member commit", c.SenderType)
	}
	joiner := c.Sender
	if joiner.InboxID == "" {
		return 0, refuseExternal(ExternalInbox, "the joiner's leaf names no inbox")
	}
	var removes []ports.Member
	for _, p := range c.Proposals {
		switch {
		case p.Type == ports.ProposalExternalInit:
		case p.Type == ports.ProposalRemove && !p.ByReference:
			removes = append(removes, p.Removed)
		case p.Type == ports.ProposalSelfRemove && p.SenderType == ports.SenderMember &&
			bytes.Equal(p.Sender.SignatureKey, p.Removed.SignatureKey):
			// A member's own request to leave, which any commit may carry.
		default:
			return 0, refuseExternal(ExternalProposal, "proposal type %d (by reference %v) in an external commit", p.Type, p.ByReference)
		}
	}
	if len(removes) != 1 {
		return 0, refuseExternal(ExternalRemoves, "the commit removes %d leaves, want exactly one of the joiner's inbox", len(removes))
	}
	old := removes[0]
	if !slices.ContainsFunc(c.Before.Members, func(m ports.Member) bool { return m.InboxID == joiner.InboxID }) {
		return 0, refuseExternal(ExternalInbox, "inbox %s is no member of epoch %d", joiner.InboxID, c.Before.Epoch)
	}
	if old.InboxID != joiner.InboxID {
		return 0, refuseExternal(ExternalInbox, "the joiner of inbox %s removes leaf %d of inbox %s", joiner.InboxID, old.LeafIndex, old.InboxID)
	}
	kind := RecoveryJoin
	if bytes.Equal(old.SignatureKey, joiner.SignatureKey) {
		kind = Resync
	} else if slices.ContainsFunc(c.Before.Members, func(m ports.Member) bool { return bytes.Equal(m.SignatureKey, joiner.SignatureKey) }) {
		return 0, refuseExternal(ExternalKey, "installation %x, a member, removes leaf %d of another installation", joiner.SignatureKey, old.LeafIndex)
	}
	if !sameExtensions(c.Before.Extensions, c.After.Extensions) {
		return 0, refuseExternal(ExternalGroupContext, "the group context extensions changed")
	}
	if associated == nil {
		return 0, fmt.Errorf("external commit: no association resolver: %w", ports.ErrInvalidArgument)
	}
	ok, err := associated(joiner.InboxID, joiner.SignatureKey)
	if err != nil {
		return 0, fmt.Errorf("external commit: association of %x with %s: %w", joiner.SignatureKey, joiner.InboxID, err)
	}
	if !ok {
		return 0, refuseExternal(ExternalAssociation, "installation %x is not associated with inbox %s", joiner.SignatureKey, joiner.InboxID)
	}
	return kind, nil
}

func sameExtensions(a, b []ports.Extension) bool {
	return slices.EqualFunc(a, b, func(x, y ports.Extension) bool { return x.Type == y.Type && bytes.Equal(x.Data, y.Data) })
}
