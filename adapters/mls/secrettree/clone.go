package secrettree

import (
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// Clone returns an independent copy of the tree: every secret, ratchet
// position and skipped key is copied, so that deriving, using or erasing
// keys in one tree leaves the other as it was.
func (t *Tree) Clone() *Tree {
	c := &Tree{suite: t.suite, leaves: t.leaves, opts: t.opts,
		nodes: make(map[treemath.NodeIndex][]byte, len(t.nodes)), ratchets: make(map[ratchetID]*ratchet, len(t.ratchets))}
	for x, s := range t.nodes {
		c.nodes[x] = slices.Clone(s)
	}
	for id, r := range t.ratchets {
		cr := &ratchet{suite: r.suite, opts: &c.opts, secret: slices.Clone(r.secret), gen: r.gen, done: r.done,
			skipped: make(map[uint32]*KeyNonce, len(r.skipped)), order: slices.Clone(r.order)}
		for g, kn := range r.skipped {
			cr.skipped[g] = &KeyNonce{Generation: kn.Generation, Key: slices.Clone(kn.Key), Nonce: slices.Clone(kn.Nonce)}
		}
		c.ratchets[id] = cr
	}
	return c
}
