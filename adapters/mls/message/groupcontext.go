package message

import (
	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// GroupContext is the shared state every member of an epoch agrees on
// (§8.1); its encoding is the context of the key schedule.
type GroupContext struct {
	Version                 ProtocolVersion
	CipherSuite             ciphersuite.ID
	GroupID                 []byte
	Epoch                   uint64
	TreeHash                []byte
	ConfirmedTranscriptHash []byte
	Extensions              Extensions
}

// MarshalMLS writes the GroupContext.
func (g *GroupContext) MarshalMLS(w *codec.Writer) {
	w.Uint16(uint16(g.Version))
	w.Uint16(uint16(g.CipherSuite))
	w.Opaque(g.GroupID)
	w.Uint64(g.Epoch)
	w.Opaque(g.TreeHash)
	w.Opaque(g.ConfirmedTranscriptHash)
	g.Extensions.MarshalMLS(w)
}

// UnmarshalMLS reads a GroupContext.
func (g *GroupContext) UnmarshalMLS(r *codec.Reader) {
	g.Version = ProtocolVersion(r.Uint16())
	g.CipherSuite = ciphersuite.ID(r.Uint16())
	g.GroupID = r.Opaque()
	g.Epoch = r.Uint64()
	g.TreeHash = r.Opaque()
	g.ConfirmedTranscriptHash = r.Opaque()
	r.Value(&g.Extensions)
}
