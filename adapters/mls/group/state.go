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
)

// stateVersion tags the encoding of [Group.Marshal].
const stateVersion = 1

// Marshal serialises the whole group state (group context, tree, private
// keys, epoch secrets, transcript, secret tree positions, cached proposals,
// resumption PSKs and retained past epochs; for a public view only the
// public part) so that [Load] restores it after a restart. The encoding holds secrets and the signature key: store
// it as such.
func (g *Group) Marshal() ([]byte, error) {
	w := codec.NewWriter(4096)
	w.Uint8(stateVersion)
	w.Uint16(uint16(g.suite.ID()))
	g.gc.MarshalMLS(w)
	g.tree.Export().MarshalMLS(w)
	w.Opaque(g.interim)
	w.Opaque(g.confirmationTag)
	w.Bool(g.Active())
	if g.Active() {
		g.priv.MarshalMLS(w)
		g.epoch.MarshalMLS(w)
		w.Opaque(g.sigPriv)
		st, err := g.secrets.Encode()
		if err != nil {
			return nil, err
		}
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
			v.tree.Export().MarshalMLS(w)
			vs, err := v.secrets.Encode()
			w.Fail(err)
			w.Opaque(vs)
			w.Opaque(v.senderData)
			w.Opaque(v.membership)
		}
	})
	return w.Bytes()
}

// Load restores a group written by [Group.Marshal]; psks supplies external
// PSKs for later commits.
func Load(b []byte, psks PSKStore) (*Group, error) {
	r := codec.NewReader(b)
	if v := r.Uint8(); v != stateVersion {
		return nil, fmt.Errorf("%w: group state version %d", ErrInvalid, v)
	}
	s, err := ciphersuite.Lookup(ciphersuite.ID(r.Uint16()))
	if err != nil {
		return nil, err
	}
	g := &Group{suite: s, psks: psks, resume: map[uint64][]byte{}}
	r.Value(&g.gc)
	var rt message.RatchetTree
	r.Value(&rt)
	g.interim = r.Opaque()
	g.confirmationTag = r.Opaque()
	var st []byte
	active := r.Bool()
	if active {
		if g.priv, err = treekem.DecodePrivateState(s, r); err != nil {
			return nil, err
		}
		g.epoch = &keyschedule.Epoch{}
		r.Value(g.epoch)
		g.sigPriv = r.Opaque()
		st = r.Opaque()
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
	var pastErr error
	r.VectorEach(func(r *codec.Reader) {
		v := view{epoch: r.Uint64(), gcBytes: r.Opaque()}
		var prt message.RatchetTree
		r.Value(&prt)
		vs := r.Opaque()
		v.senderData, v.membership = r.Opaque(), r.Opaque()
		if r.Err() != nil || pastErr != nil {
			return
		}
		if v.tree, pastErr = ratchettree.Import(s, prt); pastErr == nil {
			v.secrets, pastErr = secrettree.Decode(s, vs)
		}
		g.past = append(g.past, v)
	})
	if err := r.Finish(); err != nil {
		return nil, fmt.Errorf("load group: %w", err)
	}
	if pastErr != nil {
		return nil, fmt.Errorf("load group: past epoch: %w", pastErr)
	}
	if g.tree, err = ratchettree.Import(s, rt); err != nil {
		return nil, fmt.Errorf("load group: %w", err)
	}
	if active {
		if g.secrets, err = secrettree.Decode(s, st); err != nil {
			return nil, fmt.Errorf("load group: %w", err)
		}
	}
	if g.gcBytes, err = codec.Marshal(&g.gc); err != nil {
		return nil, err
	}
	return g, nil
}
