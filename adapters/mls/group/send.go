package group

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// content returns a FramedContent from this member for the current epoch.
func (g *Group) content(ct framing.ContentType) *framing.FramedContent {
	return &framing.FramedContent{
		GroupID: g.gc.GroupID, Epoch: g.gc.Epoch, ContentType: ct, AuthenticatedData: []byte{},
		Sender: framing.Sender{Type: framing.SenderMember, LeafIndex: uint32(g.priv.Leaf())},
	}
}

// protect frames signed content in its wire format with the current epoch's keys.
func (g *Group) protect(ac *framing.AuthenticatedContent) (*framing.MLSMessage, error) {
	m := &framing.MLSMessage{Version: message.MLS10, WireFormat: ac.WireFormat}
	var err error
	switch ac.WireFormat {
	case framing.WirePublicMessage:
		m.Public, err = framing.NewPublicMessage(g.suite, ac, g.epoch.MembershipKey, g.gcBytes)
	case framing.WirePrivateMessage:
		m.Private, err = framing.Encrypt(g.suite, ac, g.secrets, g.epoch.SenderDataSecret, 0)
	default:
		err = fmt.Errorf("%w: wire format %d", ErrInvalid, ac.WireFormat)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Protect encrypts application data as a PrivateMessage of the current epoch.
func (g *Group) Protect(data []byte) (*framing.MLSMessage, error) {
	return g.ProtectWithAuthenticatedData(data, nil)
}

// ProtectWithAuthenticatedData is Protect with authenticated_data, which
// travels in the clear and is covered by the signature and the AEAD (§6).
func (g *Group) ProtectWithAuthenticatedData(data, aad []byte) (*framing.MLSMessage, error) {
	if g.Public() {
		return nil, errPublic
	}
	if err := g.ended(); err != nil {
		return nil, err
	}
	c := g.content(framing.ContentApplication)
	c.Application = data
	if aad != nil {
		c.AuthenticatedData = aad
	}
	ac, err := framing.Sign(g.suite, framing.WirePrivateMessage, c, g.sigPriv, g.gcBytes)
	if err != nil {
		return nil, err
	}
	return g.protect(ac)
}

// Propose sends a proposal in wire format wf and caches it, so that a
// commit of this epoch can include it by reference.
func (g *Group) Propose(p *message.Proposal, wf framing.WireFormat) (*framing.MLSMessage, error) {
	if g.Public() {
		return nil, errPublic
	}
	if err := g.ended(); err != nil {
		return nil, err
	}
	c := g.content(framing.ContentProposal)
	c.Proposal = p
	ac, err := framing.Sign(g.suite, wf, c, g.sigPriv, g.gcBytes)
	if err != nil {
		return nil, err
	}
	ref, err := ac.ProposalRef(g.suite)
	if err != nil {
		return nil, err
	}
	m, err := g.protect(ac)
	if err != nil {
		return nil, err
	}
	g.proposals = append(g.proposals, cached{ref: ref, proposal: p, sender: c.Sender})
	return m, nil
}

// ProposeUpdate proposes replacing this member's leaf with one under a
// fresh encryption key (§12.1.2); the private key is kept until a commit
// applies the update.
func (g *Group) ProposeUpdate(wf framing.WireFormat) (*framing.MLSMessage, error) {
	if g.Public() {
		return nil, errPublic
	}
	me := g.priv.Leaf()
	leaf := *g.tree.Leaf(me)
	priv, pub, err := g.suite.GenerateHPKEKey()
	if err != nil {
		return nil, err
	}
	leaf.EncryptionKey, leaf.Source, leaf.ParentHash = pub, message.SourceUpdate, nil
	if err := leaf.Sign(g.suite, g.sigPriv, g.gc.GroupID, uint32(me)); err != nil {
		return nil, err
	}
	m, err := g.Propose(&message.Proposal{Type: message.ProposalUpdate, Update: &message.Update{LeafNode: leaf}}, wf)
	if err != nil {
		return nil, err
	}
	if g.leafKeys == nil {
		g.leafKeys = map[string][]byte{}
	}
	g.leafKeys[string(pub)] = priv
	return m, nil
}
