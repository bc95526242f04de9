package mls

import (
	"context"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
	"github.com/regroup-mls/regroup/adapters/mls/welcome"
	"github.com/regroup-mls/regroup/ports"
)

func treeLeaf(i uint32) treemath.LeafIndex { return treemath.LeafIndex(i) }

// StageWelcome decrypts and verifies a Welcome with the key package's
// private keys without installing it. A Welcome whose GroupSecrets name
// PSKs is reported with HasPSKs and not staged (JOIN-027).
func (e *Engine) StageWelcome(ctx context.Context, tx ports.Tx, msg []byte, kp ports.KeyPackageRecord) (ports.StagedWelcome, error) {
	m, err := framing.Decode(msg)
	if err != nil || m.Welcome == nil {
		return ports.StagedWelcome{}, fmt.Errorf("%w: not a Welcome", ports.ErrInvalid)
	}
	k, err := decodeKeyPackage(kp.KeyPackage)
	if err != nil {
		return ports.StagedWelcome{}, err
	}
	gs, err := welcome.OpenSecrets(e.suite, m.Welcome, k, kp.InitPrivateKey)
	if errors.Is(err, welcome.ErrDecrypt) {
		return ports.StagedWelcome{}, fmt.Errorf("%w: %v", ports.ErrUndecryptable, err)
	}
	if err != nil {
		return ports.StagedWelcome{}, fmt.Errorf("%w: %v", ports.ErrInvalid, err)
	}
	if len(gs.PSKs) > 0 {
		return ports.StagedWelcome{HasPSKs: true}, nil
	}
	g, err := group.Join(e.suite, m.Welcome, &group.JoinOptions{KeyPackage: k, InitPriv: kp.InitPrivateKey,
		EncryptionPriv: kp.EncryptionPrivateKey, SignaturePriv: e.opts.SignaturePrivateKey})
	if err != nil {
		return ports.StagedWelcome{}, fmt.Errorf("%w: %v", ports.ErrInvalid, err)
	}
	g.SetPastEpochs(e.opts.PastEpochs)
	handle, err := newHandle()
	if err != nil {
		return ports.StagedWelcome{}, err
	}
	b, err := g.Marshal()
	if err != nil {
		return ports.StagedWelcome{}, err
	}
	if err := tx.Blobs().Put(ctx, nsWelcome, handle, b); err != nil {
		return ports.StagedWelcome{}, err
	}
	return ports.StagedWelcome{Group: view(g), Signer: member(g, framing.Sender{Type: framing.SenderMember, LeafIndex: g.WelcomeSigner()}), Handle: handle}, nil
}

// InstallWelcome installs a staged Welcome, replacing any state held for
// the group.
func (e *Engine) InstallWelcome(ctx context.Context, tx ports.Tx, handle string) (ports.GroupView, error) {
	b, err := tx.Blobs().Get(ctx, nsWelcome, handle)
	if err != nil {
		return ports.GroupView{}, err
	}
	g, err := group.Load(b, nil)
	if err != nil {
		return ports.GroupView{}, fmt.Errorf("mls engine: staged welcome %s: %w", handle, err)
	}
	id := key(g.GroupContext().GroupID)
	for _, ns := range []string{nsStaged, nsPending} {
		if err := tx.Blobs().Delete(ctx, ns, id); err != nil {
			return ports.GroupView{}, err
		}
	}
	if err := save(ctx, tx, g); err != nil {
		return ports.GroupView{}, err
	}
	if err := tx.Blobs().Delete(ctx, nsWelcome, handle); err != nil {
		return ports.GroupView{}, err
	}
	return view(g), nil
}
