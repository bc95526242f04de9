package rogue

import (
	"context"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// SetViewers replaces the viewer list, empty included.
func (r Member) SetViewers(groupID []byte, inboxes ...string) (uint64, error) {
	return r.metadataCommit(groupID, func(d metadata.Dictionary) (metadata.Dictionary, error) {
		return d.Set(metadata.ComponentViewerList, metadata.EncodeInboxList(inboxes)), nil
	})
}

// SetPolicyVersion states role policy version v in the group context; 0
// drops the component.
func (r Member) SetPolicyVersion(groupID []byte, v uint16) (uint64, error) {
	return r.metadataCommit(groupID, func(d metadata.Dictionary) (metadata.Dictionary, error) {
		return withPolicyVersion(d, v), nil
	})
}

func withPolicyVersion(d metadata.Dictionary, v uint16) metadata.Dictionary {
	if v != 0 {
		return d.Set(metadata.ComponentPolicyVersion, metadata.EncodePolicyVersion(v))
	}
	return metadata.Dictionary{Components: slices.DeleteFunc(slices.Clone(d.Components), func(c metadata.Component) bool {
		return c.ID == metadata.ComponentPolicyVersion
	})}
}

// Send encrypts content as an application message of kind kind with the
// member's engine and publishes it on the group's topic, as a patched
// client that ignores its role would; it returns its sequence id.
func (r Member) Send(groupID []byte, kind ports.MessageKind, content []byte) (uint64, error) {
	ctx := r.W.Ctx
	var msg []byte
	err := r.Store.Tx(ctx, func(tx ports.Tx) (err error) {
		msg, err = r.Engine.Encrypt(ctx, tx, groupID, content, []byte{byte(kind)})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("rogue send: %w", err)
	}
	return r.publish(groupID, msg, "rogue send")
}

// VersionEngine returns an engine wrapper (for world.Config.MLS) under
// which every group the member creates and every commit it makes states
// role policy version v (none for 0), while the member's own client is
// shown version shown wherever it reads a group state: a creator whose
// groups, and the Welcomes it sends, carry a policy version the other
// members may not know, or none, as groups created before the component
// existed.
func VersionEngine(v, shown uint16) func(ports.MLS) ports.MLS {
	return func(m ports.MLS) ports.MLS { return &versionEngine{Engine: m.(*mlsfault.Engine), v: v, shown: shown} }
}

type versionEngine struct {
	*mlsfault.Engine
	v, shown uint16
}

// rewrite sets the policy version in exts' app_data_dictionary, when it
// has one.
func rewrite(exts []ports.Extension, v uint16) []ports.Extension {
	d, err := metadata.FromExtensions(exts)
	if err != nil {
		return exts
	}
	out, err := withPolicyVersion(d, v).Apply(exts)
	if err != nil {
		return exts
	}
	return out
}

func (e *versionEngine) show(v ports.GroupView, err error) (ports.GroupView, error) {
	v.Extensions = rewrite(v.Extensions, e.shown)
	return v, err
}

func (e *versionEngine) CreateGroup(ctx context.Context, tx ports.Tx, groupID []byte, signer ports.KeyPackageBundle, exts []ports.Extension) (ports.GroupView, error) {
	return e.show(e.Engine.CreateGroup(ctx, tx, groupID, signer, rewrite(exts, e.v)))
}

func (e *versionEngine) Group(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error) {
	return e.show(e.Engine.Group(ctx, tx, groupID))
}

func (e *versionEngine) MergeStaged(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error) {
	return e.show(e.Engine.MergeStaged(ctx, tx, groupID))
}

func (e *versionEngine) MergePending(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error) {
	return e.show(e.Engine.MergePending(ctx, tx, groupID))
}

func (e *versionEngine) Commit(ctx context.Context, tx ports.Tx, groupID []byte, opts ports.CommitOptions) (ports.CommitOutput, error) {
	if opts.GroupContextExtensions != nil {
		opts.GroupContextExtensions = rewrite(opts.GroupContextExtensions, e.v)
	}
	return e.Engine.Commit(ctx, tx, groupID, opts)
}

func (e *versionEngine) Process(ctx context.Context, tx ports.Tx, groupID, msg []byte) (ports.Processed, error) {
	p, err := e.Engine.Process(ctx, tx, groupID, msg)
	if err == nil && p.Staged != nil {
		staged, _ := e.show(*p.Staged, nil)
		p.Staged = &staged
	}
	return p, err
}
