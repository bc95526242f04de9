package framing

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// PublicMessage is signed, unencrypted content (§6.2). MembershipTag is
// present exactly when the sender is a member.
type PublicMessage struct {
	Content       FramedContent
	Auth          AuthData
	MembershipTag []byte
}

// MarshalMLS writes the PublicMessage.
func (p *PublicMessage) MarshalMLS(w *codec.Writer) {
	p.Content.MarshalMLS(w)
	p.Auth.marshal(w, p.Content.ContentType)
	if p.Content.Sender.Type == SenderMember {
		w.Opaque(p.MembershipTag)
	}
}

// UnmarshalMLS reads a PublicMessage.
func (p *PublicMessage) UnmarshalMLS(r *codec.Reader) {
	r.Value(&p.Content)
	p.Auth.unmarshal(r, p.Content.ContentType)
	p.MembershipTag = nil
	if p.Content.Sender.Type == SenderMember {
		p.MembershipTag = r.Opaque()
	}
}

// tbm returns AuthenticatedContentTBM (§6.2).
func (p *PublicMessage) tbm(groupContext []byte) ([]byte, error) {
	w := codec.NewWriter(256)
	tbs(w, WirePublicMessage, &p.Content, groupContext)
	p.Auth.marshal(w, p.Content.ContentType)
	return w.Bytes()
}

// NewPublicMessage frames ac as a PublicMessage, adding the membership tag
// for a member sender (§6.2). Application content and content signed for
// another wire format are ErrNotAllowed.
func NewPublicMessage(s *ciphersuite.Suite, ac *AuthenticatedContent, membershipKey, groupContext []byte) (*PublicMessage, error) {
	if ac == nil {
		return nil, fmt.Errorf("%w: no content", ErrNotAllowed)
	}
	if ac.WireFormat != WirePublicMessage {
		return nil, fmt.Errorf("%w: content signed for wire format %d", ErrNotAllowed, ac.WireFormat)
	}
	if ac.Content.ContentType == ContentApplication {
		return nil, fmt.Errorf("%w: application data as PublicMessage", ErrNotAllowed)
	}
	p := &PublicMessage{Content: ac.Content, Auth: ac.Auth}
	if ac.Content.Sender.Type == SenderMember {
		m, err := p.tbm(groupContext)
		if err != nil {
			return nil, fmt.Errorf("public message: %w", err)
		}
		p.MembershipTag = s.MAC(membershipKey, m)
	}
	return p, nil
}

// VerifyMembershipTag checks the membership tag of a member's message;
// messages from non-members carry none and pass. A wrong tag wraps
// ErrMembershipTag.
func (p *PublicMessage) VerifyMembershipTag(s *ciphersuite.Suite, membershipKey, groupContext []byte) error {
	if p.Content.Sender.Type != SenderMember {
		return nil
	}
	m, err := p.tbm(groupContext)
	if err != nil {
		return fmt.Errorf("public message: %w", err)
	}
	if !s.VerifyMAC(membershipKey, m, p.MembershipTag) {
		return ErrMembershipTag
	}
	return nil
}

// AuthenticatedContent returns the message's content and authentication
// data, without checking anything.
func (p *PublicMessage) AuthenticatedContent() *AuthenticatedContent {
	return &AuthenticatedContent{WireFormat: WirePublicMessage, Content: p.Content, Auth: p.Auth}
}

// Unprotect checks the membership tag (for member senders) and returns the
// AuthenticatedContent. Application content is ErrNotAllowed. The caller
// still verifies the signature with the sender's key.
func (p *PublicMessage) Unprotect(s *ciphersuite.Suite, membershipKey, groupContext []byte) (*AuthenticatedContent, error) {
	if p.Content.ContentType == ContentApplication {
		return nil, fmt.Errorf("%w: application data as PublicMessage", ErrNotAllowed)
	}
	if err := p.VerifyMembershipTag(s, membershipKey, groupContext); err != nil {
		return nil, err
	}
	return p.AuthenticatedContent(), nil
}
