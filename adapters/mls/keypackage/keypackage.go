// Package keypackage creates and validates MLS KeyPackages (RFC 9420 §10).
//
// # Validation
//
// [Validate] applies the checks of §10.1 and §7.3 that need no group: a
// supported version and cipher suite, the KeyPackage and leaf signatures, a
// key_package leaf source, an init key different from the encryption key,
// the leaf's extensions and credential type listed in its capabilities, and,
// only when the caller sets [ValidateOptions.Now], the lifetime.
//
// # Errors
//
// Every failed check wraps [ErrInvalid] and names the check.
package keypackage

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// ErrInvalid means a KeyPackage fails a §10.1 check.
var ErrInvalid = errors.New("keypackage: invalid")

// Options describe a KeyPackage to create.
type Options struct {
	Credential    message.Credential
	SignaturePriv []byte
	Lifetime      message.Lifetime
	// Extensions are the KeyPackage's own extensions.
	Extensions message.Extensions
	// LeafExtensions are the leaf node's extensions; their non-default types
	// are added to the capabilities.
	LeafExtensions message.Extensions
	// CapabilityExtensions and CapabilityProposals are further non-default
	// types the leaf advertises.
	CapabilityExtensions []message.ExtensionType
	CapabilityProposals  []message.ProposalType
}

// Bundle is a created KeyPackage with its private keys.
type Bundle struct {
	KeyPackage     *message.KeyPackage
	Encoded        []byte // the KeyPackage's TLS encoding (not an MLSMessage)
	Ref            []byte // its KeyPackageRef
	InitPriv       []byte
	EncryptionPriv []byte
}

// New creates and signs a KeyPackage for suite s with fresh init and
// encryption keys.
func New(s *ciphersuite.Suite, opts *Options) (*Bundle, error) {
	if opts == nil {
		return nil, fmt.Errorf("%w: no options", ErrInvalid)
	}
	sigPub, err := s.SignaturePublicKey(opts.SignaturePriv)
	if err != nil {
		return nil, fmt.Errorf("create key package: %w", err)
	}
	initPriv, initPub, err := s.GenerateHPKEKey()
	if err != nil {
		return nil, err
	}
	encPriv, encPub, err := s.GenerateHPKEKey()
	if err != nil {
		return nil, err
	}
	capExt := slices.Clone(opts.CapabilityExtensions)
	for _, e := range opts.LeafExtensions {
		if e.Type > message.ExtExternalSenders && !slices.Contains(capExt, e.Type) {
			capExt = append(capExt, e.Type)
		}
	}
	kp := &message.KeyPackage{
		Version: message.MLS10, CipherSuite: s.ID(), InitKey: initPub, Extensions: orEmpty(opts.Extensions),
		LeafNode: message.LeafNode{
			EncryptionKey: encPub, SignatureKey: sigPub, Credential: opts.Credential,
			Capabilities: message.Capabilities{
				Versions: []message.ProtocolVersion{message.MLS10}, CipherSuites: []ciphersuite.ID{s.ID()},
				Extensions: orEmptyList(capExt), Proposals: orEmptyList(slices.Clone(opts.CapabilityProposals)),
				Credentials: []message.CredentialType{opts.Credential.Type},
			},
			Source: message.SourceKeyPackage, Lifetime: opts.Lifetime, Extensions: orEmpty(opts.LeafExtensions),
		},
	}
	if err := kp.LeafNode.Sign(s, opts.SignaturePriv, nil, 0); err != nil {
		return nil, err
	}
	if err := kp.Sign(s, opts.SignaturePriv); err != nil {
		return nil, err
	}
	enc, err := codec.Marshal(kp)
	if err != nil {
		return nil, fmt.Errorf("create key package: %w", err)
	}
	ref, err := s.MakeKeyPackageRef(enc)
	if err != nil {
		return nil, err
	}
	return &Bundle{KeyPackage: kp, Encoded: enc, Ref: ref, InitPriv: initPriv, EncryptionPriv: encPriv}, nil
}

func orEmpty(e message.Extensions) message.Extensions {
	if e == nil {
		return message.Extensions{}
	}
	return e
}

func orEmptyList[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// ValidateOptions choose optional checks.
type ValidateOptions struct {
	// Now, when non-zero, requires Now to lie within the leaf's lifetime.
	Now time.Time
}

// Validate checks kp under §10.1 and the group-independent parts of §7.3.
func Validate(s *ciphersuite.Suite, kp *message.KeyPackage, opts *ValidateOptions) error {
	if kp == nil {
		return fmt.Errorf("%w: no key package", ErrInvalid)
	}
	ln := &kp.LeafNode
	switch {
	case kp.Version != message.MLS10:
		return fmt.Errorf("%w: version %d", ErrInvalid, kp.Version)
	case kp.CipherSuite != s.ID():
		return fmt.Errorf("%w: cipher suite %#04x, expected %#04x", ErrInvalid, uint16(kp.CipherSuite), uint16(s.ID()))
	case ln.Source != message.SourceKeyPackage:
		return fmt.Errorf("%w: leaf node source %d", ErrInvalid, ln.Source)
	case string(kp.InitKey) == string(ln.EncryptionKey):
		return fmt.Errorf("%w: init key equals the leaf encryption key", ErrInvalid)
	case !slices.Contains(ln.Capabilities.Credentials, ln.Credential.Type):
		return fmt.Errorf("%w: credential type %d not in the capabilities", ErrInvalid, ln.Credential.Type)
	case !slices.Contains(ln.Capabilities.CipherSuites, s.ID()) || !slices.Contains(ln.Capabilities.Versions, message.MLS10):
		return fmt.Errorf("%w: capabilities lack the package's suite or version", ErrInvalid)
	}
	for _, e := range ln.Extensions {
		if e.Type > message.ExtExternalSenders && !slices.Contains(ln.Capabilities.Extensions, e.Type) {
			return fmt.Errorf("%w: leaf extension %d not in the capabilities", ErrInvalid, e.Type)
		}
	}
	if err := kp.Verify(s); err != nil {
		return fmt.Errorf("%w: key package signature: %v", ErrInvalid, err)
	}
	if err := ln.Verify(s, nil, 0); err != nil {
		return fmt.Errorf("%w: leaf node signature: %v", ErrInvalid, err)
	}
	if opts != nil && !opts.Now.IsZero() {
		now := opts.Now.Unix()
		if now < 0 || uint64(now) < ln.Lifetime.NotBefore || uint64(now) > ln.Lifetime.NotAfter {
			return fmt.Errorf("%w: outside its lifetime", ErrInvalid)
		}
	}
	return nil
}
