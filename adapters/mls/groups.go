package mls

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/ports"
)

// Blob namespaces.
const (
	nsGroup   = "mls.group"
	nsStaged  = "mls.staged"
	nsPending = "mls.pending"
	nsWelcome = "mls.welcome"
	// nsExternal holds this installation's pending external commit.
	nsExternal = "mls.external"
	// nsStagedExternal holds that external commit once Process read it
	// back, for MergeStaged.
	nsStagedExternal = "mls.staged.external"
	// nsRemoval holds the removal record of an inactive group.
	nsRemoval = "mls.removal"
	// nsTree holds the blocks of ratchet tree nodes of the state in
	// nsGroup, keyed by hex group id "." block id.
	nsTree = "mls.tree"
)

func key(groupID []byte) string { return hex.EncodeToString(groupID) }

func (e *Engine) active(ctx context.Context, tx ports.Tx, groupID []byte) (*group.Group, error) {
	g, err := e.load(ctx, tx, groupID)
	if err != nil {
		return nil, err
	}
	if !g.Active() {
		return nil, fmt.Errorf("%w: %x", ports.ErrInactive, groupID)
	}
	return g, nil
}

// removalVersion tags the encoding of a removal record.
const removalVersion = 1

// putRemoval records the commit that removed this installation.
func putRemoval(ctx context.Context, tx ports.Tx, groupID []byte, r ports.Removal) error {
	w := codec.NewWriter(64)
	w.Uint8(removalVersion)
	w.Uint32(r.Leaf)
	w.Uint64(r.Epoch)
	w.Opaque(r.TreeHash)
	b, err := w.Bytes()
	if err != nil {
		return err
	}
	return tx.Blobs().Put(ctx, nsRemoval, key(groupID), b)
}

// removal returns the removal record of an inactive group. A group removed
// before the engine kept records gets one from its public state, with the
// leaf unknown.
func removal(ctx context.Context, tx ports.Tx, g *group.Group) (*ports.Removal, error) {
	if g.Active() {
		return nil, nil
	}
	gc := g.GroupContext()
	b, err := tx.Blobs().Get(ctx, nsRemoval, key(gc.GroupID))
	if errors.Is(err, ports.ErrNotFound) {
		return &ports.Removal{Leaf: ports.NoLeaf, Epoch: gc.Epoch, TreeHash: gc.TreeHash}, nil
	}
	if err != nil {
		return nil, err
	}
	out, err := decodeRemoval(b)
	if err != nil {
		return nil, fmt.Errorf("mls engine: removal record of %x: %w", gc.GroupID, err)
	}
	return out, nil
}

// decodeRemoval reads a removal record written by putRemoval.
func decodeRemoval(b []byte) (*ports.Removal, error) {
	r := codec.NewReader(b)
	if v := r.Uint8(); v != removalVersion {
		return nil, fmt.Errorf("removal record version %d", v)
	}
	out := &ports.Removal{Leaf: r.Uint32(), Epoch: r.Uint64(), TreeHash: r.Opaque()}
	if err := r.Finish(); err != nil {
		return nil, err
	}
	return out, nil
}

// viewOf describes a stored group, with its removal record when inactive.
func viewOf(ctx context.Context, tx ports.Tx, g *group.Group) (ports.GroupView, error) {
	r, err := removal(ctx, tx, g)
	if err != nil {
		return ports.GroupView{}, err
	}
	return view(g, r), nil
}

// deleteAll deletes the group's blobs in the namespaces ns.
func deleteAll(ctx context.Context, tx ports.Tx, groupID []byte, ns ...string) error {
	for _, n := range ns {
		if err := tx.Blobs().Delete(ctx, n, key(groupID)); err != nil {
			return err
		}
	}
	return nil
}

// CreateGroup creates a group with this installation, as signer's leaf, as
// its only member; it refuses a group the engine holds state for.
func (e *Engine) CreateGroup(ctx context.Context, tx ports.Tx, groupID []byte, signer ports.KeyPackageBundle, extensions []ports.Extension) (ports.GroupView, error) {
	switch _, err := tx.Blobs().Get(ctx, nsGroup, key(groupID)); {
	case err == nil:
		return ports.GroupView{}, fmt.Errorf("create group %x: %w", groupID, ports.ErrAlreadyExists)
	case !errors.Is(err, ports.ErrNotFound):
		return ports.GroupView{}, err
	}
	kp, err := decodeKeyPackage(signer.KeyPackage)
	if err != nil {
		return ports.GroupView{}, err
	}
	leaf := kp.LeafNode
	g, err := group.Create(e.suite, &group.CreateOptions{GroupID: groupID, Leaf: &leaf,
		EncryptionPriv: signer.EncryptionPrivateKey, SignaturePriv: e.opts.SignaturePrivateKey, Extensions: toExtensions(extensions)})
	if err != nil {
		return ports.GroupView{}, fmt.Errorf("create group: %w", err)
	}
	g.SetPastEpochs(e.opts.PastEpochs)
	// Leftovers of a group id used before (a pending external join, a
	// removal record) do not belong to the new group.
	if err := deleteAll(ctx, tx, groupID, nsStaged, nsPending, nsExternal, nsStagedExternal, nsRemoval); err != nil {
		return ports.GroupView{}, err
	}
	if _, err := e.save(ctx, tx, g); err != nil {
		return ports.GroupView{}, err
	}
	return view(g, nil), nil
}

// Group returns the group's current public state.
func (e *Engine) Group(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error) {
	g, err := e.load(ctx, tx, groupID)
	if err != nil {
		return ports.GroupView{}, err
	}
	return viewOf(ctx, tx, g)
}

// Encrypt protects an application message as a PrivateMessage.
func (e *Engine) Encrypt(ctx context.Context, tx ports.Tx, groupID, plaintext, authenticatedData []byte) ([]byte, error) {
	g, err := e.active(ctx, tx, groupID)
	if err != nil {
		return nil, err
	}
	m, err := g.ProtectWithAuthenticatedData(plaintext, authenticatedData)
	if err != nil {
		return nil, err
	}
	b, err := codec.Marshal(m)
	if err != nil {
		return nil, err
	}
	_, err = e.save(ctx, tx, g) // the sender's ratchet advanced
	return b, err
}

// Export derives an exporter secret (RFC 9420 §8.5).
func (e *Engine) Export(ctx context.Context, tx ports.Tx, groupID []byte, label string, context []byte, length int) ([]byte, error) {
	g, err := e.active(ctx, tx, groupID)
	if err != nil {
		return nil, err
	}
	return g.Export(label, context, length)
}
