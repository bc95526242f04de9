package group

import (
	"crypto/rand"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treekem"
)

// CreateOptions describe a new group.
type CreateOptions struct {
	GroupID        []byte
	Leaf           *message.LeafNode // the creator's leaf, signed as a key_package leaf
	EncryptionPriv []byte            // private key of Leaf.EncryptionKey
	SignaturePriv  []byte            // private key of Leaf.SignatureKey
	Extensions     message.Extensions
	PSKs           PSKStore
}

// Create starts a group at epoch 0 with its creator as the only member
// (§11): random init_secret, all-zero commit and PSK secrets, an empty
// confirmed transcript hash and the interim hash of its confirmation tag.
func Create(s *ciphersuite.Suite, opts *CreateOptions) (*Group, error) {
	if opts == nil {
		return nil, invalid("options are required")
	}
	if opts.Leaf == nil || len(opts.GroupID) == 0 {
		return nil, fmt.Errorf("%w: group id and leaf are required", ErrInvalid)
	}
	if err := opts.Leaf.Verify(s, opts.GroupID, 0); err != nil {
		return nil, fmt.Errorf("%w: creator leaf: %w", ErrInvalid, err)
	}
	tree := ratchettree.New(s, opts.Leaf)
	th, err := tree.TreeHash()
	if err != nil {
		return nil, err
	}
	gc := message.GroupContext{
		Version: message.MLS10, CipherSuite: s.ID(), GroupID: opts.GroupID, Epoch: 0,
		TreeHash: th, ConfirmedTranscriptHash: []byte{}, Extensions: opts.Extensions,
	}
	if gc.Extensions == nil {
		gc.Extensions = message.Extensions{}
	}
	gcBytes, err := codec.Marshal(&gc)
	if err != nil {
		return nil, err
	}
	init := make([]byte, s.HashSize())
	if _, err := rand.Read(init); err != nil {
		return nil, err
	}
	epoch, err := keyschedule.Derive(s, init, nil, nil, gcBytes)
	clear(init)
	if err != nil {
		return nil, err
	}
	tag := keyschedule.ConfirmationTag(s, epoch.ConfirmationKey, gc.ConfirmedTranscriptHash)
	interim, err := keyschedule.InterimTranscriptHash(s, gc.ConfirmedTranscriptHash, tag)
	if err != nil {
		return nil, err
	}
	g := &Group{suite: s, sigPriv: opts.SignaturePriv, psks: opts.PSKs, confirmationTag: tag}
	priv := treekem.NewPrivateState(s, 0, opts.EncryptionPriv)
	if err := g.install(gc, tree, priv, epoch, interim); err != nil {
		return nil, err
	}
	return g, nil
}

// GroupInfo returns the signed GroupInfo of the current epoch (§12.4.3),
// with the ratchet_tree extension when withTree is set and always with
// external_pub.
func (g *Group) GroupInfo(withTree bool) (*message.GroupInfo, error) {
	if g.Public() {
		return nil, errPublic
	}
	_, pub, err := keyschedule.ExternalKeyPair(g.suite, g.epoch.ExternalSecret)
	if err != nil {
		return nil, err
	}
	ep, err := codec.Marshal(&message.ExternalPub{PublicKey: pub})
	if err != nil {
		return nil, err
	}
	ext := message.Extensions{{Type: message.ExtExternalPub, Data: ep}}
	if withTree {
		rt, err := codec.Marshal(g.tree.Export())
		if err != nil {
			return nil, err
		}
		ext = append(ext, message.Extension{Type: message.ExtRatchetTree, Data: rt})
	}
	gi := &message.GroupInfo{GroupContext: g.gc, Extensions: ext, ConfirmationTag: g.confirmationTag, Signer: uint32(g.priv.Leaf())}
	if err := gi.Sign(g.suite, g.sigPriv); err != nil {
		return nil, err
	}
	return gi, nil
}
