package policy

import (
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

// Roles are the inbox roles of a group state.
type Roles struct {
	ConversationType    ports.ConversationType
	SuperAdmins, Admins []string
	// Viewers are the read-only members (COMP-387); a DM has none.
	Viewers []string
	// DMMembers are a DM's two inboxes.
	DMMembers []string
}

// RolesOf reads the roles of a group state from its metadata.
func RolesOf(view ports.GroupView) (Roles, error) {
	d, err := metadata.FromExtensions(view.Extensions)
	if err != nil {
		return Roles{}, err
	}
	var r Roles
	if r.ConversationType, err = d.ConversationType(); err != nil {
		return Roles{}, err
	}
	switch r.ConversationType {
	case ports.ConversationDM:
		one, two, err := d.DMMembers()
		if err != nil {
			return Roles{}, err
		}
		r.DMMembers = []string{one, two}
	default:
		r.SuperAdmins, _ = d.SuperAdmins()
		r.Admins, _ = d.Admins()
		r.Viewers, _ = d.Viewers()
	}
	return r, nil
}

// SuperAdmin reports whether inbox is a super admin.
func (r Roles) SuperAdmin(inbox string) bool { return slices.Contains(r.SuperAdmins, inbox) }

// Admin reports whether inbox is an admin or a super admin.
func (r Roles) Admin(inbox string) bool {
	return r.SuperAdmin(inbox) || slices.Contains(r.Admins, inbox)
}

// MayReadd reports the readd exception (GMOD-052): super admins of a
// group and members of a DM may remove and re-add one installation.
func (r Roles) MayReadd(inbox string) bool {
	if r.ConversationType == ports.ConversationDM {
		return slices.Contains(r.DMMembers, inbox)
	}
	return r.SuperAdmin(inbox)
}

// MayChange applies the metadata rules: the admin lists, the viewer list,
// the minimum protocol version and the role policy version are the super
// admins' (or, in a DM, the two versions are its members'); the name is
// the admins'; GROUP_MEMBERSHIP follows the membership change and is
// checked by checkMembershipComponent. A viewer changes nothing
// (COMP-389). Within a commit, an admin's add or removal may also change
// the viewer list as [Check] allows (COMP-387).
func (r Roles) MayChange(id uint16, by string) error {
	if r.Viewer(by) {
		return fmt.Errorf("%w: viewer %s may not change component 0x%04x", ErrNotPermitted, by, id)
	}
	switch id {
	case metadata.ComponentGroupMembership:
		return nil
	case metadata.ComponentSuperAdminList, metadata.ComponentAdminList, metadata.ComponentViewerList,
		metadata.ComponentMinProtocol, metadata.ComponentPolicyVersion:
		dmVersion := id == metadata.ComponentMinProtocol || id == metadata.ComponentPolicyVersion
		if r.ConversationType == ports.ConversationDM && dmVersion && slices.Contains(r.DMMembers, by) {
			return nil
		}
		if r.SuperAdmin(by) {
			return nil
		}
	case metadata.ComponentName:
		if r.ConversationType != ports.ConversationDM && r.Admin(by) {
			return nil
		}
	case metadata.ComponentSuccessor: // COMP-483: a move to a new group
		if r.ConversationType == ports.ConversationGroup && r.SuperAdmin(by) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s may not change component 0x%04x", ErrNotPermitted, by, id)
}

// mayAdd applies the add rules to by adding the installation m; newInbox
// reports that by's own inbox gains its first leaf in the same commit.
func (r Roles) mayAdd(by string, m ports.Member, newInbox bool) error {
	switch {
	case r.Viewer(by):
		return fmt.Errorf("%w: viewer %s may not add installations", ErrNotPermitted, by)
	case m.InboxID == by && !newInbox:
		return nil // a member adds its own inbox's installations
	case r.ConversationType == ports.ConversationDM:
		if !slices.Contains(r.DMMembers, m.InboxID) {
			return fmt.Errorf("%w: %s is not a member of this DM", ErrNotPermitted, m.InboxID)
		}
		return nil
	case !r.Admin(by):
		return fmt.Errorf("%w: %s may not add members", ErrNotPermitted, by)
	}
	return nil
}

// mayRemove applies the removal rules to by removing the installation m.
func (r Roles) mayRemove(by string, m ports.Member) error {
	switch {
	case r.Viewer(by):
		return fmt.Errorf("%w: viewer %s may not remove installations", ErrNotPermitted, by)
	case m.InboxID == by:
		return nil // a member removes its own inbox's other installations
	case r.ConversationType == ports.ConversationDM:
		return fmt.Errorf("%w: a DM member may not remove %s", ErrNotPermitted, m.InboxID)
	case r.SuperAdmin(m.InboxID) && !r.SuperAdmin(by):
		return fmt.Errorf("%w: %s may not remove super admin %s", ErrNotPermitted, by, m.InboxID)
	case !r.Admin(by):
		return fmt.Errorf("%w: %s may not remove members", ErrNotPermitted, by)
	}
	return nil
}
