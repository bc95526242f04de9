package secrettree

import (
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// stateVersion tags the encoding of [Tree.Encode].
const stateVersion = 1

// Encode serialises the tree's remaining secrets (node secrets not yet
// split, every ratchet's position and its skipped keys) so that the tree
// can be restored with [Decode] after a restart. The encoding holds
// secrets: store it as such.
func (t *Tree) Encode() ([]byte, error) {
	w := codec.NewWriter(256)
	w.Uint8(stateVersion)
	w.Uint16(uint16(t.suite.ID()))
	w.Uint32(uint32(t.leaves))
	w.Uint32(t.opts.MaxSkip)
	w.Uint32(uint32(t.opts.MaxStored))
	nodes := make([]treemath.NodeIndex, 0, len(t.nodes))
	for x := range t.nodes {
		nodes = append(nodes, x)
	}
	slices.Sort(nodes)
	w.Vector(func(w *codec.Writer) {
		for _, x := range nodes {
			w.Uint32(uint32(x))
			w.Opaque(t.nodes[x])
		}
	})
	ids := make([]ratchetID, 0, len(t.ratchets))
	for id := range t.ratchets {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b ratchetID) int {
		if a.leaf != b.leaf {
			return int(a.leaf) - int(b.leaf)
		}
		return int(a.typ) - int(b.typ)
	})
	w.Vector(func(w *codec.Writer) {
		for _, id := range ids {
			r := t.ratchets[id]
			w.Uint32(uint32(id.leaf))
			w.Uint8(uint8(id.typ))
			w.Opaque(r.secret)
			w.Uint32(r.gen)
			w.Bool(r.done)
			w.Vector(func(w *codec.Writer) {
				for _, g := range r.order {
					if kn, ok := r.skipped[g]; ok {
						w.Uint32(g)
						w.Opaque(kn.Key)
						w.Opaque(kn.Nonce)
					}
				}
			})
		}
	})
	return w.Bytes()
}

// Decode restores a tree written by [Tree.Encode] for suite s.
func Decode(s *ciphersuite.Suite, b []byte) (*Tree, error) {
	r := codec.NewReader(b)
	if v := r.Uint8(); v != stateVersion {
		return nil, fmt.Errorf("%w: secret tree state version %d", codec.ErrInvalidValue, v)
	}
	if id := ciphersuite.ID(r.Uint16()); id != s.ID() {
		return nil, fmt.Errorf("%w: secret tree of suite %#04x", codec.ErrInvalidValue, uint16(id))
	}
	t := &Tree{suite: s, leaves: treemath.LeafCount(r.Uint32()), nodes: map[treemath.NodeIndex][]byte{}, ratchets: map[ratchetID]*ratchet{}}
	t.opts.MaxSkip = r.Uint32()
	t.opts.MaxStored = int(r.Uint32())
	if _, ok := treemath.Root(t.leaves); !ok || t.opts.MaxSkip == 0 || t.opts.MaxStored <= 0 {
		r.Failf("secret tree header")
	}
	r.VectorEach(func(r *codec.Reader) {
		x := treemath.NodeIndex(r.Uint32())
		t.nodes[x] = r.Opaque()
	})
	r.VectorEach(func(r *codec.Reader) {
		id := ratchetID{leaf: treemath.LeafIndex(r.Uint32()), typ: RatchetType(r.Uint8())}
		rt := &ratchet{suite: s, opts: &t.opts, skipped: map[uint32]*KeyNonce{}}
		rt.secret = r.Opaque()
		rt.gen = r.Uint32()
		rt.done = r.Bool()
		r.VectorEach(func(r *codec.Reader) {
			kn := &KeyNonce{Generation: r.Uint32()}
			kn.Key, kn.Nonce = r.Opaque(), r.Opaque()
			rt.skipped[kn.Generation] = kn
			rt.order = append(rt.order, kn.Generation)
		})
		t.ratchets[id] = rt
	})
	if err := r.Finish(); err != nil {
		return nil, fmt.Errorf("decode secret tree: %w", err)
	}
	return t, nil
}
