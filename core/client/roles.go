package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
)

// Role is a member inbox's role in a group (COMP-180, COMP-387). Each
// inbox holds exactly one.
type Role int

const (
	// RoleViewer reads the group and updates its own keys; it sends no
	// message and commits no change (COMP-388, COMP-389).
	RoleViewer Role = iota + 1
	// RoleMember sends messages and adds and removes its own
	// installations.
	RoleMember
	// RoleAdmin also adds and removes members and renames the group.
	RoleAdmin
	// RoleSuperAdmin also changes roles, the admin lists and the versions
	// the group states.
	RoleSuperAdmin
)

func (r Role) String() string {
	switch r {
	case RoleViewer:
		return "viewer"
	case RoleMember:
		return "member"
	case RoleAdmin:
		return "admin"
	case RoleSuperAdmin:
		return "super admin"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// roleOf returns inbox's role under roles r.
func roleOf(r policy.Roles, inbox string) Role {
	switch {
	case r.SuperAdmin(inbox):
		return RoleSuperAdmin
	case r.Admin(inbox):
		return RoleAdmin
	case r.Viewer(inbox):
		return RoleViewer
	}
	return RoleMember
}

// Role returns the role of a member inbox of the group as this
// installation holds it, or an error wrapping [ports.ErrNotFound] when
// the inbox holds no leaf.
func (cv *Conversation) Role(ctx context.Context, inbox string) (Role, error) {
	v, err := cv.view(ctx)
	if err != nil {
		return 0, err
	}
	if !slices.ContainsFunc(v.Members, func(m ports.Member) bool { return m.InboxID == inbox }) {
		return 0, fmt.Errorf("role of %s: not a member: %w", inbox, ports.ErrNotFound)
	}
	r, err := policy.RolesOf(v)
	if err != nil {
		return 0, err
	}
	return roleOf(r, inbox), nil
}

// SetRole gives a member inbox of a group the role role, in one commit
// that moves it between the super admin, admin and viewer lists. Super
// admins may; the group keeps at least one super admin.
func (cv *Conversation) SetRole(ctx context.Context, inbox string, role Role) error {
	if role < RoleViewer || role > RoleSuperAdmin {
		return fmt.Errorf("set role: %v: %w", role, ports.ErrInvalidArgument)
	}
	return cv.updateMetadata(ctx, func(d metadata.Dictionary, r policy.Roles) (metadata.Dictionary, error) {
		if r.ConversationType != ports.ConversationGroup {
			return d, fmt.Errorf("set role: %w: only a group has roles", ErrNotPermitted)
		}
		if err := r.MayChange(metadata.ComponentViewerList, cv.c.InboxID()); err != nil {
			return d, fmt.Errorf("set role: %w: %v", ErrNotPermitted, err)
		}
		mem, err := d.Membership()
		if err != nil {
			return d, err
		}
		if _, ok := mem[inbox]; !ok {
			return d, fmt.Errorf("set role: %s is not a member: %w", inbox, ports.ErrNotFound)
		}
		one := []string{inbox}
		supers, admins, viewers := without(r.SuperAdmins, one), without(r.Admins, one), without(r.Viewers, one)
		switch role {
		case RoleSuperAdmin:
			supers = append(supers, inbox)
		case RoleAdmin:
			admins = append(admins, inbox)
		case RoleViewer:
			viewers = append(viewers, inbox)
		}
		if len(supers) == 0 {
			return d, fmt.Errorf("set role: %w: a group keeps at least one super admin", ErrNotPermitted)
		}
		return setRoleLists(d, supers, admins, viewers), nil
	})
}

// setRoleLists writes the three role lists, each only when its content
// changes, so that a commit touches no component it does not change.
func setRoleLists(d metadata.Dictionary, supers, admins, viewers []string) metadata.Dictionary {
	for _, l := range []struct {
		id      uint16
		read    func() ([]string, error)
		inboxes []string
	}{
		{metadata.ComponentSuperAdminList, d.SuperAdmins, supers},
		{metadata.ComponentAdminList, d.Admins, admins},
		{metadata.ComponentViewerList, d.Viewers, viewers},
	} {
		old, err := l.read()
		if err == nil && slices.Equal(old, l.inboxes) || err != nil && len(l.inboxes) == 0 {
			continue
		}
		d = d.Set(l.id, metadata.EncodeInboxList(slices.Clone(l.inboxes)))
	}
	return d
}
