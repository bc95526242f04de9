package message

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// ErrUnknownType means a select named a type this package cannot decode.
var ErrUnknownType = fmt.Errorf("%w: unknown type", codec.ErrInvalidValue)

// ProtocolVersion is the MLS protocol version (§6).
type ProtocolVersion uint16

// MLS10 is the only protocol version, mls10.
const MLS10 ProtocolVersion = 1

// ExtensionType identifies an extension (§13.3).
type ExtensionType uint16

// Extension types defined by RFC 9420.
const (
	ExtApplicationID        ExtensionType = 1
	ExtRatchetTree          ExtensionType = 2
	ExtRequiredCapabilities ExtensionType = 3
	ExtExternalPub          ExtensionType = 4
	ExtExternalSenders      ExtensionType = 5
)

// Extension is one typed, opaque extension (§13).
type Extension struct {
	Type ExtensionType
	Data []byte
}

// Extensions is a list of extensions in wire order.
type Extensions []Extension

// MarshalMLS writes Extension extensions<V>.
func (e Extensions) MarshalMLS(w *codec.Writer) {
	w.Vector(func(w *codec.Writer) {
		for _, x := range e {
			w.Uint16(uint16(x.Type))
			w.Opaque(x.Data)
		}
	})
}

// UnmarshalMLS reads Extension extensions<V>.
func (e *Extensions) UnmarshalMLS(r *codec.Reader) {
	*e = Extensions{}
	r.VectorEach(func(s *codec.Reader) {
		x := Extension{Type: ExtensionType(s.Uint16())}
		x.Data = s.Opaque()
		*e = append(*e, x)
	})
}

// Find returns the data of the first extension of type t.
func (e Extensions) Find(t ExtensionType) ([]byte, bool) {
	for _, x := range e {
		if x.Type == t {
			return x.Data, true
		}
	}
	return nil, false
}

// CredentialType identifies a credential format (§5.3).
type CredentialType uint16

// Credential types defined by RFC 9420.
const (
	CredentialBasic CredentialType = 1
	CredentialX509  CredentialType = 2
)

// Credential binds an identity to a signature key (§5.3). Identity is set
// for basic credentials, Certificates (DER, leaf first) for X.509.
type Credential struct {
	Type         CredentialType
	Identity     []byte
	Certificates [][]byte
}

// MarshalMLS writes the Credential.
func (c *Credential) MarshalMLS(w *codec.Writer) {
	w.Uint16(uint16(c.Type))
	switch c.Type {
	case CredentialBasic:
		w.Opaque(c.Identity)
	case CredentialX509:
		w.Vector(func(w *codec.Writer) {
			for _, cert := range c.Certificates {
				w.Opaque(cert)
			}
		})
	default:
		w.Fail(fmt.Errorf("%w: credential type %d", ErrUnknownType, c.Type))
	}
}

// UnmarshalMLS reads a Credential.
func (c *Credential) UnmarshalMLS(r *codec.Reader) {
	c.Type = CredentialType(r.Uint16())
	switch c.Type {
	case CredentialBasic:
		c.Identity = r.Opaque()
	case CredentialX509:
		c.Certificates = [][]byte{}
		r.VectorEach(func(s *codec.Reader) { c.Certificates = append(c.Certificates, s.Opaque()) })
	default:
		r.Fail(fmt.Errorf("%w: credential type %d", ErrUnknownType, c.Type))
	}
}

// Capabilities lists what a client supports (§7.2).
type Capabilities struct {
	Versions     []ProtocolVersion
	CipherSuites []ciphersuite.ID
	Extensions   []ExtensionType
	Proposals    []ProposalType
	Credentials  []CredentialType
}

func writeU16s[T ~uint16](w *codec.Writer, v []T) {
	w.Vector(func(w *codec.Writer) {
		for _, x := range v {
			w.Uint16(uint16(x))
		}
	})
}

func readU16s[T ~uint16](r *codec.Reader) []T {
	v := []T{}
	r.VectorEach(func(s *codec.Reader) { v = append(v, T(s.Uint16())) })
	return v
}

// MarshalMLS writes the Capabilities.
func (c *Capabilities) MarshalMLS(w *codec.Writer) {
	writeU16s(w, c.Versions)
	writeU16s(w, c.CipherSuites)
	writeU16s(w, c.Extensions)
	writeU16s(w, c.Proposals)
	writeU16s(w, c.Credentials)
}

// UnmarshalMLS reads Capabilities.
func (c *Capabilities) UnmarshalMLS(r *codec.Reader) {
	c.Versions = readU16s[ProtocolVersion](r)
	c.CipherSuites = readU16s[ciphersuite.ID](r)
	c.Extensions = readU16s[ExtensionType](r)
	c.Proposals = readU16s[ProposalType](r)
	c.Credentials = readU16s[CredentialType](r)
}

// Lifetime bounds the validity of a KeyPackage's leaf in seconds since the
// Unix epoch (§7.2).
type Lifetime struct {
	NotBefore, NotAfter uint64
}

// HPKECiphertext is an HPKE KEM output and ciphertext (§7.6).
type HPKECiphertext struct {
	KEMOutput  []byte
	Ciphertext []byte
}

// MarshalMLS writes the HPKECiphertext.
func (c *HPKECiphertext) MarshalMLS(w *codec.Writer) {
	w.Opaque(c.KEMOutput)
	w.Opaque(c.Ciphertext)
}

// UnmarshalMLS reads an HPKECiphertext.
func (c *HPKECiphertext) UnmarshalMLS(r *codec.Reader) {
	c.KEMOutput = r.Opaque()
	c.Ciphertext = r.Opaque()
}
