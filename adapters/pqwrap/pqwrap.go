// Package pqwrap implements the X-Wing Welcome wrappers: HPKE base mode
// (RFC 9180) with the X-Wing hybrid KEM (ML-KEM-768 + X25519, the
// draft-connolly-cfrg-xwing-kem construction) from cloudflare/circl,
// HKDF-SHA256 and ChaCha20-Poly1305.
//
// The RFC 9180 key schedule here takes the HPKE KEM id as a parameter, which
// is the only difference between the two algorithms:
//
//   - [NewXWing]: WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6 under KEM
//     id 0x004D, which deployed clients use;
//   - [NewXWingCanonical]: the same KEM under the canonical id 0x647A
//     (MLKEM768-X25519 of draft-ietf-hpke-pq), registered separately under
//     the local id ports.WrapperXWingCanonical. It interoperates with the
//     standard library's crypto/hpke and reproduces its known-answer vectors.
//
// Public keys are 1,216 bytes (JOIN-090); private keys are stored as the
// 32-byte X-Wing seed; kem_output is 1,120 bytes.
//
// # Errors
//
// Open reports ports.ErrNotRecipient when the first payload does not
// authenticate (wrong key, wrong info, tampering or a message sealed under the
// other KEM id), ports.ErrCorrupt when the framing does not decode or a later
// payload does not authenticate, and ports.ErrInvalidKey for a private key
// that is not a 32-byte seed.
package pqwrap

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/cloudflare/circl/kem/xwing"

	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/ports"
)

// HPKE KEM identifiers of the X-Wing wrappers.
const (
	// KEMIDDraft06 is the KEM id deployed clients use for
	// WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6.
	KEMIDDraft06 uint16 = 0x004D
	// KEMIDCanonical is MLKEM768-X25519 in draft-ietf-hpke-pq and Go's
	// crypto/hpke.
	KEMIDCanonical uint16 = 0x647A
)

// Sizes of an X-Wing wrapper.
const (
	// PublicKeySize is the size of an X-Wing public key (JOIN-090).
	PublicKeySize = xwing.PublicKeySize
	// PrivateKeySize is the size of the stored seed.
	PrivateKeySize = xwing.SeedSize
	// EncapsulatedKeySize is the size of kem_output.
	EncapsulatedKeySize = xwing.CiphertextSize
	// TagSize is the ChaCha20-Poly1305 tag each ciphertext carries.
	TagSize = 16
)

// XWing is an X-Wing Welcome wrapper bound to one HPKE KEM id. It is safe
// for concurrent use.
type XWing struct {
	id    ports.WrapperAlgorithmID
	kemID uint16
	name  string
}

var _ ports.WrapperAlgorithm = (*XWing)(nil)

// NewXWing returns WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6 (KEM id
// 0x004D), the post-quantum wrapper on the wire.
func NewXWing() *XWing {
	return &XWing{id: ports.WrapperXWingMLKEM768Draft6, kemID: KEMIDDraft06, name: "xwing-draft06"}
}

// NewXWingCanonical returns the X-Wing wrapper under the canonical KEM id
// 0x647A, registered under ports.WrapperXWingCanonical.
func NewXWingCanonical() *XWing {
	return &XWing{id: ports.WrapperXWingCanonical, kemID: KEMIDCanonical, name: "xwing-canonical"}
}

// ID returns the identifier the wrapper registers under.
func (x *XWing) ID() ports.WrapperAlgorithmID { return x.id }

// KEMID returns the HPKE KEM id its key schedule uses.
func (x *XWing) KEMID() uint16 { return x.kemID }

// PublicKeySize returns 1,216.
func (x *XWing) PublicKeySize() int { return PublicKeySize }

// GenerateKey returns a fresh key pair: a 1,216-byte public key and the
// 32-byte seed it derives from.
func (x *XWing) GenerateKey(ctx context.Context) (pub, priv []byte, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("generate %s key: %w", x.name, err)
	}
	priv, pub, err = xwing.GenerateKeyPairPacked(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate %s key: %v", x.name, err)
	}
	return pub, priv, nil
}

// encapsulate runs X-Wing encapsulation to pub, with eseed as the 64 bytes
// of randomness (nil draws them from crypto/rand).
func (x *XWing) encapsulate(pub, eseed []byte) (ss, enc []byte, err error) {
	if len(pub) != PublicKeySize {
		return nil, nil, fmt.Errorf("%w: public key is %d bytes, want %d", ports.ErrInvalidKey, len(pub), PublicKeySize)
	}
	ss, enc, err = xwing.Encapsulate(pub, eseed)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: encapsulation: %v", ports.ErrInvalidKey, err)
	}
	return ss, enc, nil
}

// CheckPublicKey runs X-Wing encapsulation (including ML-KEM's
// encapsulation key check) for pub and reports ports.ErrInvalidKey when it
// fails (JOIN-090).
func (x *XWing) CheckPublicKey(ctx context.Context, pub []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("check %s public key: %w", x.name, err)
	}
	if _, _, err := x.encapsulate(pub, nil); err != nil {
		return fmt.Errorf("check %s public key: %w", x.name, err)
	}
	return nil
}

// Seal seals plaintexts in order under one HPKE context to pub; see
// ports.WrapperAlgorithm for the layout.
func (x *XWing) Seal(ctx context.Context, pub, info []byte, plaintexts ...[]byte) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("seal %s welcome: %w", x.name, err)
	}
	return x.seal(pub, info, nil, plaintexts)
}

func (x *XWing) seal(pub, info, eseed []byte, plaintexts [][]byte) ([][]byte, error) {
	if len(plaintexts) == 0 {
		return nil, fmt.Errorf("seal %s welcome: %w: no plaintext", x.name, ports.ErrInvalidInput)
	}
	ss, enc, err := x.encapsulate(pub, eseed)
	if err != nil {
		return nil, fmt.Errorf("seal %s welcome: %w", x.name, err)
	}
	ks, err := newKeySchedule(x.kemID, ss, info)
	if err != nil {
		return nil, fmt.Errorf("seal %s welcome: key schedule: %v", x.name, err)
	}
	hc, err := newContext(ks)
	if err != nil {
		return nil, fmt.Errorf("seal %s welcome: %v", x.name, err)
	}
	out := make([][]byte, len(plaintexts))
	for i, pt := range plaintexts {
		out[i] = hc.seal(nil, pt)
	}
	if out[0], err = hpkewrap.MarshalCiphertext(enc, out[0]); err != nil {
		return nil, fmt.Errorf("seal %s welcome: %w", x.name, err)
	}
	return out, nil
}

// Open opens sealed payloads addressed to the seed priv; see the package
// documentation for the error classes.
func (x *XWing) Open(ctx context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open %s welcome: %w", x.name, err)
	}
	if len(sealed) == 0 {
		return nil, fmt.Errorf("open %s welcome: %w: no ciphertext", x.name, ports.ErrInvalidInput)
	}
	if len(priv) != PrivateKeySize {
		return nil, fmt.Errorf("open %s welcome: %w: private key is %d bytes, want a %d-byte seed", x.name, ports.ErrInvalidKey, len(priv), PrivateKeySize)
	}
	enc, first, err := hpkewrap.ParseCiphertext(sealed[0])
	if err != nil {
		return nil, fmt.Errorf("open %s welcome: %w", x.name, err)
	}
	if len(enc) != EncapsulatedKeySize {
		return nil, fmt.Errorf("open %s welcome: %w: kem_output is %d bytes, want %d", x.name, ports.ErrCorrupt, len(enc), EncapsulatedKeySize)
	}
	ss := xwing.Decapsulate(enc, priv)
	ks, err := newKeySchedule(x.kemID, ss, info)
	if err != nil {
		return nil, fmt.Errorf("open %s welcome: key schedule: %v", x.name, err)
	}
	hc, err := newContext(ks)
	if err != nil {
		return nil, fmt.Errorf("open %s welcome: %v", x.name, err)
	}
	out := make([][]byte, len(sealed))
	if out[0], err = hc.open(nil, first); err != nil {
		return nil, fmt.Errorf("open %s welcome: %w", x.name, ports.ErrNotRecipient)
	}
	for i := 1; i < len(sealed); i++ {
		if out[i], err = hc.open(nil, sealed[i]); err != nil {
			return nil, fmt.Errorf("open %s welcome: payload %d: %w: %v", x.name, i, ports.ErrCorrupt, err)
		}
	}
	return out, nil
}
