package client

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

// change is what a commit does to a group, as the client judges it for
// permissions (COMP-180 to COMP-183) and reports it in events.
type change struct {
	// added and removed are leaves (installations) by signature key;
	// readded are installations removed and added back by the commit.
	added, removed, readded []ports.Member
	// addedInboxes and removedInboxes are inboxes that gained their first
	// leaf or lost their last one.
	addedInboxes, removedInboxes []string
	// components lists the metadata components whose data changed.
	components []uint16
	// otherExtensions reports a change to a group context extension other
	// than the app_data_dictionary.
	otherExtensions bool
	// addedSuperAdmins are inboxes the commit put in the super admin list.
	addedSuperAdmins []string
}

// diffViews computes the change a commit with the given proposals makes
// from before to after. An installation a Remove proposal removes and an
// Add proposal adds back, by signature key, is a readd (FORK-089,
// COMP-183); the rest of the membership change is read from the two trees.
func diffViews(before, after ports.GroupView, proposals []ports.Proposal) (change, error) {
	var ch change
	removedKeys := map[string]bool{}
	for _, p := range proposals {
		if p.Type == ports.ProposalRemove {
			removedKeys[string(p.Removed.SignatureKey)] = true
		}
	}
	readded := map[string]bool{}
	for _, p := range proposals {
		if p.Type == ports.ProposalAdd && removedKeys[string(p.Added.SignatureKey)] {
			readded[string(p.Added.SignatureKey)] = true
			ch.readded = append(ch.readded, p.Added)
		}
	}
	inBefore := map[string]bool{}
	inboxBefore, inboxAfter := map[string]int{}, map[string]int{}
	for _, m := range before.Members {
		inBefore[string(m.SignatureKey)] = true
		inboxBefore[m.InboxID]++
	}
	inAfter := map[string]bool{}
	for _, m := range after.Members {
		inboxAfter[m.InboxID]++
		inAfter[string(m.SignatureKey)] = true
		if !inBefore[string(m.SignatureKey)] {
			ch.added = append(ch.added, m)
		}
	}
	for _, m := range before.Members {
		if !inAfter[string(m.SignatureKey)] {
			ch.removed = append(ch.removed, m)
		}
	}
	for inbox := range inboxAfter {
		if inboxBefore[inbox] == 0 {
			ch.addedInboxes = append(ch.addedInboxes, inbox)
		}
	}
	for inbox := range inboxBefore {
		if inboxAfter[inbox] == 0 {
			ch.removedInboxes = append(ch.removedInboxes, inbox)
		}
	}
	slices.Sort(ch.addedInboxes)
	slices.Sort(ch.removedInboxes)
	db, errB := metadata.FromExtensions(before.Extensions)
	da, errA := metadata.FromExtensions(after.Extensions)
	if errA != nil {
		return ch, fmt.Errorf("metadata after the commit: %w", errA)
	}
	if errB != nil {
		return ch, fmt.Errorf("metadata before the commit: %w", errB)
	}
	ids := map[uint16]bool{}
	for _, c := range db.Components {
		ids[c.ID] = true
	}
	for _, c := range da.Components {
		ids[c.ID] = true
	}
	for id := range ids {
		b, okB := db.Get(id)
		a, okA := da.Get(id)
		if okA != okB || !bytes.Equal(a, b) {
			ch.components = append(ch.components, id)
		}
	}
	slices.Sort(ch.components)
	ch.otherExtensions = !sameOtherExtensions(before.Extensions, after.Extensions)
	oldSA, _ := db.SuperAdmins()
	newSA, _ := da.SuperAdmins()
	for _, s := range newSA {
		if !slices.Contains(oldSA, s) {
			ch.addedSuperAdmins = append(ch.addedSuperAdmins, s)
		}
	}
	return ch, nil
}

func sameOtherExtensions(a, b []ports.Extension) bool {
	strip := func(es []ports.Extension) []ports.Extension {
		return slices.DeleteFunc(slices.Clone(es), func(e ports.Extension) bool { return e.Type == metadata.ExtensionAppDataDictionary })
	}
	a, b = strip(a), strip(b)
	return slices.EqualFunc(a, b, func(x, y ports.Extension) bool { return x.Type == y.Type && bytes.Equal(x.Data, y.Data) })
}

// class returns the change classification the commit log keeps for
// legacy recovery (FORK-086).
func (ch change) class() ports.ChangeClass {
	switch {
	case slices.ContainsFunc(ch.components, func(id uint16) bool {
		return id == metadata.ComponentSuperAdminList || id == metadata.ComponentAdminList
	}):
		return ports.ChangePermissions
	case len(ch.added)+len(ch.removed)+len(ch.readded) > 0:
		return ports.ChangeMembership
	case len(ch.components) > 0 || ch.otherExtensions:
		return ports.ChangeMetadata
	}
	return ports.ChangeKeyUpdate
}

// errPermission is wrapped by every permission failure.
var errPermission = errors.New("commit not permitted")

// roles are the inbox roles of a group state.
type roles struct {
	ct                  ports.ConversationType
	superAdmins, admins []string
	dmMembers           []string
}

func rolesOf(view ports.GroupView) (roles, error) {
	d, err := metadata.FromExtensions(view.Extensions)
	if err != nil {
		return roles{}, err
	}
	var r roles
	if r.ct, err = d.ConversationType(); err != nil {
		return roles{}, err
	}
	switch r.ct {
	case ports.ConversationDM:
		one, two, err := d.DMMembers()
		if err != nil {
			return roles{}, err
		}
		r.dmMembers = []string{one, two}
	default:
		r.superAdmins, _ = d.SuperAdmins()
		r.admins, _ = d.Admins()
	}
	return r, nil
}

func (r roles) superAdmin(inbox string) bool { return slices.Contains(r.superAdmins, inbox) }
func (r roles) admin(inbox string) bool {
	return r.superAdmin(inbox) || slices.Contains(r.admins, inbox)
}

// mayReadd reports the readd exception (GMOD-052): super admins of a
// group and members of a DM may remove and re-add one installation.
func (r roles) mayReadd(inbox string) bool {
	if r.ct == ports.ConversationDM {
		return slices.Contains(r.dmMembers, inbox)
	}
	return r.superAdmin(inbox)
}

// checkCommit applies the permission rules (COMP-180 to COMP-183) and the
// immutability of 0xBFxx components (COMP-012) to a commit by sender that
// takes the group from before to after. A violation wraps errPermission
// and makes the commit invalid under GMOD-021.
func checkCommit(before, after ports.GroupView, sender ports.Member, kind ports.SenderType, ch change) error {
	r, err := rolesOf(before)
	if err != nil {
		return fmt.Errorf("%w: group metadata: %v", errPermission, err)
	}
	if kind != ports.SenderMember {
		return fmt.Errorf("%w: a commit by sender type %d, not a member", errPermission, kind)
	}
	if ch.otherExtensions {
		return fmt.Errorf("%w: group context extensions other than the app_data_dictionary changed", errPermission)
	}
	for _, id := range ch.components {
		if id&0xFF00 == 0xBF00 { // COMP-012
			return fmt.Errorf("%w: immutable component 0x%04x changed", errPermission, id)
		}
	}
	by := sender.InboxID
	for _, m := range ch.readded {
		if !r.mayReadd(by) {
			return fmt.Errorf("%w: %s may not readd installation %x", errPermission, by, m.SignatureKey)
		}
	}
	for _, m := range ch.added {
		if m.InboxID == by && !slices.Contains(ch.addedInboxes, by) {
			continue // a member adds its own inbox's installations
		}
		if r.ct == ports.ConversationDM {
			if !slices.Contains(r.dmMembers, m.InboxID) {
				return fmt.Errorf("%w: %s is not a member of this DM", errPermission, m.InboxID)
			}
			continue
		}
		if !r.admin(by) {
			return fmt.Errorf("%w: %s may not add members", errPermission, by)
		}
	}
	for _, m := range ch.removed {
		switch {
		case m.InboxID == by:
			// a member removes its own inbox's other installations
		case r.ct == ports.ConversationDM:
			return fmt.Errorf("%w: a DM member may not remove %s", errPermission, m.InboxID)
		case r.superAdmin(m.InboxID) && !r.superAdmin(by):
			return fmt.Errorf("%w: %s may not remove super admin %s", errPermission, by, m.InboxID)
		case !r.admin(by):
			return fmt.Errorf("%w: %s may not remove members", errPermission, by)
		}
	}
	for _, id := range ch.components {
		if err := r.mayChange(id, by); err != nil {
			return err
		}
	}
	return checkMembershipComponent(after, ch)
}

// mayChange applies the metadata rules: the admin lists and the minimum
// protocol version are the super admins' (or, in a DM, its members'); the
// name is the admins'; GROUP_MEMBERSHIP follows the membership change and
// is checked by checkMembershipComponent.
func (r roles) mayChange(id uint16, by string) error {
	switch id {
	case metadata.ComponentGroupMembership:
		return nil
	case metadata.ComponentSuperAdminList, metadata.ComponentAdminList, metadata.ComponentMinProtocol:
		if r.ct == ports.ConversationDM && id == metadata.ComponentMinProtocol && slices.Contains(r.dmMembers, by) {
			return nil
		}
		if r.superAdmin(by) {
			return nil
		}
	case metadata.ComponentName:
		if r.ct != ports.ConversationDM && r.admin(by) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s may not change component 0x%04x", errPermission, by, id)
}

// checkMembershipComponent requires GROUP_MEMBERSHIP to name exactly the
// inboxes that hold a leaf after the commit, so that a joiner can check
// the membership (JOIN-049, JOIN-053).
func checkMembershipComponent(after ports.GroupView, ch change) error {
	d, err := metadata.FromExtensions(after.Extensions)
	if err != nil {
		return fmt.Errorf("%w: %v", errPermission, err)
	}
	mem, err := d.Membership()
	if err != nil {
		return fmt.Errorf("%w: %v", errPermission, err)
	}
	leaves := map[string]bool{}
	for _, m := range after.Members {
		leaves[m.InboxID] = true
		if _, ok := mem[m.InboxID]; !ok {
			return fmt.Errorf("%w: GROUP_MEMBERSHIP has no entry for member %s", errPermission, m.InboxID)
		}
	}
	for inbox, e := range mem {
		if !leaves[inbox] {
			return fmt.Errorf("%w: GROUP_MEMBERSHIP names %s, which holds no leaf", errPermission, inbox)
		}
		if e.GetSequenceId() == 0 {
			return fmt.Errorf("%w: GROUP_MEMBERSHIP entry of %s has identity sequence id 0", errPermission, inbox)
		}
	}
	return nil
}
