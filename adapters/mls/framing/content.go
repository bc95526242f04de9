package framing

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// FramedContent is the authored content of a message (§6). ContentType
// selects which of Application, Proposal and Commit is meaningful.
type FramedContent struct {
	GroupID           []byte
	Epoch             uint64
	Sender            Sender
	AuthenticatedData []byte
	ContentType       ContentType
	Application       []byte
	Proposal          *message.Proposal
	Commit            *message.Commit
}

// marshalBody writes the content-type-selected body.
func marshalBody(w *codec.Writer, ct ContentType, app []byte, p *message.Proposal, c *message.Commit) {
	switch {
	case ct == ContentApplication:
		w.Opaque(app)
	case ct == ContentProposal && p != nil:
		p.MarshalMLS(w)
	case ct == ContentCommit && c != nil:
		c.MarshalMLS(w)
	default:
		w.Fail(fmt.Errorf("%w: content type %d without its body", message.ErrUnknownType, ct))
	}
}

// unmarshalBody reads the content-type-selected body.
func unmarshalBody(r *codec.Reader, ct ContentType) (app []byte, p *message.Proposal, c *message.Commit) {
	switch ct {
	case ContentApplication:
		app = r.Opaque()
	case ContentProposal:
		p = new(message.Proposal)
		r.Value(p)
	case ContentCommit:
		c = new(message.Commit)
		r.Value(c)
	default:
		r.Fail(fmt.Errorf("%w: content type %d", message.ErrUnknownType, ct))
	}
	return app, p, c
}

// MarshalMLS writes the FramedContent.
func (f *FramedContent) MarshalMLS(w *codec.Writer) {
	w.Opaque(f.GroupID)
	w.Uint64(f.Epoch)
	f.Sender.MarshalMLS(w)
	w.Opaque(f.AuthenticatedData)
	w.Uint8(uint8(f.ContentType))
	marshalBody(w, f.ContentType, f.Application, f.Proposal, f.Commit)
}

// UnmarshalMLS reads a FramedContent.
func (f *FramedContent) UnmarshalMLS(r *codec.Reader) {
	f.GroupID = r.Opaque()
	f.Epoch = r.Uint64()
	r.Value(&f.Sender)
	f.AuthenticatedData = r.Opaque()
	f.ContentType = ContentType(r.Uint8())
	if r.Err() == nil {
		f.Application, f.Proposal, f.Commit = unmarshalBody(r, f.ContentType)
	}
}

// AuthData is FramedContentAuthData: the signature, and for commits the
// confirmation tag (§6.1).
type AuthData struct {
	Signature       []byte
	ConfirmationTag []byte
}

func (a *AuthData) marshal(w *codec.Writer, ct ContentType) {
	w.Opaque(a.Signature)
	if ct == ContentCommit {
		w.Opaque(a.ConfirmationTag)
	}
}

func (a *AuthData) unmarshal(r *codec.Reader, ct ContentType) {
	a.Signature = r.Opaque()
	a.ConfirmationTag = nil
	if ct == ContentCommit {
		a.ConfirmationTag = r.Opaque()
	}
}

// AuthenticatedContent is content with its authentication data and the
// wire format it was (or will be) sent in (§6.1).
type AuthenticatedContent struct {
	WireFormat WireFormat
	Content    FramedContent
	Auth       AuthData
}

// MarshalMLS writes the AuthenticatedContent.
func (a *AuthenticatedContent) MarshalMLS(w *codec.Writer) {
	w.Uint16(uint16(a.WireFormat))
	a.Content.MarshalMLS(w)
	a.Auth.marshal(w, a.Content.ContentType)
}

// UnmarshalMLS reads an AuthenticatedContent.
func (a *AuthenticatedContent) UnmarshalMLS(r *codec.Reader) {
	a.WireFormat = WireFormat(r.Uint16())
	r.Value(&a.Content)
	a.Auth.unmarshal(r, a.Content.ContentType)
}

// signLabel is the SignWithLabel label of FramedContentTBS.
const signLabel = "FramedContentTBS"

// tbs writes FramedContentTBS; groupContext is the encoded GroupContext,
// included for member and new-member-commit senders.
func tbs(w *codec.Writer, wf WireFormat, f *FramedContent, groupContext []byte) {
	w.Uint16(uint16(message.MLS10))
	w.Uint16(uint16(wf))
	f.MarshalMLS(w)
	if f.Sender.Type == SenderMember || f.Sender.Type == SenderNewMemberCommit {
		w.Raw(groupContext)
	}
}

// TBS returns the FramedContentTBS encoding of a (§6.1).
func (a *AuthenticatedContent) TBS(groupContext []byte) ([]byte, error) {
	w := codec.NewWriter(256)
	tbs(w, a.WireFormat, &a.Content, groupContext)
	return w.Bytes()
}

// Sign signs content for wire format wf with the sender's signature key
// (§6.1). The confirmation tag of a commit is left for the caller, since
// it depends on the confirmed transcript hash that covers this signature.
func Sign(s *ciphersuite.Suite, wf WireFormat, content *FramedContent, sigPriv, groupContext []byte) (*AuthenticatedContent, error) {
	if content == nil {
		return nil, fmt.Errorf("%w: no content", ErrNotAllowed)
	}
	if wf != WirePublicMessage && wf != WirePrivateMessage {
		return nil, fmt.Errorf("%w: content in wire format %d", ErrNotAllowed, wf)
	}
	ac := &AuthenticatedContent{WireFormat: wf, Content: *content}
	t, err := ac.TBS(groupContext)
	if err != nil {
		return nil, fmt.Errorf("sign content: %w", err)
	}
	sig, err := s.SignWithLabel(sigPriv, signLabel, t)
	if err != nil {
		return nil, fmt.Errorf("sign content: %w", err)
	}
	ac.Auth.Signature = sig
	return ac, nil
}

// Verify checks the content signature under the sender's public key; a
// mismatch wraps ErrSignature.
func (a *AuthenticatedContent) Verify(s *ciphersuite.Suite, sigPub, groupContext []byte) error {
	t, err := a.TBS(groupContext)
	if err != nil {
		return fmt.Errorf("verify content: %w", err)
	}
	if err := s.VerifyWithLabel(sigPub, signLabel, t, a.Auth.Signature); err != nil {
		return fmt.Errorf("%w: %v", ErrSignature, err)
	}
	return nil
}

// ConfirmedTranscriptHashInput returns the encoding of
// ConfirmedTranscriptHashInput (wire_format, content, signature; §8.2).
func (a *AuthenticatedContent) ConfirmedTranscriptHashInput() ([]byte, error) {
	w := codec.NewWriter(256)
	w.Uint16(uint16(a.WireFormat))
	a.Content.MarshalMLS(w)
	w.Opaque(a.Auth.Signature)
	return w.Bytes()
}

// ProposalRef returns the ProposalRef of a proposal's AuthenticatedContent
// (§5.2).
func (a *AuthenticatedContent) ProposalRef(s *ciphersuite.Suite) ([]byte, error) {
	if a.Content.ContentType != ContentProposal {
		return nil, fmt.Errorf("%w: proposal ref of content type %d", ErrNotAllowed, a.Content.ContentType)
	}
	b, err := codec.Marshal(a)
	if err != nil {
		return nil, err
	}
	return s.MakeProposalRef(b)
}
