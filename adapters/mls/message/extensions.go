package message

import (
	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// RequiredCapabilities is the required_capabilities extension (§11.1):
// what every member's leaf must support.
type RequiredCapabilities struct {
	ExtensionTypes  []ExtensionType
	ProposalTypes   []ProposalType
	CredentialTypes []CredentialType
}

// MarshalMLS writes the RequiredCapabilities.
func (c *RequiredCapabilities) MarshalMLS(w *codec.Writer) {
	writeU16s(w, c.ExtensionTypes)
	writeU16s(w, c.ProposalTypes)
	writeU16s(w, c.CredentialTypes)
}

// UnmarshalMLS reads RequiredCapabilities.
func (c *RequiredCapabilities) UnmarshalMLS(r *codec.Reader) {
	c.ExtensionTypes = readU16s[ExtensionType](r)
	c.ProposalTypes = readU16s[ProposalType](r)
	c.CredentialTypes = readU16s[CredentialType](r)
}

// ExternalSender is one entry of the external_senders extension (§12.1.8.1).
type ExternalSender struct {
	SignatureKey []byte
	Credential   Credential
}

// MarshalMLS writes the ExternalSender.
func (e *ExternalSender) MarshalMLS(w *codec.Writer) {
	w.Opaque(e.SignatureKey)
	e.Credential.MarshalMLS(w)
}

// UnmarshalMLS reads an ExternalSender.
func (e *ExternalSender) UnmarshalMLS(r *codec.Reader) {
	e.SignatureKey = r.Opaque()
	r.Value(&e.Credential)
}

// ExternalSenders is the external_senders extension: senders allowed to
// propose from outside the group, addressed by index.
type ExternalSenders []ExternalSender

// MarshalMLS writes ExternalSender external_senders<V>.
func (e ExternalSenders) MarshalMLS(w *codec.Writer) {
	w.Vector(func(w *codec.Writer) {
		for i := range e {
			e[i].MarshalMLS(w)
		}
	})
}

// UnmarshalMLS reads ExternalSender external_senders<V>.
func (e *ExternalSenders) UnmarshalMLS(r *codec.Reader) {
	*e = ExternalSenders{}
	r.VectorEach(func(s *codec.Reader) {
		var x ExternalSender
		x.UnmarshalMLS(s)
		*e = append(*e, x)
	})
}

// ExternalPub is the external_pub GroupInfo extension (§12.4.3.2): the HPKE
// public key derived from external_secret.
type ExternalPub struct{ PublicKey []byte }

// MarshalMLS writes the ExternalPub.
func (e *ExternalPub) MarshalMLS(w *codec.Writer) { w.Opaque(e.PublicKey) }

// UnmarshalMLS reads an ExternalPub.
func (e *ExternalPub) UnmarshalMLS(r *codec.Reader) { e.PublicKey = r.Opaque() }

// ApplicationID is the application_id leaf extension (§5.3.3).
type ApplicationID struct{ ID []byte }

// MarshalMLS writes the ApplicationID.
func (a *ApplicationID) MarshalMLS(w *codec.Writer) { w.Opaque(a.ID) }

// UnmarshalMLS reads an ApplicationID.
func (a *ApplicationID) UnmarshalMLS(r *codec.Reader) { a.ID = r.Opaque() }
