package group

import (
	"fmt"
	"maps"
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/secrettree"
	"github.com/regroup-mls/regroup/adapters/mls/treekem"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// stateVersion tags the encoding of [Group.Marshal].
const stateVersion = 2

// Marshal serialises the whole group state (group context, tree, private
// keys, epoch secrets, transcript, secret tree positions, cached proposals,
// resumption PSKs and retained past epochs; for a public view only the
// public part) in one blob, state version 2, so that [Load] restores it
// after a restart. [Group.MarshalSplit] stores the same state in parts.
// The encoding holds secrets and the signature key: store it as such.
func (g *Group) Marshal() ([]byte, error) {
	w := codec.NewWriter(4096)
	w.Uint8(stateVersion)
	w.Uint16(uint16(g.suite.ID()))
	g.gc.MarshalMLS(w)
	g.tree.Export().MarshalMLS(w)
	g.marshalRest(w)
	return w.Bytes()
}

// marshalRest writes what follows the group context and the tree in every
// state version: transcript, secrets, proposals, PSKs, leaf keys and past
// epochs (their leaves as far as they differ from g's tree).
func (g *Group) marshalRest(w *codec.Writer) {
	w.Opaque(g.interim)
	w.Opaque(g.confirmationTag)
	w.Bool(g.Active())
	if g.Active() {
		g.priv.MarshalMLS(w)
		g.epoch.MarshalMLS(w)
		w.Opaque(g.sigPriv)
		st, err := g.secrets.Encode()
		w.Fail(err)
		w.Opaque(st)
	}
	w.Vector(func(w *codec.Writer) {
		for _, p := range g.proposals {
			w.Opaque(p.ref)
			p.proposal.MarshalMLS(w)
			p.sender.MarshalMLS(w)
		}
	})
	epochs := slices.Sorted(maps.Keys(g.resume))
	w.Vector(func(w *codec.Writer) {
		for _, e := range epochs {
			w.Uint64(e)
			w.Opaque(g.resume[e])
		}
	})
	w.Vector(func(w *codec.Writer) {
		for i := range g.pskList {
			g.pskList[i].MarshalMLS(w)
		}
	})
	pubs := slices.Sorted(maps.Keys(g.leafKeys))
	w.Vector(func(w *codec.Writer) {
		for _, pub := range pubs {
			w.Opaque([]byte(pub))
			w.Opaque(g.leafKeys[pub])
		}
	})
	w.Uint32(uint32(g.maxPast))
	w.Vector(func(w *codec.Writer) {
		for _, v := range g.past {
			w.Uint64(v.epoch)
			w.Opaque(v.gcBytes)
			// A past epoch's leaves, as far as they differ from the
			// current tree's: mostly the few leaves commits changed since.
			w.Vector(func(w *codec.Writer) {
				for _, d := range leafDiff(v.leaves, g.tree) {
					w.Uint32(uint32(d.index))
					w.Bool(d.leaf != nil)
					if d.leaf != nil {
						d.leaf.MarshalMLS(w)
					}
				}
			})
			vs, err := v.secrets.Encode()
			w.Fail(err)
			w.Opaque(vs)
			w.Opaque(v.senderData)
			w.Opaque(v.membership)
		}
	})
}

// Load restores a group written by [Group.Marshal]; psks supplies external
// PSKs for later commits.
func Load(b []byte, psks PSKStore) (*Group, error) {
	r := codec.NewReader(b)
	if v := r.Uint8(); v != stateVersion {
		return nil, fmt.Errorf("%w: group state version %d", ErrInvalid, v)
	}
	g, err := newLoaded(r, psks)
	if err != nil {
		return nil, err
	}
	var rt message.RatchetTree
	r.Value(&rt)
	rest := g.loadRest(r)
	if err := r.Finish(); err != nil {
		return nil, fmt.Errorf("load group: %w", err)
	}
	if g.tree, err = ratchettree.Import(g.suite, rt); err != nil {
		return nil, fmt.Errorf("load group: %w", err)
	}
	if err := g.finishLoad(rest); err != nil {
		return nil, err
	}
	return g, nil
}

// newLoaded reads the suite and the group context of a stored state.
func newLoaded(r *codec.Reader, psks PSKStore) (*Group, error) {
	s, err := ciphersuite.Lookup(ciphersuite.ID(r.Uint16()))
	if err != nil {
		return nil, err
	}
	g := &Group{suite: s, psks: psks, resume: map[uint64][]byte{}}
	r.Value(&g.gc)
	return g, nil
}

// storedPast is a past epoch as read, before the current tree is known.
type storedPast struct {
	v       view
	diff    []pastLeaf
	secrets []byte
}

// loadedRest is what loadRest read that needs the current tree.
type loadedRest struct {
	active  bool
	secrets []byte
	past    []storedPast
}

// loadRest reads what marshalRest wrote; finishLoad completes it once
// g.tree is set.
func (g *Group) loadRest(r *codec.Reader) *loadedRest {
	rest := &loadedRest{}
	g.interim = r.Opaque()
	g.confirmationTag = r.Opaque()
	rest.active = r.Bool()
	if rest.active {
		var err error
		if g.priv, err = treekem.DecodePrivateState(g.suite, r); err != nil {
			r.Fail(err)
			return rest
		}
		g.epoch = &keyschedule.Epoch{}
		r.Value(g.epoch)
		g.sigPriv = r.Opaque()
		rest.secrets = r.Opaque()
	}
	r.VectorEach(func(r *codec.Reader) {
		c := cached{ref: r.Opaque(), proposal: new(message.Proposal)}
		r.Value(c.proposal)
		r.Value(&c.sender)
		g.proposals = append(g.proposals, c)
	})
	r.VectorEach(func(r *codec.Reader) {
		e := r.Uint64()
		g.resume[e] = r.Opaque()
	})
	r.VectorEach(func(r *codec.Reader) {
		var id message.PreSharedKeyID
		r.Value(&id)
		g.pskList = append(g.pskList, id)
	})
	g.leafKeys = map[string][]byte{}
	r.VectorEach(func(r *codec.Reader) {
		pub := r.Opaque()
		g.leafKeys[string(pub)] = r.Opaque()
	})
	g.maxPast = int(r.Uint32())
	r.VectorEach(func(r *codec.Reader) {
		p := storedPast{v: view{epoch: r.Uint64(), gcBytes: r.Opaque()}}
		r.VectorEach(func(r *codec.Reader) {
			d := pastLeaf{index: treemath.LeafIndex(r.Uint32())}
			if r.Bool() {
				d.leaf = new(message.LeafNode)
				r.Value(d.leaf)
			}
			p.diff = append(p.diff, d)
		})
		p.secrets = r.Opaque()
		p.v.senderData, p.v.membership = r.Opaque(), r.Opaque()
		rest.past = append(rest.past, p)
	})
	return rest
}

// finishLoad rebuilds the past epochs' leaves and the secret trees once
// g.tree is set.
func (g *Group) finishLoad(rest *loadedRest) error {
	var err error
	for _, p := range rest.past {
		if p.v.leaves, err = applyLeafDiff(g.tree, p.diff); err == nil {
			p.v.secrets, err = secrettree.Decode(g.suite, p.secrets)
		}
		if err != nil {
			return fmt.Errorf("load group: past epoch %d: %w", p.v.epoch, err)
		}
		g.past = append(g.past, p.v)
	}
	if rest.active {
		if g.priv == nil {
			return fmt.Errorf("%w: load group: no private state", ErrInvalid)
		}
		if g.secrets, err = secrettree.Decode(g.suite, rest.secrets); err != nil {
			return fmt.Errorf("load group: %w", err)
		}
	}
	if g.gcBytes, err = codec.Marshal(&g.gc); err != nil {
		return err
	}
	return nil
}

// leafDiff returns the leaves of a past epoch that differ from cur's, in
// index order: a leaf the past had that cur lacks or holds differently,
// and a blank (nil leaf) where cur has a member the past did not.
func leafDiff(past []pastLeaf, cur *ratchettree.Tree) []pastLeaf {
	var out []pastLeaf
	members := cur.Members()
	i, j := 0, 0
	for i < len(past) || j < len(members) {
		switch {
		case j == len(members) || (i < len(past) && past[i].index < members[j]):
			out = append(out, past[i])
			i++
		case i == len(past) || members[j] < past[i].index:
			out = append(out, pastLeaf{index: members[j]})
			j++
		default:
			if !past[i].leaf.Equal(cur.Leaf(members[j])) {
				out = append(out, past[i])
			}
			i, j = i+1, j+1
		}
	}
	return out
}

// applyLeafDiff rebuilds a past epoch's leaves from cur's and the
// difference leafDiff wrote, which must name each index once, ascending.
func applyLeafDiff(cur *ratchettree.Tree, diff []pastLeaf) ([]pastLeaf, error) {
	for k := 1; k < len(diff); k++ {
		if diff[k].index <= diff[k-1].index {
			return nil, fmt.Errorf("%w: past leaves out of order at leaf %d", ErrInvalid, diff[k].index)
		}
	}
	var out []pastLeaf
	members := cur.Members()
	i, j := 0, 0
	for i < len(diff) || j < len(members) {
		switch {
		case j == len(members) || (i < len(diff) && diff[i].index < members[j]):
			if diff[i].leaf != nil {
				out = append(out, diff[i])
			}
			i++
		case i == len(diff) || members[j] < diff[i].index:
			out = append(out, pastLeaf{index: members[j], leaf: cur.Leaf(members[j])})
			j++
		default:
			if diff[i].leaf != nil {
				out = append(out, diff[i])
			}
			i, j = i+1, j+1
		}
	}
	return out, nil
}
