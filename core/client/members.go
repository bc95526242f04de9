package client

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// candidate is an inbox resolved for an add: its identity state, the
// installations whose key packages passed validation and those left out.
type candidate struct {
	inbox    string
	packages keypackage.InboxPackages
}

// resolveForAdd resolves each inbox's newest association state and
// fetches and validates the newest key package of each of its
// installations (JOIN-007, JOIN-008, JOIN-082, JOIN-090, JOIN-072). An
// inbox is added with the installations that pass (JOIN-093); the rest
// are recorded as failed (JOIN-012). An inbox none of whose installations
// passes, and that has none in the group yet, fails with
// [ErrNoInstallations].
func (c *Client) resolveForAdd(ctx context.Context, inboxes []string, present map[string]bool) ([]candidate, error) {
	states, err := c.resolveInboxes(ctx, inboxes)
	if err != nil {
		return nil, fmt.Errorf("add: %w", err)
	}
	v := keypackage.Validator{Engine: c.deps.MLS, Wrappers: c.deps.Algorithms}
	packages, errs := v.FetchInboxes(ctx, c.deps.Transport, states, c.deps.Clock.Now())
	var out []candidate
	for i, inbox := range inboxes {
		st, pk, err := states[i], packages[i], errs[i]
		if err != nil && !errors.Is(err, keypackage.ErrNoUsableInstallation) {
			return nil, fmt.Errorf("add %s: %w", inbox, err)
		}
		inGroup := slices.ContainsFunc(st.InstallationKeys, func(k []byte) bool { return present[string(k)] })
		if err != nil && !inGroup {
			return nil, fmt.Errorf("add %s: %w: %v", inbox, ErrNoInstallations, err)
		}
		for _, f := range pk.Failed {
			c.logger.Info("installation not added", "inbox", inbox, "installation", fmt.Sprintf("%x", f.InstallationKey), "reason", f.Err)
		}
		out = append(out, candidate{inbox: inbox, packages: pk})
	}
	return out, nil
}

// recipientOf is the addressing a sender wraps a Welcome under for a
// validated key package (JOIN-071).
func recipientOf(v keypackage.Validated) join.Recipient {
	return join.Recipient{InstallationKey: v.InstallationKey, Wrapper: v.WrapperAlgorithm,
		WrapperPublicKey: v.WrapperPublicKey, PointeeAEADs: v.PointeeAEADs}
}

// AddMembers adds inboxes to the conversation, each with every
// installation whose key package is valid (JOIN-093), in one commit that
// also records each inbox's identity sequence id and left-out
// installations in GROUP_MEMBERSHIP (JOIN-012). Installations already in
// the group are not added again.
func (cv *Conversation) AddMembers(ctx context.Context, inboxes ...string) error {
	return cv.add(ctx, dedupe(inboxes), nil)
}

// AddViewers adds inboxes to a group as viewers, read-only members
// (COMP-387), as AddMembers adds members. Admins and super admins may; an
// inbox that is already a member changes its role with
// [Conversation.SetRole] instead.
func (cv *Conversation) AddViewers(ctx context.Context, inboxes ...string) error {
	return cv.add(ctx, nil, dedupe(inboxes))
}

// add adds members and viewers in one commit.
func (cv *Conversation) add(ctx context.Context, members, viewers []string) error {
	c := cv.c
	inboxes := dedupe(append(slices.Clone(members), viewers...))
	if len(inboxes) == 0 {
		return nil
	}
	view, err := cv.view(ctx)
	if err != nil {
		return err
	}
	if err := cv.mayAdd(view, inboxes, viewers); err != nil {
		return err
	}
	present := map[string]bool{}
	for _, m := range view.Members {
		present[string(m.SignatureKey)] = true
	}
	cands, err := c.resolveForAdd(ctx, inboxes, present)
	if err != nil {
		return err
	}
	_, err = c.commit(ctx, cv.id, cv.addBuilder(inboxes, viewers, cands))
	return err
}

// addBuilder builds the commit that adds the candidates' usable
// installations not yet in the tree, sets their GROUP_MEMBERSHIP entries
// and lists the viewers among them in the viewer list.
func (cv *Conversation) addBuilder(inboxes, viewers []string, cands []candidate) builder {
	return func(ctx context.Context, tx ports.Tx, view ports.GroupView) (ports.CommitOptions, []join.Recipient, error) {
		if err := cv.mayAdd(view, inboxes, viewers); err != nil {
			return ports.CommitOptions{}, nil, err
		}
		d, err := metadata.FromExtensions(view.Extensions)
		if err != nil {
			return ports.CommitOptions{}, nil, err
		}
		mem, err := d.Membership()
		if err != nil {
			return ports.CommitOptions{}, nil, err
		}
		inTree := map[string]bool{}
		for _, m := range view.Members {
			inTree[string(m.SignatureKey)] = true
		}
		var opts ports.CommitOptions
		var recipients []join.Recipient
		for _, cd := range cands {
			entry := &contentspb.GroupMembershipEntry_V1{SequenceId: cd.packages.State.SequenceID}
			for _, k := range cd.packages.FailedInstallations() {
				if !inTree[string(k)] {
					entry.FailedInstallations = append(entry.FailedInstallations, k)
				}
			}
			for _, v := range cd.packages.Usable {
				if inTree[string(v.InstallationKey)] {
					continue
				}
				opts.Add = append(opts.Add, v.KeyPackage)
				recipients = append(recipients, recipientOf(v))
			}
			mem[cd.inbox] = entry
		}
		if len(opts.Add) == 0 {
			return ports.CommitOptions{}, nil, fmt.Errorf("add: every installation is already a member: %w", ports.ErrAlreadyExists)
		}
		d = d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(mem))
		if len(viewers) > 0 {
			old, _ := d.Viewers()
			d = d.Set(metadata.ComponentViewerList, metadata.EncodeInboxList(dedupe(append(slices.Clone(old), viewers...))))
		}
		opts.GroupContextExtensions, err = d.Apply(view.Extensions)
		if err != nil {
			return ports.CommitOptions{}, nil, err
		}
		return opts, recipients, nil
	}
}

// mayAdd applies the add rule to this installation's own commit: a DM
// adds only its other member; a group's admins and super admins add
// anyone, and so does the creator of a one-shot group, its only super
// admin (COMP-200); any member but a viewer adds its own inbox's
// installations (COMP-389). Viewers are added to a group only, and only
// as inboxes that hold no leaf yet (COMP-387).
func (cv *Conversation) mayAdd(view ports.GroupView, inboxes, viewers []string) error {
	r, err := policy.RolesOf(view)
	if err != nil {
		return err
	}
	me := cv.c.InboxID()
	for _, inbox := range inboxes {
		switch {
		case r.Viewer(me):
			return fmt.Errorf("add %s: %w: a viewer adds no installation", inbox, ErrNotPermitted)
		case inbox == me:
		case r.ConversationType == ports.ConversationDM && slices.Contains(r.DMMembers, inbox):
		case r.ConversationType == ports.ConversationGroup && r.Admin(me):
		case r.ConversationType == ports.ConversationOneshot && r.SuperAdmin(me):
		default:
			return fmt.Errorf("add %s: %w", inbox, ErrNotPermitted)
		}
	}
	for _, inbox := range viewers {
		switch {
		case r.ConversationType != ports.ConversationGroup:
			return fmt.Errorf("add %s as a viewer: %w: only a group has viewers", inbox, ErrNotPermitted)
		case slices.ContainsFunc(view.Members, func(m ports.Member) bool { return m.InboxID == inbox }):
			return fmt.Errorf("add %s as a viewer: already a member, SetRole changes its role: %w", inbox, ports.ErrAlreadyExists)
		}
	}
	return nil
}

// RemoveMembers removes every installation of the given inboxes in one
// commit and drops their GROUP_MEMBERSHIP entries and roles.
func (cv *Conversation) RemoveMembers(ctx context.Context, inboxes ...string) error {
	inboxes = dedupe(inboxes)
	if slices.Contains(inboxes, cv.c.InboxID()) {
		return fmt.Errorf("remove: %w: a member cannot remove its own inbox by commit", ErrNotPermitted)
	}
	_, err := cv.c.commit(ctx, cv.id, func(ctx context.Context, tx ports.Tx, view ports.GroupView) (ports.CommitOptions, []join.Recipient, error) {
		r, err := policy.RolesOf(view)
		if err != nil {
			return ports.CommitOptions{}, nil, err
		}
		me := cv.c.InboxID()
		d, err := metadata.FromExtensions(view.Extensions)
		if err != nil {
			return ports.CommitOptions{}, nil, err
		}
		mem, err := d.Membership()
		if err != nil {
			return ports.CommitOptions{}, nil, err
		}
		var opts ports.CommitOptions
		for _, inbox := range inboxes {
			if r.ConversationType == ports.ConversationDM || !r.Admin(me) || (r.SuperAdmin(inbox) && !r.SuperAdmin(me)) {
				return ports.CommitOptions{}, nil, fmt.Errorf("remove %s: %w", inbox, ErrNotPermitted)
			}
			found := false
			for _, m := range view.Members {
				if m.InboxID == inbox {
					opts.Remove, found = append(opts.Remove, m.LeafIndex), true
				}
			}
			if !found {
				return ports.CommitOptions{}, nil, fmt.Errorf("remove %s: not a member: %w", inbox, ports.ErrNotFound)
			}
			delete(mem, inbox)
		}
		d = d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(mem))
		if r.ConversationType == ports.ConversationGroup {
			d = d.Set(metadata.ComponentSuperAdminList, metadata.EncodeInboxList(without(r.SuperAdmins, inboxes))).
				Set(metadata.ComponentAdminList, metadata.EncodeInboxList(without(r.Admins, inboxes)))
			if _, ok := d.Get(metadata.ComponentViewerList); ok {
				d = d.Set(metadata.ComponentViewerList, metadata.EncodeInboxList(without(r.Viewers, inboxes)))
			}
		}
		if opts.GroupContextExtensions, err = d.Apply(view.Extensions); err != nil {
			return ports.CommitOptions{}, nil, err
		}
		return opts, nil, nil
	})
	return err
}

func without(list, drop []string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(s string) bool { return slices.Contains(drop, s) })
}

// view returns the conversation's current MLS state.
func (cv *Conversation) view(ctx context.Context) (v ports.GroupView, err error) {
	err = cv.c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		v, err = cv.c.deps.MLS.Group(ctx, tx, cv.id)
		return err
	})
	return v, err
}

// Member is one installation of a conversation.
type Member struct {
	InboxID         string
	InstallationKey []byte
	LeafIndex       uint32
}

// Members returns the conversation's installations in leaf order.
func (cv *Conversation) Members(ctx context.Context) ([]Member, error) {
	v, err := cv.view(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Member, len(v.Members))
	for i, m := range v.Members {
		out[i] = Member{InboxID: m.InboxID, InstallationKey: m.SignatureKey, LeafIndex: m.LeafIndex}
	}
	return out, nil
}
