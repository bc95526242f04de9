package group

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
)

// PublicStateVersion tags the encoding of [Group.MarshalPublic].
const PublicStateVersion = 1

// ErrPublicState means bytes given to [LoadPublic] are not a public state
// this package wrote: truncated, of an unknown version or suite, or
// inconsistent (a tree whose hash is not the group context's).
var ErrPublicState = errors.New("group: bad public state")

// MarshalPublic encodes the public part of the group's current epoch, all
// that validating the next commit needs and no secret: public state
// version 1 is
//
//	uint8        version = 1
//	uint16       cipher_suite
//	GroupContext group_context
//	optional<Node> ratchet_tree<V>  (the ratchet_tree extension's form)
//	opaque       interim_transcript_hash<V>
//	opaque       confirmation_tag<V>
//
// in the TLS presentation language of RFC 9420. [LoadPublic] reads it back
// as a public view.
func (g *Group) MarshalPublic() ([]byte, error) {
	w := codec.NewWriter(1024 + 256*int(g.tree.LeafCount()))
	w.Uint8(PublicStateVersion)
	w.Uint16(uint16(g.suite.ID()))
	g.gc.MarshalMLS(w)
	g.tree.Export().MarshalMLS(w)
	w.Opaque(g.interim)
	w.Opaque(g.confirmationTag)
	return w.Bytes()
}

// LoadPublic decodes a public state written by [Group.MarshalPublic] as a
// public view ([NewPublic]'s kind of group). It never panics: bytes that
// are not such a state fail with [ErrPublicState]. The tree is not
// validated again (it was when the state was made), but its hash must be
// the group context's, which also leaves every subtree hash computed for
// the next commit.
func LoadPublic(b []byte) (*Group, error) {
	r := codec.NewReader(b)
	if v := r.Uint8(); r.Err() == nil && v != PublicStateVersion {
		return nil, fmt.Errorf("%w: version %d", ErrPublicState, v)
	}
	id := ciphersuite.ID(r.Uint16())
	if r.Err() != nil {
		return nil, fmt.Errorf("%w: %v", ErrPublicState, r.Err())
	}
	s, err := ciphersuite.Lookup(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPublicState, err)
	}
	g := &Group{suite: s, resume: map[uint64][]byte{}}
	r.Value(&g.gc)
	var rt message.RatchetTree
	r.Value(&rt)
	g.interim = r.Opaque()
	g.confirmationTag = r.Opaque()
	if err := r.Finish(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPublicState, err)
	}
	if g.gc.CipherSuite != id {
		return nil, fmt.Errorf("%w: suite %#04x in a state of suite %#04x", ErrPublicState, uint16(g.gc.CipherSuite), uint16(id))
	}
	if g.tree, err = ratchettree.Import(s, rt); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPublicState, err)
	}
	th, err := g.tree.TreeHash()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPublicState, err)
	}
	if !bytes.Equal(th, g.gc.TreeHash) {
		return nil, fmt.Errorf("%w: the tree's hash is not the group context's", ErrPublicState)
	}
	if g.gcBytes, err = codec.Marshal(&g.gc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPublicState, err)
	}
	return g, nil
}
