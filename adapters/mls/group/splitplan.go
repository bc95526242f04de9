package group

import (
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// A SplitPlan is a split of a group state ([Group.MarshalSplit]) whose
// blocks are measured but not yet encoded: the head, and the id and size
// of each block to store. A caller that keeps the blocks in one buffer of
// its own sizes it from the plan and writes each block there once
// ([SplitPlan.AppendBlock]), where MarshalSplit hands each block out in a
// slice of its own that the caller would copy again.
type SplitPlan struct {
	// Head is the state without the tree's nodes, as in [Split].
	Head []byte
	// IDs are the blocks to store, ascending; Sizes[i] is the size of
	// block IDs[i].
	IDs   []uint64
	Sizes []int
	// Drop, Full and Size are as in [Split].
	Drop []uint64
	Full bool
	Size int

	g   *Group
	tag []byte
}

// PlanSplit is [Group.MarshalSplit] with the blocks measured instead of
// handed out: the head, the block ids and sizes are those MarshalSplit
// would return for tag, and the state records that it was stored so. The
// group must not change until the last [SplitPlan.AppendBlock].
func (g *Group) PlanSplit(tag []byte) (*SplitPlan, error) {
	if len(tag) != TagSize {
		return nil, fmt.Errorf("%w: tag of %d bytes", ErrInvalid, len(tag))
	}
	dirty, m, full := g.dirtyBlocks()
	p := &SplitPlan{Full: full, g: g, tag: slices.Clone(tag)}
	scratch := codec.NewWriter(8192) // each block is encoded here to be measured
	for _, id := range dirty {
		scratch.Reset()
		nodes := g.appendBlock(scratch, id, tag)
		if err := scratch.Err(); err != nil {
			return nil, err
		}
		if nodes == 0 {
			if _, held := m[id]; held {
				p.Drop = append(p.Drop, id)
			}
			delete(m, id)
			continue
		}
		p.IDs, p.Sizes = append(p.IDs, id), append(p.Sizes, scratch.Len())
		m[id] = storedBlock{tag: p.tag, size: uint32(scratch.Len())}
	}
	var err error
	if p.Head, err = g.splitHead(tag, m); err != nil {
		return nil, err
	}
	p.Size = len(p.Head) + m.size()
	g.tree.MarkStored(encodeManifest(g.tree.Width(), m))
	return p, nil
}

// AppendBlock appends block IDs[i] to w: the Sizes[i] bytes MarshalSplit
// would have returned for it. It fails when the block no longer has that
// size (the group changed since PlanSplit).
func (p *SplitPlan) AppendBlock(w *codec.Writer, i int) error {
	start := w.Len()
	p.g.appendBlock(w, p.IDs[i], p.tag)
	if err := w.Err(); err != nil {
		return err
	}
	if n := w.Len() - start; n != p.Sizes[i] {
		return fmt.Errorf("%w: block %d of %d bytes, planned as %d", ErrInvalid, p.IDs[i], n, p.Sizes[i])
	}
	return nil
}
