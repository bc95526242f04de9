package framing_test

import (
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/secrettree"
)

// TestNoPanicOnHostileInput drives the protection functions with empty and
// inconsistent structures: each must return an error, never panic.
func TestNoPanicOnHostileInput(t *testing.T) {
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	tree, _ := secrettree.New(s, make([]byte, 32), 2, nil)
	contents := []framing.FramedContent{
		{},
		{ContentType: framing.ContentProposal},
		{ContentType: framing.ContentCommit, Sender: framing.Sender{Type: framing.SenderMember, LeafIndex: 9}},
		{ContentType: framing.ContentProposal, Proposal: &message.Proposal{Type: 99}, Sender: framing.Sender{Type: framing.SenderMember}},
		{ContentType: 7, Sender: framing.Sender{Type: 9}},
	}
	for _, wf := range []framing.WireFormat{0, framing.WirePublicMessage, framing.WirePrivateMessage} {
		for i := range contents {
			ac := &framing.AuthenticatedContent{WireFormat: wf, Content: contents[i]}
			_, _ = framing.Sign(s, wf, &contents[i], nil, nil)
			_ = ac.Verify(s, nil, nil)
			_, _ = ac.ConfirmedTranscriptHashInput()
			_, _ = ac.ProposalRef(s)
			_, _ = framing.NewPublicMessage(s, ac, nil, nil)
			_, _ = framing.Encrypt(s, ac, tree, nil, -1)
			_, _ = framing.Encrypt(s, ac, tree, make([]byte, 32), 10)
			pub := &framing.PublicMessage{Content: contents[i]}
			_, _ = pub.Unprotect(s, nil, nil)
		}
	}
	for _, pm := range []*framing.PrivateMessage{{}, {ContentType: framing.ContentApplication}, {ContentType: 3, Ciphertext: make([]byte, 100), EncryptedSenderData: make([]byte, 28)}} {
		_, _ = framing.Decrypt(s, pm, tree, nil)
		_, _ = framing.DecryptSenderData(s, pm, make([]byte, 32))
	}
}
