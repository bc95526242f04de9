package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
)

// Info is a conversation's record and metadata as this installation holds
// them.
type Info struct {
	ID               []byte
	ConversationType ports.ConversationType
	DMID             string
	Name             string
	Creator          string
	SuperAdmins      []string
	Admins           []string
	// Viewers are the group's read-only members (COMP-387).
	Viewers []string
	// PolicyVersion is the role policy version the group states, 1 for a
	// group that states none (COMP-386).
	PolicyVersion uint16
	// DMMembers are the two inboxes of a DM.
	DMMembers          []string
	MinProtocolVersion string
	Consent            ports.ConsentState
	Active             bool
	Epoch              uint64
	// Cursor is the sequence id of the last envelope processed on the
	// group's topic.
	Cursor uint64
	// EpochAuthenticator identifies the encryption state (RFC 9420 §8).
	EpochAuthenticator []byte
}

// Info returns the conversation's record and metadata.
func (cv *Conversation) Info(ctx context.Context) (Info, error) {
	var info Info
	err := cv.c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		g, err := tx.Groups().Get(ctx, cv.id)
		if err != nil {
			return err
		}
		v, err := cv.c.deps.MLS.Group(ctx, tx, cv.id)
		if err != nil {
			return err
		}
		info = Info{ID: g.ID, ConversationType: g.ConversationType, DMID: g.DMID, Consent: g.Consent, Active: g.Active,
			Epoch: v.Epoch, Cursor: g.Cursor, EpochAuthenticator: v.EpochAuthenticator, MinProtocolVersion: g.MinProtocolVersion}
		d, err := metadata.FromExtensions(v.Extensions)
		if err != nil {
			return nil
		}
		info.Name, _ = d.Name()
		info.Creator, _ = d.CreatorInbox()
		info.SuperAdmins, _ = d.SuperAdmins()
		info.Admins, _ = d.Admins()
		info.Viewers, _ = d.Viewers()
		info.PolicyVersion, _ = policy.VersionOf(v)
		if one, two, err := d.DMMembers(); err == nil {
			info.DMMembers = []string{one, two}
		}
		return nil
	})
	return info, err
}

// SetName changes the group's name. Admins and super admins may.
func (cv *Conversation) SetName(ctx context.Context, name string) error {
	return cv.updateMetadata(ctx, func(d metadata.Dictionary, r policy.Roles) (metadata.Dictionary, error) {
		if err := r.MayChange(metadata.ComponentName, cv.c.InboxID()); err != nil {
			return d, fmt.Errorf("%w: %v", ErrNotPermitted, err)
		}
		return d.Set(metadata.ComponentName, []byte(name)), nil
	})
}

// SetAdmins replaces the admin list; a viewer it lists becomes an admin.
// Super admins may.
func (cv *Conversation) SetAdmins(ctx context.Context, inboxes ...string) error {
	return cv.setList(ctx, metadata.ComponentAdminList, dedupe(inboxes))
}

// SetSuperAdmins replaces the super admin list, which must stay non-empty;
// a viewer it lists becomes a super admin. Super admins may.
func (cv *Conversation) SetSuperAdmins(ctx context.Context, inboxes ...string) error {
	inboxes = dedupe(inboxes)
	if len(inboxes) == 0 {
		return fmt.Errorf("set super admins: %w: a group keeps at least one", ErrNotPermitted)
	}
	return cv.setList(ctx, metadata.ComponentSuperAdminList, inboxes)
}

func (cv *Conversation) setList(ctx context.Context, id uint16, inboxes []string) error {
	return cv.updateMetadata(ctx, func(d metadata.Dictionary, r policy.Roles) (metadata.Dictionary, error) {
		if err := r.MayChange(id, cv.c.InboxID()); err != nil {
			return d, fmt.Errorf("%w: %v", ErrNotPermitted, err)
		}
		mem, err := d.Membership()
		if err != nil {
			return d, err
		}
		for _, inbox := range inboxes {
			if _, ok := mem[inbox]; !ok {
				return d, fmt.Errorf("%s is not a member: %w", inbox, ports.ErrNotFound)
			}
		}
		d = d.Set(id, metadata.EncodeInboxList(slices.Clone(inboxes)))
		// Roles are exclusive (COMP-387): a viewer listed as an admin is
		// a viewer no more.
		if slices.ContainsFunc(inboxes, r.Viewer) {
			d = d.Set(metadata.ComponentViewerList, metadata.EncodeInboxList(without(r.Viewers, inboxes)))
		}
		return d, nil
	})
}

// updateMetadata commits a change of the group's metadata components.
func (cv *Conversation) updateMetadata(ctx context.Context, fn func(metadata.Dictionary, policy.Roles) (metadata.Dictionary, error)) error {
	_, err := cv.c.commit(ctx, cv.id, func(ctx context.Context, tx ports.Tx, view ports.GroupView) (ports.CommitOptions, []join.Recipient, error) {
		r, err := policy.RolesOf(view)
		if err != nil {
			return ports.CommitOptions{}, nil, err
		}
		d, err := metadata.FromExtensions(view.Extensions)
		if err != nil {
			return ports.CommitOptions{}, nil, err
		}
		if d, err = fn(d, r); err != nil {
			return ports.CommitOptions{}, nil, err
		}
		exts, err := d.Apply(view.Extensions)
		if err != nil {
			return ports.CommitOptions{}, nil, err
		}
		return ports.CommitOptions{GroupContextExtensions: exts}, nil, nil
	})
	return err
}

// UpdateKeys commits an update of this installation's own leaf (a commit
// with a path and no proposal), which any member may.
func (cv *Conversation) UpdateKeys(ctx context.Context) error {
	_, err := cv.c.commit(ctx, cv.id, func(context.Context, ports.Tx, ports.GroupView) (ports.CommitOptions, []join.Recipient, error) {
		return ports.CommitOptions{ForcePath: true}, nil, nil
	})
	return err
}

// SetConsent records the user's consent for the conversation (CONS). The
// commit log reads only allowed conversations (FORK-030).
func (cv *Conversation) SetConsent(ctx context.Context, state ports.ConsentState) error {
	err := cv.c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		return tx.Groups().Update(ctx, cv.id, func(g *ports.Group) error {
			g.Consent = state
			return nil
		})
	})
	if err == nil && state == ports.ConsentAllowed {
		cv.c.logDue(cv.id)
	}
	return err
}
