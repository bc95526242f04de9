package group

import (
	"maps"
	"slices"
)

// Clone returns an independent copy of the group: changing, erasing keys
// in or merging into one leaves the other as it was. Leaf nodes, proposals
// and group contexts, which the group replaces rather than modifies, are
// shared.
func (g *Group) Clone() *Group {
	c := *g
	c.tree = g.tree.Clone()
	if g.priv != nil {
		c.priv = g.priv.Clone()
	}
	if g.epoch != nil {
		c.epoch = g.epoch.Clone()
	}
	if g.secrets != nil {
		c.secrets = g.secrets.Clone()
	}
	c.proposals = slices.Clone(g.proposals)
	c.resume = maps.Clone(g.resume)
	c.pskList = slices.Clone(g.pskList)
	c.leafKeys = maps.Clone(g.leafKeys)
	c.past = make([]view, len(g.past))
	for i, v := range g.past {
		v.secrets = v.secrets.Clone()
		v.leaves = slices.Clone(v.leaves)
		c.past[i] = v
	}
	return &c
}
