package policy

import (
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

// Commit is a commit as the policy judges it.
type Commit struct {
	// Before and After are the group's states before and after the commit.
	Before, After ports.GroupView
	// Sender is the committer's leaf and SenderType its sender type.
	Sender     ports.Member
	SenderType ports.SenderType
	// Proposals are the commit's proposals, inline and by reference, with
	// their proposers.
	Proposals []ports.Proposal
	// SequenceID is the commit's sequence id on the group's topic, zero
	// when it is not known yet (a committer checking its own commit).
	SequenceID uint64
}

// Check applies the permission rules (COMP-180 to COMP-183), the
// immutability of 0xBFxx components (COMP-012), the receiver-side
// rules of COMP-244 to COMP-248 (proposals judged by their proposers,
// leaves that keep their credential, the GROUP_MEMBERSHIP entries and the
// super admin list) and the role policy version and viewer rules of
// COMP-385 to COMP-389 to a commit whose change ch was computed by
// [Diff]. A state before or after the commit that states a role policy
// version this package does not know is an [*UnknownVersionError]
// (wrapping [ErrUnknownVersion]); every other violation wraps
// ErrNotPermitted. Either makes the commit invalid under GMOD-021 for
// every member.
func Check(c Commit, ch Change) error {
	before, after, sender, kind := c.Before, c.After, c.Sender, c.SenderType
	if err := checkVersions(before, after); err != nil { // COMP-386
		return err
	}
	r, err := RolesOf(before)
	if err != nil {
		return fmt.Errorf("%w: group metadata: %v", ErrNotPermitted, err)
	}
	if kind != ports.SenderMember {
		return fmt.Errorf("%w: a commit by sender type %d, not a member", ErrNotPermitted, kind)
	}
	if ch.OtherExtensions {
		return fmt.Errorf("%w: group context extensions other than the app_data_dictionary changed", ErrNotPermitted)
	}
	for _, id := range ch.Components {
		if id&0xFF00 == 0xBF00 { // COMP-012
			return fmt.Errorf("%w: immutable component 0x%04x changed", ErrNotPermitted, id)
		}
	}
	if err := checkByReference(r, before, c.Proposals); err != nil {
		return err
	}
	if err := checkCredentials(before, after, c.Proposals); err != nil {
		return err
	}
	by := sender.InboxID
	if err := checkViewerCommit(r, c, ch); err != nil { // COMP-389
		return err
	}
	for _, m := range ch.Readded {
		if !r.MayReadd(by) {
			return fmt.Errorf("%w: %s may not readd installation %x", ErrNotPermitted, by, m.SignatureKey)
		}
	}
	for _, m := range ch.Added {
		if err := r.mayAdd(by, m, slices.Contains(ch.AddedInboxes, by)); err != nil {
			return err
		}
	}
	for _, m := range ch.Removed {
		if err := r.mayRemove(by, m); err != nil {
			return err
		}
	}
	for _, id := range ch.Components {
		if id == metadata.ComponentViewerList {
			continue // mayChangeViewers judges it
		}
		if err := r.MayChange(id, by); err != nil {
			return err
		}
	}
	if err := mayChangeViewers(r, after, ch, by); err != nil { // COMP-387
		return err
	}
	if err := checkSuperAdmins(r.ConversationType, after); err != nil {
		return err
	}
	if err := checkViewers(r.ConversationType, after); err != nil {
		return err
	}
	if err := checkMembershipComponent(after, ch); err != nil {
		return err
	}
	return checkMembershipEntries(c, ch)
}

// checkMembershipComponent requires GROUP_MEMBERSHIP to name exactly the
// inboxes that hold a leaf after the commit, so that a joiner can check
// the membership (JOIN-049, JOIN-053).
func checkMembershipComponent(after ports.GroupView, ch Change) error {
	d, err := metadata.FromExtensions(after.Extensions)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotPermitted, err)
	}
	mem, err := d.Membership()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotPermitted, err)
	}
	leaves := map[string]bool{}
	for _, m := range after.Members {
		leaves[m.InboxID] = true
		if _, ok := mem[m.InboxID]; !ok {
			return fmt.Errorf("%w: GROUP_MEMBERSHIP has no entry for member %s", ErrNotPermitted, m.InboxID)
		}
	}
	for inbox, e := range mem {
		if !leaves[inbox] {
			return fmt.Errorf("%w: GROUP_MEMBERSHIP names %s, which holds no leaf", ErrNotPermitted, inbox)
		}
		if e.GetSequenceId() == 0 {
			return fmt.Errorf("%w: GROUP_MEMBERSHIP entry of %s has identity sequence id 0", ErrNotPermitted, inbox)
		}
	}
	return nil
}
