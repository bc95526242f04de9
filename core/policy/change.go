package policy

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

// Change is what a commit does to a group, as every member (and, with
// commit acceptance, the delivery service) judges it for permissions
// (COMP-180 to COMP-183); the client also reports it in events.
type Change struct {
	// Added and Removed are leaves (installations) by signature key;
	// Readded are installations removed and added back by the commit.
	Added, Removed, Readded []ports.Member
	// AddedInboxes and RemovedInboxes are inboxes that gained their first
	// leaf or lost their last one.
	AddedInboxes, RemovedInboxes []string
	// Components lists the metadata components whose data changed.
	Components []uint16
	// OtherExtensions reports a change to a group context extension other
	// than the app_data_dictionary.
	OtherExtensions bool
	// AddedSuperAdmins are inboxes the commit put in the super admin list.
	AddedSuperAdmins []string
}

// Diff computes the change a commit with the given proposals makes
// from before to after. An installation a Remove proposal removes and an
// Add proposal adds back, by signature key, is a readd (FORK-089,
// COMP-183); the rest of the membership change is read from the two trees.
func Diff(before, after ports.GroupView, proposals []ports.Proposal) (Change, error) {
	var ch Change
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
			ch.Readded = append(ch.Readded, p.Added)
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
			ch.Added = append(ch.Added, m)
		}
	}
	for _, m := range before.Members {
		if !inAfter[string(m.SignatureKey)] {
			ch.Removed = append(ch.Removed, m)
		}
	}
	for inbox := range inboxAfter {
		if inboxBefore[inbox] == 0 {
			ch.AddedInboxes = append(ch.AddedInboxes, inbox)
		}
	}
	for inbox := range inboxBefore {
		if inboxAfter[inbox] == 0 {
			ch.RemovedInboxes = append(ch.RemovedInboxes, inbox)
		}
	}
	slices.Sort(ch.AddedInboxes)
	slices.Sort(ch.RemovedInboxes)
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
			ch.Components = append(ch.Components, id)
		}
	}
	slices.Sort(ch.Components)
	ch.OtherExtensions = !sameOtherExtensions(before.Extensions, after.Extensions)
	oldSA, _ := db.SuperAdmins()
	newSA, _ := da.SuperAdmins()
	for _, s := range newSA {
		if !slices.Contains(oldSA, s) {
			ch.AddedSuperAdmins = append(ch.AddedSuperAdmins, s)
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

// Class returns the change classification the commit log keeps for
// legacy recovery (FORK-086).
func (ch Change) Class() ports.ChangeClass {
	switch {
	case slices.ContainsFunc(ch.Components, func(id uint16) bool {
		return id == metadata.ComponentSuperAdminList || id == metadata.ComponentAdminList
	}):
		return ports.ChangePermissions
	case len(ch.Added)+len(ch.Removed)+len(ch.Readded) > 0:
		return ports.ChangeMembership
	case len(ch.Components) > 0 || ch.OtherExtensions:
		return ports.ChangeMetadata
	}
	return ports.ChangeKeyUpdate
}
