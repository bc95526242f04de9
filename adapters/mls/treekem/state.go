package treekem

import (
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// MarshalMLS writes the private state (leaf index and node keys, in node
// order). The encoding holds private keys: store it as such.
func (p *PrivateState) MarshalMLS(w *codec.Writer) {
	w.Uint32(uint32(p.leaf))
	nodes := make([]treemath.NodeIndex, 0, len(p.keys))
	for x := range p.keys {
		nodes = append(nodes, x)
	}
	slices.Sort(nodes)
	w.Vector(func(w *codec.Writer) {
		for _, x := range nodes {
			w.Uint32(uint32(x))
			w.Opaque(p.keys[x])
		}
	})
}

// DecodePrivateState reads a private state written by MarshalMLS.
func DecodePrivateState(s *ciphersuite.Suite, r *codec.Reader) (*PrivateState, error) {
	p := &PrivateState{suite: s, leaf: treemath.LeafIndex(r.Uint32()), keys: map[treemath.NodeIndex][]byte{}}
	r.VectorEach(func(r *codec.Reader) {
		x := treemath.NodeIndex(r.Uint32())
		p.keys[x] = r.Opaque()
	})
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("decode private state: %w", err)
	}
	return p, nil
}
