package policy

import (
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

// Check applies the permission rules (COMP-180 to COMP-183) and the
// immutability of 0xBFxx components (COMP-012) to a commit by sender that
// takes the group from before to after. A violation wraps ErrNotPermitted
// and makes the commit invalid under GMOD-021.
func Check(before, after ports.GroupView, sender ports.Member, kind ports.SenderType, ch Change) error {
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
	by := sender.InboxID
	for _, m := range ch.Readded {
		if !r.MayReadd(by) {
			return fmt.Errorf("%w: %s may not readd installation %x", ErrNotPermitted, by, m.SignatureKey)
		}
	}
	for _, m := range ch.Added {
		if m.InboxID == by && !slices.Contains(ch.AddedInboxes, by) {
			continue // a member adds its own inbox's installations
		}
		if r.ConversationType == ports.ConversationDM {
			if !slices.Contains(r.DMMembers, m.InboxID) {
				return fmt.Errorf("%w: %s is not a member of this DM", ErrNotPermitted, m.InboxID)
			}
			continue
		}
		if !r.Admin(by) {
			return fmt.Errorf("%w: %s may not add members", ErrNotPermitted, by)
		}
	}
	for _, m := range ch.Removed {
		switch {
		case m.InboxID == by:
			// a member removes its own inbox's other installations
		case r.ConversationType == ports.ConversationDM:
			return fmt.Errorf("%w: a DM member may not remove %s", ErrNotPermitted, m.InboxID)
		case r.SuperAdmin(m.InboxID) && !r.SuperAdmin(by):
			return fmt.Errorf("%w: %s may not remove super admin %s", ErrNotPermitted, by, m.InboxID)
		case !r.Admin(by):
			return fmt.Errorf("%w: %s may not remove members", ErrNotPermitted, by)
		}
	}
	for _, id := range ch.Components {
		if err := r.MayChange(id, by); err != nil {
			return err
		}
	}
	return checkMembershipComponent(after, ch)
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
