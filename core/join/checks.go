package join

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// checkMembership applies section 8: the GROUP_MEMBERSHIP component names
// exact identity state for every leaf's inbox (JOIN-049, JOIN-050), the
// state resolves (JOIN-051, JOIN-059), and leaves and associated
// installations account for each other in both directions (JOIN-052,
// JOIN-053); an adder of the own inbox is a current installation
// (JOIN-095). It reads the staged state only, which is what installs
// (JOIN-054).
func (r *Receiver) checkMembership(ctx context.Context, c *candidate) error {
	members, err := c.dict.Membership()
	if err != nil {
		return reject("JOIN-049", "%v", err)
	}
	leaves := map[string][][]byte{}
	for _, m := range c.staged.Group.Members {
		if _, ok := members[m.InboxID]; m.InboxID == "" || !ok {
			return reject("JOIN-049", "GROUP_MEMBERSHIP has no entry for the inbox %q of leaf %d", m.InboxID, m.LeafIndex)
		}
		leaves[m.InboxID] = append(leaves[m.InboxID], m.SignatureKey)
	}
	inboxes := make([]string, 0, len(members))
	for inbox, e := range members {
		if e.GetSequenceId() == 0 || e.GetSequenceId() >= c.o.seq {
			return reject("JOIN-050", "the identity reference %d of %q is 0 or not below the welcome's sequence id %d", e.GetSequenceId(), inbox, c.o.seq)
		}
		inboxes = append(inboxes, inbox)
	}
	sort.Strings(inboxes)
	state, err := r.resolver(ctx, inboxes, members)
	if err != nil {
		return local(err)
	}
	for i, inbox := range inboxes {
		e := members[inbox]
		st, err := state(i)
		switch {
		case errors.Is(err, ports.ErrNotFound):
			return reject("JOIN-059", "inbox %q has no identity update at %d: %v", inbox, e.GetSequenceId(), err)
		case err != nil:
			return local(err)
		}
		for _, k := range leaves[inbox] {
			if !containsKey(st.InstallationKeys, k) {
				return reject("JOIN-052", "leaf key %x is not an installation of %q at %d", short(k), inbox, e.GetSequenceId())
			}
		}
		for _, k := range st.InstallationKeys {
			if !containsKey(leaves[inbox], k) && !containsKey(e.GetFailedInstallations(), k) {
				return reject("JOIN-053", "installation %x of %q is neither a leaf nor listed as failed", short(k), inbox)
			}
		}
	}
	own := r.o.Installation.InboxID
	if c.adder.InboxID == own {
		v, err := r.ids.do(ctx, own+"@newest", r.o.IdentityTimeout, func(ctx context.Context) (any, error) {
			return r.o.Identity.Newest(ctx, own)
		})
		st, _ := v.(ports.AssociationState)
		if err != nil && !errors.Is(err, ports.ErrNotFound) {
			return local(err)
		}
		if !containsKey(st.InstallationKeys, c.adder.SignatureKey) {
			return reject("JOIN-095", "the adder %x is not a current installation of the own inbox", short(c.adder.SignatureKey))
		}
	}
	return nil
}

// resolver returns the association state of inboxes[i] at its
// membership entry's sequence id. When the identity answers many at once
// ([ports.BatchIdentity]) every inbox is resolved in one call here, and an
// error is that call's failure; otherwise each inbox is resolved when its
// check asks for it.
func (r *Receiver) resolver(ctx context.Context, inboxes []string, members map[string]*contentspb.GroupMembershipEntry_V1) (func(i int) (ports.AssociationState, error), error) {
	b, ok := r.o.Identity.(ports.BatchIdentity)
	if !ok {
		return func(i int) (ports.AssociationState, error) {
			inbox, seq := inboxes[i], members[inboxes[i]].GetSequenceId()
			v, err := r.ids.do(ctx, fmt.Sprintf("%s@%d", inbox, seq), r.o.IdentityTimeout, func(ctx context.Context) (any, error) {
				return r.o.Identity.AssociationState(ctx, inbox, seq)
			})
			st, _ := v.(ports.AssociationState)
			return st, err
		}, nil
	}
	reqs := make([]ports.IdentityRequest, len(inboxes))
	// The lookup's key names the whole request set by a hash: at 10,000
	// members the list itself is hundreds of kilobytes, and the key is
	// what a slow lookup's error reports.
	h := sha256.New()
	for i, inbox := range inboxes {
		reqs[i] = ports.IdentityRequest{InboxID: inbox, SequenceID: members[inbox].GetSequenceId()}
		fmt.Fprintf(h, "%s@%d;", inbox, reqs[i].SequenceID)
	}
	key := fmt.Sprintf("of %d inboxes (set %x)", len(inboxes), h.Sum(nil)[:12])
	v, err := r.ids.do(ctx, key, r.o.IdentityTimeout, func(ctx context.Context) (any, error) {
		return b.AssociationStates(ctx, reqs)
	})
	if err != nil {
		return nil, err
	}
	res, _ := v.([]ports.IdentityResult)
	if len(res) != len(reqs) {
		return nil, fmt.Errorf("identity answered %d of %d requests", len(res), len(reqs))
	}
	return func(i int) (ports.AssociationState, error) { return res[i].State, res[i].Err }, nil
}

func containsKey(keys [][]byte, k []byte) bool {
	return slices.ContainsFunc(keys, func(x []byte) bool { return bytes.Equal(x, k) })
}

// checkGroup applies section 9: the conversation kind's properties
// (JOIN-060, COMP-166), the joiner's own leaf (JOIN-058), the group root
// (JOIN-083), then, because only an upgrade changes it, the minimum
// protocol version (JOIN-057), and last the role policy version
// (COMP-386): a group whose minimum version this client meets but whose
// policy version it does not know is refused for good.
func (r *Receiver) checkGroup(c *candidate) error {
	if err := r.checkKind(c); err != nil {
		return err
	}
	ownKey := []byte(r.o.Installation.PublicKey())
	if !slices.ContainsFunc(c.staged.Group.Members, func(m ports.Member) bool { return bytes.Equal(m.SignatureKey, ownKey) }) {
		return reject("JOIN-058", "no leaf of the ratchet tree is this installation")
	}
	root, err := c.dict.GroupRootKey()
	if err != nil {
		return reject("JOIN-083", "%v", err)
	}
	keys, err := commitlog.DeriveKeys(root)
	if err != nil || !bytes.Equal(keys.GroupID, c.staged.Group.GroupID) {
		return reject("JOIN-083", "the group root does not name group %x", short(c.staged.Group.GroupID))
	}
	c.root = root
	v, ok, err := c.dict.MinProtocolVersion()
	switch {
	case err != nil:
		return reject("JOIN-060", "minimum protocol version: %v", err)
	case ok && v.Compare(r.o.ProtocolVersion) > 0:
		return hold(HoldVersion, "JOIN-057", "the group needs protocol version %v; this client is %v", v, r.o.ProtocolVersion)
	case ok:
		c.minVer = v.String()
	}
	if _, err := policy.VersionOf(c.staged.Group); err != nil {
		return reject("COMP-386", "%w", err)
	}
	return nil
}

// checkViewers applies COMP-387 to a group a Welcome carries: its viewer
// list, when it has one, names only inboxes that hold a leaf and none
// that is an admin, or no commit after the join could be valid.
func checkViewers(d metadata.Dictionary, leafInboxes map[string]bool) error {
	viewers, err := d.Viewers()
	switch {
	case errors.Is(err, metadata.ErrMissing):
		return nil
	case err != nil:
		return reject("JOIN-060", "%v", err)
	}
	supers, _ := d.SuperAdmins()
	admins, _ := d.Admins()
	for _, v := range viewers {
		if !leafInboxes[v] || slices.Contains(supers, v) || slices.Contains(admins, v) {
			return reject("JOIN-060", "viewer %q holds no leaf or is also an admin", v)
		}
	}
	return nil
}

// checkKind applies JOIN-060 with the properties COMP-166 gives each
// conversation kind.
func (r *Receiver) checkKind(c *candidate) error {
	d, own := c.dict, r.o.Installation.InboxID
	leafInboxes := map[string]bool{}
	for _, m := range c.staged.Group.Members {
		leafInboxes[m.InboxID] = true
	}
	members, _ := d.Membership()
	_, hasDM := d.Get(metadata.ComponentDMMembers)
	_, hasOneshot := d.Get(metadata.ComponentOneshotMessage)
	switch c.ct {
	case ports.ConversationGroup:
		if hasDM || hasOneshot {
			return reject("JOIN-060", "a group carries DM_MEMBERS or ONESHOT_MESSAGE")
		}
		if admins, err := d.SuperAdmins(); err != nil || len(admins) == 0 {
			return reject("JOIN-060", "a group without a super admin list (%v)", err)
		}
		if err := checkViewers(d, leafInboxes); err != nil {
			return err
		}
	case ports.ConversationOneshot:
		if hasDM {
			return reject("JOIN-060", "a one-shot group carries DM_MEMBERS")
		}
		if m, err := d.OneshotMessage(); err != nil || m.GetMessageType() == nil {
			return reject("JOIN-060", "a one-shot group without a message it can act on (%v)", err)
		}
	case ports.ConversationDM:
		one, two, _ := d.DMMembers()
		if one == two || (one != own && two != own) {
			return reject("JOIN-060", "DM_MEMBERS %q and %q are not this inbox and one other", one, two)
		}
		for inbox := range leafInboxes {
			if inbox != one && inbox != two {
				return reject("JOIN-060", "the DM has a leaf of %q, not one of its two members", inbox)
			}
		}
		for inbox := range members {
			if inbox != one && inbox != two {
				return reject("JOIN-060", "the DM's membership names %q", inbox)
			}
		}
		if admins, err := d.SuperAdmins(); err == nil && len(admins) > 0 {
			return reject("JOIN-060", "a DM carries a super admin list")
		}
		if admins, err := d.Admins(); err == nil && len(admins) > 0 {
			return reject("JOIN-060", "a DM carries an admin list")
		}
		if hasOneshot {
			return reject("JOIN-060", "a DM carries ONESHOT_MESSAGE")
		}
		if _, ok := d.Get(metadata.ComponentViewerList); ok {
			return reject("JOIN-060", "a DM carries a viewer list")
		}
	case ports.ConversationSync:
		for inbox := range leafInboxes {
			if inbox != own {
				return reject("JOIN-060", "the sync group has a leaf of %q", inbox)
			}
		}
		for inbox := range members {
			if inbox != own {
				return reject("JOIN-060", "the sync group's membership names %q", inbox)
			}
		}
		if hasDM || hasOneshot {
			return reject("JOIN-060", "a sync group carries DM_MEMBERS or ONESHOT_MESSAGE")
		}
	}
	return nil
}
