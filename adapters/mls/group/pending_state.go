package group

import (
	"bytes"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// Marshal serialises a pending commit (its message, Welcome and the whole
// state of the epoch it leads to) in one blob, state version 2, so that
// [LoadPending] restores it after a restart without the group it was
// built on. The encoding holds secrets: store it as such.
func (p *Pending) Marshal() ([]byte, error) {
	if p == nil || p.next == nil {
		return nil, fmt.Errorf("%w: no pending commit", ErrInvalid)
	}
	next, err := p.next.Marshal()
	if err != nil {
		return nil, err
	}
	w := codec.NewWriter(len(next) + 1024)
	w.Uint8(stateVersion)
	p.marshalCommit(w)
	w.Opaque(next)
	return w.Bytes()
}

// MarshalChanges serialises a pending commit, state version 3, as the
// epoch it leads to relative to the group it was built on: the ratchet
// tree nodes the commit changed and the rest of the new epoch's state.
// [LoadPending] restores it from that group as stored then (loaded, or
// written by [Group.MarshalSplit]); a commit built on a group never
// stored so carries its whole tree. Without withMessage the commit's
// message (which for a large group can outweigh the rest) is left out
// and the restored Pending has none: enough to merge a commit received
// from another member. The encoding holds secrets: store it as such.
func (p *Pending) MarshalChanges(withMessage bool) ([]byte, error) {
	if p == nil || p.next == nil {
		return nil, fmt.Errorf("%w: no pending commit", ErrInvalid)
	}
	g := p.next
	w := codec.NewWriter(4096)
	w.Uint8(splitVersion)
	w.Bool(withMessage)
	if withMessage {
		p.Message.MarshalMLS(w)
	}
	p.marshalRest(w)
	changed, all := g.tree.Changes()
	base := treeVersion(g.tree)
	if all {
		base, changed = nil, nil
		for x := 0; x < g.tree.Width(); x++ {
			if g.tree.Node(treemath.NodeIndex(x)) != nil {
				changed = append(changed, treemath.NodeIndex(x))
			}
		}
	}
	w.Opaque(base)
	w.Uint16(uint16(g.suite.ID()))
	g.gc.MarshalMLS(w)
	g.marshalRest(w)
	w.Uint32(uint32(g.tree.Width()))
	w.Vector(func(w *codec.Writer) {
		for _, x := range changed {
			n := g.tree.Node(x)
			w.Uint32(uint32(x))
			w.Bool(n != nil)
			if n != nil {
				n.MarshalMLS(w)
			}
		}
	})
	return w.Bytes()
}

func (p *Pending) marshalCommit(w *codec.Writer) {
	p.Message.MarshalMLS(w)
	p.marshalRest(w)
}

// marshalRest writes what follows the message.
func (p *Pending) marshalRest(w *codec.Writer) {
	w.Bool(p.Welcome != nil)
	if p.Welcome != nil {
		p.Welcome.MarshalMLS(w)
	}
	w.Bool(p.RemovesSelf)
	p.Sender.MarshalMLS(w)
	w.Opaque(p.AuthenticatedData)
}

// LoadPending restores a pending commit written by [Pending.Marshal] or
// [Pending.MarshalChanges] (without its message if so written). base is the group the latter's commit was
// built on, as stored then; it is not modified, and a commit of
// MarshalChanges whose base differs fails. Marshal's needs no base (nil).
// psks supplies external PSKs for later commits.
func LoadPending(b []byte, base *Group, psks PSKStore) (*Pending, error) {
	r := codec.NewReader(b)
	v := r.Uint8()
	if v != stateVersion && v != splitVersion {
		return nil, fmt.Errorf("%w: pending state version %d", ErrInvalid, v)
	}
	p := &Pending{}
	if v == stateVersion || r.Bool() {
		p.Message = new(framing.MLSMessage)
		r.Value(p.Message)
	}
	if r.Bool() {
		p.Welcome = new(message.Welcome)
		r.Value(p.Welcome)
	}
	p.RemovesSelf = r.Bool()
	r.Value(&p.Sender)
	p.AuthenticatedData = r.Opaque()
	var err error
	if v == stateVersion {
		next := r.Opaque()
		if err := r.Finish(); err != nil {
			return nil, fmt.Errorf("load pending commit: %w", err)
		}
		if p.next, err = Load(next, psks); err != nil {
			return nil, fmt.Errorf("load pending commit: %w", err)
		}
		return p, nil
	}
	if p.next, err = loadChanges(r, base, psks); err != nil {
		return nil, fmt.Errorf("load pending commit: %w", err)
	}
	return p, nil
}

// loadChanges reads the epoch MarshalChanges wrote, on base.
func loadChanges(r *codec.Reader, base *Group, psks PSKStore) (*Group, error) {
	version := r.Opaque()
	g, err := newLoaded(r, psks)
	if err != nil {
		return nil, err
	}
	rest := g.loadRest(r)
	width := int(r.Uint32())
	var changes []ratchettree.NodeChange
	r.VectorEach(func(r *codec.Reader) {
		c := ratchettree.NodeChange{Index: treemath.NodeIndex(r.Uint32())}
		if r.Bool() {
			c.Node = new(message.Node)
			r.Value(c.Node)
		}
		changes = append(changes, c)
	})
	if err := r.Finish(); err != nil {
		return nil, err
	}
	if len(version) == 0 {
		nodes := map[treemath.NodeIndex]*message.Node{}
		for _, c := range changes {
			if uint64(c.Index) >= uint64(width) || c.Node == nil || nodes[c.Index] != nil {
				return nil, fmt.Errorf("%w: node %d of a stored tree of width %d", ErrInvalid, c.Index, width)
			}
			nodes[c.Index] = c.Node
		}
		if g.tree, err = ratchettree.Import(g.suite, denseTree(nodes)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if g.tree.Width() != width {
			return nil, fmt.Errorf("%w: tree of width %d stored as %d", ErrInvalid, g.tree.Width(), width)
		}
	} else {
		if base == nil || !bytes.Equal(treeVersion(base.tree), version) {
			return nil, fmt.Errorf("%w: the commit was staged on another state of the group", ErrInvalid)
		}
		if changed, _ := base.tree.Changes(); len(changed) > 0 {
			return nil, fmt.Errorf("%w: the group's tree changed since it was stored", ErrInvalid)
		}
		g.tree = base.tree.Clone()
		if err := g.tree.Patch(width, changes); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if err := g.finishLoad(rest); err != nil {
		return nil, err
	}
	return g, nil
}
