package policy

import (
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

// Viewers are a group's read-only members (COMP-387): inboxes in the
// viewer list (0x8011). A viewer reads the group and updates its own
// leaf; it sends no application message but a leave request, commits no
// change, and proposes nothing another member's commit could carry but
// an update of its own leaf or its own SelfRemove.

// Viewer reports whether inbox is a viewer. A DM has no viewers.
func (r Roles) Viewer(inbox string) bool {
	return r.ConversationType != ports.ConversationDM && slices.Contains(r.Viewers, inbox)
}

// MaySend reports whether inbox may send an application message of kind
// kind in a group with roles r (COMP-388): a viewer sends leave requests
// only (ADR-0030 Decision 7), everyone else anything. Receivers discard
// what it refuses, judging the sender's leaf; the delivery service may
// refuse it by the authenticated installation's inbox. A refusal wraps
// [ErrMessageNotPermitted].
func MaySend(r Roles, inbox string, kind ports.MessageKind) error {
	if r.Viewer(inbox) && kind != ports.MessageLeaveRequest {
		return fmt.Errorf("%w: %s is a viewer and sends leave requests only, not kind %d", ErrMessageNotPermitted, inbox, kind)
	}
	return nil
}

// checkViewerCommit applies COMP-389 to a member's commit: a viewer's
// commit updates the viewer's own leaf and nothing else — no proposal,
// no membership or metadata change (an empty or path-only commit).
func checkViewerCommit(r Roles, c Commit, ch Change) error {
	by := c.Sender.InboxID
	if c.SenderType != ports.SenderMember || !r.Viewer(by) {
		return nil
	}
	switch {
	case len(c.Proposals) > 0:
		return fmt.Errorf("%w: viewer %s committed %d proposals; a viewer's commit only updates its own leaf", ErrNotPermitted, by, len(c.Proposals))
	case len(ch.Added)+len(ch.Removed)+len(ch.Readded) > 0:
		return fmt.Errorf("%w: viewer %s changed the membership", ErrNotPermitted, by)
	case len(ch.Components) > 0 || ch.OtherExtensions:
		return fmt.Errorf("%w: viewer %s changed the group context", ErrNotPermitted, by)
	}
	return nil
}

// mayChangeViewers judges a change of the viewer list (COMP-387): super
// admins change anyone's role; a commit that adds an inbox's first leaf
// may list it as a viewer (its committer may add it, which the add rules
// judge), and one that removes an inbox's last leaf drops it from the
// list (the removal rules judge that).
func mayChangeViewers(r Roles, after ports.GroupView, ch Change, by string) error {
	if !slices.Contains(ch.Components, metadata.ComponentViewerList) || r.SuperAdmin(by) {
		return nil
	}
	if r.ConversationType == ports.ConversationDM || r.Viewer(by) {
		return fmt.Errorf("%w: %s may not change the viewer list", ErrNotPermitted, by)
	}
	d, err := metadata.FromExtensions(after.Extensions)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotPermitted, err)
	}
	now, _ := d.Viewers()
	for _, v := range now {
		if !slices.Contains(r.Viewers, v) && !slices.Contains(ch.AddedInboxes, v) {
			return fmt.Errorf("%w: %s may not make member %s a viewer", ErrNotPermitted, by, v)
		}
	}
	for _, v := range r.Viewers {
		if !slices.Contains(now, v) && !slices.Contains(ch.RemovedInboxes, v) {
			return fmt.Errorf("%w: %s may not change the role of viewer %s", ErrNotPermitted, by, v)
		}
	}
	return nil
}

// checkViewers keeps the roles apart after a commit (COMP-387): the
// viewer list names only inboxes that hold a leaf, none of them an admin
// or a super admin, and a DM has none.
func checkViewers(ct ports.ConversationType, after ports.GroupView) error {
	d, err := metadata.FromExtensions(after.Extensions)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotPermitted, err)
	}
	if _, ok := d.Get(metadata.ComponentViewerList); !ok {
		return nil
	}
	if ct == ports.ConversationDM {
		return fmt.Errorf("%w: a DM carries a viewer list", ErrNotPermitted)
	}
	viewers, err := d.Viewers()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotPermitted, err)
	}
	sa, _ := d.SuperAdmins()
	admins, _ := d.Admins()
	for _, v := range viewers {
		if !slices.ContainsFunc(after.Members, func(m ports.Member) bool { return m.InboxID == v }) {
			return fmt.Errorf("%w: viewer %s holds no leaf", ErrNotPermitted, v)
		}
		if slices.Contains(sa, v) || slices.Contains(admins, v) {
			return fmt.Errorf("%w: viewer %s is also an admin", ErrNotPermitted, v)
		}
	}
	return nil
}
