// Package rogue is a hostile member for end-to-end tests: a real regroup
// client whose engine it reaches directly, to publish what the member's
// own client refuses to send — forbidden commits that its client then
// merges, as a patched client would. Build the member with
// world.Config{MLS: rogue.Engine}. Honest members are expected to refuse
// each act identically and carry on; the tests of the role policy
// (core/policy) and of commit acceptance drive it.
package rogue

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"slices"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// Member is a world member acting as a rogue.
type Member struct{ *world.Member }

// Of returns m as a rogue.
func Of(m *world.Member) Member { return Member{m} }

// Engine wraps a member's engine (a [*mlsfault.Engine], as world builds
// it) so that the member's own client merges the member's own commits
// whatever they change: it shows the client, for an own commit read back,
// a staged state without the change, so the client's policy passes it,
// while the engine merges the real one. The client then records the
// commit as applied, with the epoch authenticator the rest of the group
// never reaches.
func Engine(m ports.MLS) ports.MLS { return &engine{m.(*mlsfault.Engine)} }

type engine struct{ *mlsfault.Engine }

func (e *engine) Process(ctx context.Context, tx ports.Tx, groupID, msg []byte) (ports.Processed, error) {
	p, err := e.Engine.Process(ctx, tx, groupID, msg)
	if err != nil || !p.Own || p.Staged == nil {
		return p, err
	}
	before, err := e.Engine.Group(ctx, tx, groupID)
	if err != nil {
		return p, err
	}
	staged := *p.Staged
	staged.Extensions, staged.Members = before.Extensions, before.Members
	p.Staged, p.Proposals = &staged, nil
	return p, nil
}

// Commit builds a commit of the group with opts on the member's engine,
// pending there, and publishes it on the group's topic; the member's
// client reads it back and, through [Engine], merges it. It returns the
// commit's sequence id.
func (r Member) Commit(groupID []byte, opts func(v ports.GroupView) (ports.CommitOptions, error)) (uint64, error) {
	ctx := r.W.Ctx
	var commit []byte
	err := r.Store.Tx(ctx, func(tx ports.Tx) error {
		v, err := r.Engine.Group(ctx, tx, groupID)
		if err != nil {
			return err
		}
		o, err := opts(v)
		if err != nil {
			return err
		}
		out, err := r.Engine.Commit(ctx, tx, groupID, o)
		if err != nil {
			return err
		}
		commit = out.Commit
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("rogue commit: %w", err)
	}
	return r.publish(groupID, commit, "rogue commit")
}

// metadataCommit commits a change of the group's metadata dictionary.
func (r Member) metadataCommit(groupID []byte, edit func(metadata.Dictionary) (metadata.Dictionary, error)) (uint64, error) {
	return r.Commit(groupID, func(v ports.GroupView) (ports.CommitOptions, error) {
		d, err := metadata.FromExtensions(v.Extensions)
		if err != nil {
			return ports.CommitOptions{}, err
		}
		if d, err = edit(d); err != nil {
			return ports.CommitOptions{}, err
		}
		exts, err := d.Apply(v.Extensions)
		return ports.CommitOptions{GroupContextExtensions: exts}, err
	})
}

// Rename renames the group.
func (r Member) Rename(groupID []byte, name string) (uint64, error) {
	return r.metadataCommit(groupID, func(d metadata.Dictionary) (metadata.Dictionary, error) {
		return d.Set(metadata.ComponentName, []byte(name)), nil
	})
}

// SetSuperAdmins replaces the super admin list, empty included.
func (r Member) SetSuperAdmins(groupID []byte, inboxes ...string) (uint64, error) {
	return r.metadataCommit(groupID, func(d metadata.Dictionary) (metadata.Dictionary, error) {
		return d.Set(metadata.ComponentSuperAdminList, metadata.EncodeInboxList(inboxes)), nil
	})
}

// RewriteMembership sets the identity sequence id of inbox's
// GROUP_MEMBERSHIP entry.
func (r Member) RewriteMembership(groupID []byte, inbox string, seq uint64) (uint64, error) {
	return r.metadataCommit(groupID, func(d metadata.Dictionary) (metadata.Dictionary, error) {
		m, err := d.Membership()
		if err != nil {
			return d, err
		}
		e, ok := m[inbox]
		if !ok {
			return d, fmt.Errorf("no GROUP_MEMBERSHIP entry for %s", inbox)
		}
		m[inbox] = &contentspb.GroupMembershipEntry_V1{SequenceId: seq, FailedInstallations: e.GetFailedInstallations()}
		return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(m)), nil
	})
}

// Remove removes every leaf of inbox.
func (r Member) Remove(groupID []byte, inbox string) (uint64, error) {
	return r.Commit(groupID, func(v ports.GroupView) (ports.CommitOptions, error) {
		var leaves []uint32
		for _, m := range v.Members {
			if m.InboxID == inbox {
				leaves = append(leaves, m.LeafIndex)
			}
		}
		if len(leaves) == 0 {
			return ports.CommitOptions{}, fmt.Errorf("%s holds no leaf", inbox)
		}
		return ports.CommitOptions{Remove: leaves}, nil
	})
}

// Add adds the installation whose newest key package the delivery service
// serves, without touching GROUP_MEMBERSHIP.
func (r Member) Add(groupID, installationKey []byte) (uint64, error) {
	kp, err := r.keyPackageOf(installationKey)
	if err != nil {
		return 0, fmt.Errorf("rogue add: %w", err)
	}
	return r.Commit(groupID, func(v ports.GroupView) (ports.CommitOptions, error) {
		return ports.CommitOptions{Add: [][]byte{kp}}, nil
	})
}

// Holds reports whether the view's tree holds a leaf of inbox.
func Holds(v ports.GroupView, inbox string) bool {
	return slices.ContainsFunc(v.Members, func(m ports.Member) bool { return m.InboxID == inbox })
}

// SameMembers reports whether two views hold the same leaves.
func SameMembers(a, b ports.GroupView) bool {
	return slices.EqualFunc(a.Members, b.Members, func(x, y ports.Member) bool {
		return x.LeafIndex == y.LeafIndex && x.InboxID == y.InboxID && bytes.Equal(x.SignatureKey, y.SignatureKey)
	})
}

// Propose publishes a standalone proposal of the group (the member's own
// client never sends one) and returns its sequence id.
func (r Member) Propose(groupID []byte, opts func(v ports.GroupView) (ports.ProposalOptions, error)) (uint64, error) {
	ctx := r.W.Ctx
	var msg []byte
	err := r.Store.Tx(ctx, func(tx ports.Tx) error {
		v, err := r.Engine.Group(ctx, tx, groupID)
		if err != nil {
			return err
		}
		o, err := opts(v)
		if err != nil {
			return err
		}
		msg, err = r.Engine.Propose(ctx, tx, groupID, o)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("rogue proposal: %w", err)
	}
	return r.publish(groupID, msg, "rogue proposal")
}

// ProposeRemove proposes removing every leaf of inbox (one proposal per
// leaf; the first is returned).
func (r Member) ProposeRemove(groupID []byte, inbox string) (uint64, error) {
	return r.Propose(groupID, func(v ports.GroupView) (ports.ProposalOptions, error) {
		for _, m := range v.Members {
			if m.InboxID == inbox {
				l := m.LeafIndex
				return ports.ProposalOptions{Remove: &l}, nil
			}
		}
		return ports.ProposalOptions{}, fmt.Errorf("%s holds no leaf", inbox)
	})
}

// ProposeMetadata proposes a change of the group's metadata dictionary.
func (r Member) ProposeMetadata(groupID []byte, edit func(metadata.Dictionary) metadata.Dictionary) (uint64, error) {
	return r.Propose(groupID, func(v ports.GroupView) (ports.ProposalOptions, error) {
		d, err := metadata.FromExtensions(v.Extensions)
		if err != nil {
			return ports.ProposalOptions{}, err
		}
		exts, err := edit(d).Apply(v.Extensions)
		return ports.ProposalOptions{GroupContextExtensions: exts}, err
	})
}

// ProposeAdd proposes adding the installation whose newest key package
// the delivery service serves.
func (r Member) ProposeAdd(groupID, installationKey []byte) (uint64, error) {
	kp, err := r.keyPackageOf(installationKey)
	if err != nil {
		return 0, fmt.Errorf("rogue proposal: %w", err)
	}
	return r.Propose(groupID, func(ports.GroupView) (ports.ProposalOptions, error) { return ports.ProposalOptions{Add: kp}, nil })
}

// ExternalCommit joins the group by an external commit built on the
// group's current GroupInfo, read from the member's own engine, with a
// leaf whose credential names inbox and whose signature key is the
// member's installation key; resync also removes the member's own leaf
// (RFC 9420 §12.4.3.2). It publishes the commit and returns its sequence
// id.
func (r Member) ExternalCommit(groupID []byte, inbox string, resync bool) (uint64, error) {
	ctx := r.W.Ctx
	rec, err := r.keyPackageUnder(inbox, r.C.Identity().InstallationKey)
	if err != nil {
		return 0, fmt.Errorf("rogue external commit: key package: %w", err)
	}
	var commit []byte
	err = r.Store.Tx(ctx, func(tx ports.Tx) error {
		gi, err := r.Engine.GroupInfo(ctx, tx, groupID)
		if err != nil {
			return err
		}
		out, err := r.Engine.JoinExternal(ctx, tx, gi, ports.ExternalJoinOptions{Resync: resync,
			KeyPackage: ports.KeyPackageBundle{KeyPackage: rec.KeyPackage, Ref: rec.Ref, InitPrivateKey: rec.InitPrivateKey,
				EncryptionPrivateKey: rec.EncryptionPrivateKey}})
		commit = out.Commit
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("rogue external commit: %w", err)
	}
	return r.publish(groupID, commit, "rogue external commit")
}

// AddUnder adds a leaf whose credential names inbox and whose signature
// key is a fresh key that inbox never associated: a device placed under
// another member's identity (GMOD-012).
func (r Member) AddUnder(groupID []byte, inbox string) (uint64, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return 0, err
	}
	rec, err := r.keyPackageUnder(inbox, key)
	if err != nil {
		return 0, fmt.Errorf("rogue add: key package: %w", err)
	}
	return r.Commit(groupID, func(ports.GroupView) (ports.CommitOptions, error) {
		return ports.CommitOptions{Add: [][]byte{rec.KeyPackage}}, nil
	})
}

// publish publishes an MLS message on the group's topic and returns its
// sequence id.
func (r Member) publish(groupID, msg []byte, what string) (uint64, error) {
	env := &backendpb.ClientEnvelope{TargetTopic: append([]byte{byte(ports.TopicGroupMessages)}, groupID...),
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: msg}}
	seqs, err := r.Transport.Publish(r.W.Ctx, []*backendpb.ClientEnvelope{env})
	if err != nil {
		return 0, fmt.Errorf("%s: publish: %w", what, err)
	}
	return seqs[0], nil
}

// keyPackageOf returns the newest key package the delivery service serves
// for the installation.
func (r Member) keyPackageOf(installationKey []byte) ([]byte, error) {
	env, err := r.Transport.QueryNewest(r.W.Ctx, append([]byte{byte(ports.TopicKeyPackages)}, installationKey...))
	if err != nil {
		return nil, fmt.Errorf("key package: %w", err)
	}
	return env.GetEnvelope().GetKeyPackage().GetKeyPackageTlsSerialized(), nil
}

// keyPackageUnder builds a key package whose credential names inbox,
// signed with key.
func (r Member) keyPackageUnder(inbox string, key ed25519.PrivateKey) (ports.KeyPackageRecord, error) {
	reg, err := regroup.ProvideAlgorithms()
	if err != nil {
		return ports.KeyPackageRecord{}, err
	}
	return keypackage.Build(r.W.Ctx, keypackage.BuildOptions{Engine: r.Engine, Wrappers: reg, InboxID: inbox,
		InstallationKey: key, Now: r.Clock.Now(), WrapperAlgorithm: ports.WrapperCurve25519})
}
