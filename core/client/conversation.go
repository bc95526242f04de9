package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// ProtocolVersion is the protocol version this client implements; a
// group whose minimum protocol version is later is not joined (JOIN-057).
var ProtocolVersion = metadata.Version{Major: 1, Minor: 6, Patch: 0}

// GroupOptions describe a group to create.
type GroupOptions struct {
	// Name is the group's name (component 0x8004).
	Name string
	// Members are inboxes added, with every installation that has a valid
	// key package, by the group's first commit.
	Members []string
	// Admins are inboxes placed in the admin list; the creator is the only
	// super admin.
	Admins []string
	// Viewers are inboxes added, like Members, by the group's first
	// commit, as read-only members (COMP-387).
	Viewers []string
}

// Conversation is a handle on one group or DM the client holds. It reads
// the stored state afresh on every call.
type Conversation struct {
	c  *Client
	id []byte
}

// ID returns the group id.
func (cv *Conversation) ID() []byte { return bytes.Clone(cv.id) }

// Conversation returns a handle on the conversation with that group id,
// or an error wrapping [ports.ErrNotFound]. One-shot groups are not
// conversations (FORK-052) and are never found.
func (c *Client) Conversation(ctx context.Context, groupID []byte) (*Conversation, error) {
	var g ports.Group
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) (err error) {
		g, err = tx.Groups().Get(ctx, groupID)
		return err
	})
	if err != nil {
		return nil, err
	}
	if g.ConversationType == ports.ConversationOneshot {
		return nil, fmt.Errorf("conversation %x: %w", groupID, ports.ErrNotFound)
	}
	return &Conversation{c: c, id: bytes.Clone(groupID)}, nil
}

// Conversations lists the client's groups and DMs, one-shot groups left
// out (FORK-052). A nil consent lists every consent state.
func (c *Client) Conversations(ctx context.Context, consent *ports.ConsentState) ([]*Conversation, error) {
	var gs []ports.Group
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) (err error) {
		gs, err = tx.Groups().List(ctx, ports.GroupFilter{Consent: consent})
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []*Conversation
	for _, g := range gs {
		if g.ConversationType == ports.ConversationGroup || g.ConversationType == ports.ConversationDM {
			out = append(out, &Conversation{c: c, id: g.ID})
		}
	}
	return out, nil
}

// DM returns the DM with peerInbox, or an error wrapping
// [ports.ErrNotFound].
func (c *Client) DM(ctx context.Context, peerInbox string) (*Conversation, error) {
	dmID := metadata.DMID(c.InboxID(), peerInbox)
	dm := ports.ConversationDM
	var found []byte
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		gs, err := tx.Groups().List(ctx, ports.GroupFilter{ConversationType: &dm})
		for _, g := range gs {
			if g.DMID == dmID && (found == nil || g.Active) {
				found = g.ID
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, fmt.Errorf("dm with %s: %w", peerInbox, ports.ErrNotFound)
	}
	return &Conversation{c: c, id: found}, nil
}

// CreateGroup creates a group with this installation as its creator and
// only super admin, then adds opts.Members in one commit.
func (c *Client) CreateGroup(ctx context.Context, opts GroupOptions) (*Conversation, error) {
	d := metadata.Dictionary{}.
		Set(metadata.ComponentConversationType, metadata.EncodeConversationType(ports.ConversationGroup)).
		Set(metadata.ComponentSuperAdminList, metadata.EncodeInboxList([]string{c.InboxID()})).
		Set(metadata.ComponentAdminList, metadata.EncodeInboxList(dedupe(opts.Admins))).
		Set(metadata.ComponentName, []byte(opts.Name))
	cv, err := c.create(ctx, ports.ConversationGroup, "", d)
	if err != nil {
		return nil, err
	}
	viewers := withoutInbox(dedupe(opts.Viewers), c.InboxID())
	members := withoutInbox(dedupe(opts.Members), c.InboxID())
	members = slices.DeleteFunc(members, func(m string) bool { return slices.Contains(viewers, m) })
	if err := cv.addInitial(ctx, members, viewers); err != nil {
		return cv, fmt.Errorf("create group: %w", err)
	}
	return cv, nil
}

// addInitial adds members and this inbox's other installations to a
// conversation just created, in one commit. An inbox of this client whose
// other installations have no usable key package is not a failure: they
// stay listed as failed installations (JOIN-012). The viewers are added
// in the same commit, as viewers.
func (cv *Conversation) addInitial(ctx context.Context, members, viewers []string) error {
	own, err := cv.c.ownAssociation(ctx)
	if err != nil {
		return err
	}
	if len(own.InstallationKeys) > 1 {
		members = append(members, cv.c.InboxID())
	}
	if len(members)+len(viewers) == 0 {
		return nil
	}
	err = cv.add(ctx, members, viewers)
	if errors.Is(err, ports.ErrAlreadyExists) {
		return nil // nothing to add: the other installations have no usable key package
	}
	return err
}

// CreateDM returns the DM with peerInbox, creating it (and adding the
// peer) when the client holds none. Both members are publishers of its
// commit log (COMP-090).
func (c *Client) CreateDM(ctx context.Context, peerInbox string) (*Conversation, error) {
	if peerInbox == c.InboxID() {
		return nil, fmt.Errorf("create dm: %w: a DM needs another inbox", ErrNotPermitted)
	}
	if cv, err := c.DM(ctx, peerInbox); err == nil {
		// A DM whose first add of the peer failed (an unavailable
		// service, an identity lookup denied) gets that add again.
		if ms, err := cv.Members(ctx); err == nil && !slices.ContainsFunc(ms, func(m Member) bool { return m.InboxID == peerInbox }) {
			if err := cv.addInitial(ctx, []string{peerInbox}, nil); err != nil {
				return cv, fmt.Errorf("create dm: %w", err)
			}
		}
		return cv, nil
	} else if !errors.Is(err, ports.ErrNotFound) {
		return nil, err
	}
	d := metadata.Dictionary{}.
		Set(metadata.ComponentConversationType, metadata.EncodeConversationType(ports.ConversationDM)).
		Set(metadata.ComponentDMMembers, metadata.EncodeDMMembers(c.InboxID(), peerInbox))
	cv, err := c.create(ctx, ports.ConversationDM, metadata.DMID(c.InboxID(), peerInbox), d)
	if err != nil {
		return nil, err
	}
	if err := cv.addInitial(ctx, []string{peerInbox}, nil); err != nil {
		return cv, fmt.Errorf("create dm: %w", err)
	}
	return cv, nil
}

// create makes a group of type ct: a fresh group root names it (COMP-030),
// the metadata d gets the immutable components (COMP-011), the role
// policy version (COMP-385) and the creator's membership entry, and the
// group record, the engine state and
// the commit log's membership start commit together.
func (c *Client) create(ctx context.Context, ct ports.ConversationType, dmID string, d metadata.Dictionary) (*Conversation, error) {
	root := make([]byte, 32)
	if _, err := rand.Read(root); err != nil {
		return nil, fmt.Errorf("create: group root: %w", err)
	}
	keys, err := commitlog.DeriveKeys(root)
	if err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	own, err := c.ownAssociation(ctx)
	if err != nil {
		return nil, fmt.Errorf("create: own identity: %w", err)
	}
	var failed [][]byte
	for _, k := range own.InstallationKeys {
		if !bytes.Equal(k, c.InstallationKey()) {
			failed = append(failed, k)
		}
	}
	d = d.Set(metadata.ComponentCreatorInbox, []byte(c.InboxID())).
		Set(metadata.ComponentGroupRootKey, root).
		Set(metadata.ComponentMinProtocol, []byte(ProtocolVersion.String())).
		Set(metadata.ComponentPolicyVersion, metadata.EncodePolicyVersion(policy.Version)).
		Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(map[string]*contentspb.GroupMembershipEntry_V1{
			c.InboxID(): {SequenceId: own.SequenceID, FailedInstallations: failed},
		}))
	ext, err := d.Extension()
	if err != nil {
		return nil, fmt.Errorf("create: metadata: %w", err)
	}
	leaf, err := c.leafBundle(ctx)
	if err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	now := c.deps.Clock.Now()
	err = c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		view, err := c.deps.MLS.CreateGroup(ctx, tx, keys.GroupID, leaf, []ports.Extension{ext})
		if err != nil {
			return err
		}
		g := ports.Group{ID: keys.GroupID, ConversationType: ct, DMID: dmID, Consent: ports.ConsentAllowed,
			Active: true, GroupRoot: root, MinProtocolVersion: ProtocolVersion.String(), CreatedAt: now, UpdatedAt: now}
		if err := tx.Groups().Insert(ctx, g); err != nil {
			return err
		}
		return c.log.BeginMembership(ctx, tx, keys.GroupID, view, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	c.wakeWorkers()
	return &Conversation{c: c, id: keys.GroupID}, nil
}

// leafBundle creates the key package whose leaf node becomes this
// installation's leaf in a group it creates. It is never published.
func (c *Client) leafBundle(ctx context.Context) (ports.KeyPackageBundle, error) {
	cred, err := proto.Marshal(&contentspb.MlsCredential{InboxId: c.InboxID()})
	if err != nil {
		return ports.KeyPackageBundle{}, err
	}
	now := c.deps.Clock.Now()
	b, err := c.deps.MLS.CreateKeyPackage(ctx, ports.KeyPackageOptions{
		Credential: cred, SignaturePrivateKey: c.deps.Installation.InstallationKey.Seed(),
		NotBefore: now.Add(-notBeforeSkew), NotAfter: now.Add(c.opts.KeyPackageLifetime),
		CapabilityExtensions: keypackage.CapabilityExtensions(), CapabilityProposals: keypackage.CapabilityProposals(),
	})
	if err != nil {
		return ports.KeyPackageBundle{}, fmt.Errorf("leaf: %w", err)
	}
	return b, nil
}

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func withoutInbox(s []string, inbox string) []string {
	return slices.DeleteFunc(slices.Clone(s), func(v string) bool { return v == inbox })
}
