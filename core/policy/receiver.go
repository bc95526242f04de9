package policy

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

// checkByReference judges each proposal a commit includes by reference by
// its proposer's role, as if the proposer had committed it alone
// (COMP-244): a member cannot borrow the committer's authority by
// proposing what it may not commit. Only a member's proposals are
// accepted by reference, and of those only the kinds [AllowedByReference]
// names.
func checkByReference(r Roles, before ports.GroupView, ps []ports.Proposal) error {
	for _, p := range ps {
		if !p.ByReference {
			continue
		}
		if err := allowedByReference(r, before, p); err != nil {
			return err
		}
	}
	return nil
}

// AllowedByReference reports whether a commit may include p, a proposal
// another member sent on its own in the epoch of before, by reference
// (COMP-244). A committer that includes only such proposals makes no
// honest commit invalid by what another member proposed.
func AllowedByReference(before ports.GroupView, p ports.Proposal) bool {
	r, err := RolesOf(before)
	return err == nil && allowedByReference(r, before, p) == nil
}

func allowedByReference(r Roles, before ports.GroupView, p ports.Proposal) error {
	if p.SenderType != ports.SenderMember {
		return fmt.Errorf("%w: a proposal by reference from sender type %d, not a member", ErrNotPermitted, p.SenderType)
	}
	by := p.Sender.InboxID
	switch p.Type {
	case ports.ProposalSelfRemove:
		return nil // its proposer leaves; any member may commit it
	case ports.ProposalUpdate:
		return nil // the proposer's own leaf; checkCredentials judges it
	case ports.ProposalRemove:
		return r.mayRemove(by, p.Removed)
	case ports.ProposalAdd:
		return r.mayAdd(by, p.Added, !slices.ContainsFunc(before.Members, func(m ports.Member) bool { return m.InboxID == by }))
	case ports.ProposalGroupContextExtensions:
		ch, err := Diff(before, ports.GroupView{Members: before.Members, Extensions: p.Extensions}, nil)
		if err != nil {
			return fmt.Errorf("%w: proposed extensions: %v", ErrNotPermitted, err)
		}
		if ch.OtherExtensions {
			return fmt.Errorf("%w: %s proposed a change to extensions other than the app_data_dictionary", ErrNotPermitted, by)
		}
		for _, id := range ch.Components {
			if id&0xFF00 == 0xBF00 {
				return fmt.Errorf("%w: %s proposed a change to immutable component 0x%04x", ErrNotPermitted, by, id)
			}
			if err := r.MayChange(id, by); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%w: a proposal of type %d by reference", ErrNotPermitted, p.Type)
}

// checkCredentials keeps every leaf's credential across updates
// (COMP-246): a leaf the commit does not remove keeps its inbox and its
// signature key, which is its installation key, so a key update — the
// committer's path or an Update proposal — can never put a leaf under
// another inbox.
func checkCredentials(before, after ports.GroupView, ps []ports.Proposal) error {
	removed := map[uint32]bool{}
	for _, p := range ps {
		if p.Type == ports.ProposalRemove || p.Type == ports.ProposalSelfRemove {
			removed[p.Removed.LeafIndex] = true
		}
	}
	was := map[uint32]ports.Member{}
	for _, m := range before.Members {
		was[m.LeafIndex] = m
	}
	for _, m := range after.Members {
		old, ok := was[m.LeafIndex]
		if !ok || removed[m.LeafIndex] {
			continue // a new leaf: an Add, which the add rules judge
		}
		if old.InboxID != m.InboxID || !bytes.Equal(old.SignatureKey, m.SignatureKey) {
			return fmt.Errorf("%w: leaf %d changed from inbox %s key %x to inbox %s key %x", ErrNotPermitted,
				m.LeafIndex, old.InboxID, short(old.SignatureKey), m.InboxID, short(m.SignatureKey))
		}
	}
	return nil
}

func short(b []byte) []byte {
	if len(b) > 8 {
		return b[:8]
	}
	return b
}

// checkSuperAdmins keeps a group governable (COMP-248): after a commit
// its super admin list is not empty and names only inboxes that hold a
// leaf, as joiners require (JOIN-060).
func checkSuperAdmins(ct ports.ConversationType, after ports.GroupView) error {
	if ct == ports.ConversationDM {
		return nil
	}
	d, err := metadata.FromExtensions(after.Extensions)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotPermitted, err)
	}
	sa, err := d.SuperAdmins()
	if err != nil || len(sa) == 0 {
		return fmt.Errorf("%w: the super admin list is empty or unreadable after the commit", ErrNotPermitted)
	}
	for _, inbox := range sa {
		if !slices.ContainsFunc(after.Members, func(m ports.Member) bool { return m.InboxID == inbox }) {
			return fmt.Errorf("%w: super admin %s holds no leaf", ErrNotPermitted, inbox)
		}
	}
	return nil
}

// checkMembershipEntries lets a commit change an inbox's GROUP_MEMBERSHIP
// entry only as its operation requires (COMP-247): the inboxes whose
// installations it adds, removes or readds, and the committer's own
// (a refresh). An entry's identity sequence id never moves back, and it
// is below the commit's own sequence id, so that it names an identity
// update that existed when the commit was published and every later
// Welcome passes JOIN-050.
func checkMembershipEntries(c Commit, ch Change) error {
	db, err := metadata.FromExtensions(c.Before.Extensions)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotPermitted, err)
	}
	da, err := metadata.FromExtensions(c.After.Extensions)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotPermitted, err)
	}
	old, err := db.Membership()
	if err != nil {
		old = nil // a group created without the component: every entry is new
	}
	cur, err := da.Membership()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotPermitted, err)
	}
	touched := map[string]bool{c.Sender.InboxID: true}
	for _, ms := range [][]ports.Member{ch.Added, ch.Removed, ch.Readded} {
		for _, m := range ms {
			touched[m.InboxID] = true
		}
	}
	for inbox, e := range cur {
		o, had := old[inbox]
		if had && o.GetSequenceId() == e.GetSequenceId() && slices.EqualFunc(o.GetFailedInstallations(), e.GetFailedInstallations(), bytes.Equal) {
			continue
		}
		if !touched[inbox] {
			return fmt.Errorf("%w: GROUP_MEMBERSHIP entry of %s changed by a commit that does not change its installations", ErrNotPermitted, inbox)
		}
		if had && e.GetSequenceId() < o.GetSequenceId() {
			return fmt.Errorf("%w: GROUP_MEMBERSHIP entry of %s moved back from %d to %d", ErrNotPermitted, inbox, o.GetSequenceId(), e.GetSequenceId())
		}
		if c.SequenceID != 0 && e.GetSequenceId() >= c.SequenceID {
			return fmt.Errorf("%w: GROUP_MEMBERSHIP entry of %s names identity sequence id %d, not before the commit's %d", ErrNotPermitted, inbox, e.GetSequenceId(), c.SequenceID)
		}
	}
	return nil
}
