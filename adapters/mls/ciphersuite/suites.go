package ciphersuite

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"

	circlhpke "github.com/cloudflare/circl/hpke"
	"golang.org/x/crypto/chacha20poly1305"
)

// ID is a cipher suite identifier from the IANA "MLS Cipher Suites" registry.
type ID uint16

// Cipher suites regroup implements.
const (
	MLS128X25519AES128GCMSHA256Ed25519        ID = 0x0001
	MLS128P256AES128GCMSHA256P256             ID = 0x0002
	MLS128X25519ChaCha20Poly1305SHA256Ed25519 ID = 0x0003
	MLS256X448AES256GCMSHA512Ed448            ID = 0x0004
	MLS256P521AES256GCMSHA512P521             ID = 0x0005
	MLS256X448ChaCha20Poly1305SHA512Ed448     ID = 0x0006
	MLS256P384AES256GCMSHA384P384             ID = 0x0007
)

// SignatureScheme names a signature algorithm of a suite.
type SignatureScheme uint16

// Signature schemes (TLS SignatureScheme values).
const (
	Ed25519              SignatureScheme = 0x0807
	ECDSASecp256r1SHA256 SignatureScheme = 0x0403
	ECDSASecp384r1SHA384 SignatureScheme = 0x0503
	ECDSASecp521r1SHA512 SignatureScheme = 0x0603
	Ed448                SignatureScheme = 0x0808
)

// Sentinel errors.
var (
	// ErrUnsupportedSuite means the suite ID is not in the table.
	ErrUnsupportedSuite = errors.New("ciphersuite: unsupported cipher suite")
	// ErrInvalidKey means a key has the wrong size or is not a valid point.
	ErrInvalidKey = errors.New("ciphersuite: invalid key")
	// ErrDecrypt means AEAD or HPKE decryption failed.
	ErrDecrypt = errors.New("ciphersuite: decryption failed")
	// ErrBadSignature means a signature did not verify.
	ErrBadSignature = errors.New("ciphersuite: signature does not verify")
	// ErrInvalidLength means a requested output length is impossible.
	ErrInvalidLength = errors.New("ciphersuite: invalid length")
)

// row is one cipher suite of the table.
type row struct {
	id        ID
	name      string
	newHash   func() hash.Hash
	hashSize  int
	newAEAD   func(key []byte) (cipher.AEAD, error)
	keySize   int
	nonceSize int
	kem       hpke.KEM // nil where x448 is set
	x448      *x448KEM // DHKEM(X448) through circl, absent from crypto/hpke
	skSize    int      // Nsk: HPKE private keys shorter than this are left-padded
	kdf       hpke.KDF
	aead      hpke.AEAD
	sig       SignatureScheme
}

func newAESGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// table holds every supported suite; a new suite is a new row.
var table = []row{
	{
		id: MLS128X25519AES128GCMSHA256Ed25519, name: "MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519",
		newHash: sha256.New, hashSize: sha256.Size,
		newAEAD: newAESGCM, keySize: 16, nonceSize: 12,
		skSize: 32, kem: hpke.DHKEM(ecdh.X25519()), kdf: hpke.HKDFSHA256(), aead: hpke.AES128GCM(),
		sig: Ed25519,
	},
	{
		id: MLS128P256AES128GCMSHA256P256, name: "MLS_128_DHKEMP256_AES128GCM_SHA256_P256",
		newHash: sha256.New, hashSize: sha256.Size,
		newAEAD: newAESGCM, keySize: 16, nonceSize: 12,
		skSize: 32, kem: hpke.DHKEM(ecdh.P256()), kdf: hpke.HKDFSHA256(), aead: hpke.AES128GCM(),
		sig: ECDSASecp256r1SHA256,
	},
	{
		id: MLS128X25519ChaCha20Poly1305SHA256Ed25519, name: "MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519",
		newHash: sha256.New, hashSize: sha256.Size,
		newAEAD: chacha20poly1305.New, keySize: chacha20poly1305.KeySize, nonceSize: chacha20poly1305.NonceSize,
		skSize: 32, kem: hpke.DHKEM(ecdh.X25519()), kdf: hpke.HKDFSHA256(), aead: hpke.ChaCha20Poly1305(),
		sig: Ed25519,
	},
	{
		id: MLS256X448AES256GCMSHA512Ed448, name: "MLS_256_DHKEMX448_AES256GCM_SHA512_Ed448",
		newHash: sha512.New, hashSize: sha512.Size,
		newAEAD: newAESGCM, keySize: 32, nonceSize: 12,
		skSize: x448SKSize, x448: newX448KEM(circlhpke.AEAD_AES256GCM),
		sig: Ed448,
	},
	{
		id: MLS256P521AES256GCMSHA512P521, name: "MLS_256_DHKEMP521_AES256GCM_SHA512_P521",
		newHash: sha512.New, hashSize: sha512.Size,
		newAEAD: newAESGCM, keySize: 32, nonceSize: 12,
		skSize: 66, kem: hpke.DHKEM(ecdh.P521()), kdf: hpke.HKDFSHA512(), aead: hpke.AES256GCM(),
		sig: ECDSASecp521r1SHA512,
	},
	{
		id: MLS256X448ChaCha20Poly1305SHA512Ed448, name: "MLS_256_DHKEMX448_CHACHA20POLY1305_SHA512_Ed448",
		newHash: sha512.New, hashSize: sha512.Size,
		newAEAD: chacha20poly1305.New, keySize: chacha20poly1305.KeySize, nonceSize: chacha20poly1305.NonceSize,
		skSize: x448SKSize, x448: newX448KEM(circlhpke.AEAD_ChaCha20Poly1305),
		sig: Ed448,
	},
	{
		id: MLS256P384AES256GCMSHA384P384, name: "MLS_256_DHKEMP384_AES256GCM_SHA384_P384",
		newHash: sha512.New384, hashSize: sha512.Size384,
		newAEAD: newAESGCM, keySize: 32, nonceSize: 12,
		skSize: 48, kem: hpke.DHKEM(ecdh.P384()), kdf: hpke.HKDFSHA384(), aead: hpke.AES256GCM(),
		sig: ECDSASecp384r1SHA384,
	},
}

// Suite is a supported cipher suite. Its methods are safe for concurrent use.
type Suite struct{ r *row }

var suites = func() map[ID]*Suite {
	m := make(map[ID]*Suite, len(table))
	for i := range table {
		m[table[i].id] = &Suite{r: &table[i]}
	}
	return m
}()

// Lookup returns the suite with the given ID, or an error wrapping
// ErrUnsupportedSuite.
func Lookup(id ID) (*Suite, error) {
	s, ok := suites[id]
	if !ok {
		return nil, fmt.Errorf("%w: 0x%04x", ErrUnsupportedSuite, uint16(id))
	}
	return s, nil
}

// Supported lists the IDs of all supported suites in table order.
func Supported() []ID {
	ids := make([]ID, len(table))
	for i := range table {
		ids[i] = table[i].id
	}
	return ids
}

// ID returns the suite's registry value.
func (s *Suite) ID() ID { return s.r.id }

// Name returns the suite's registry name.
func (s *Suite) Name() string { return s.r.name }

// HashSize returns Nh, the output size of the suite's hash and KDF.
func (s *Suite) HashSize() int { return s.r.hashSize }

// KeySize returns Nk, the AEAD key size.
func (s *Suite) KeySize() int { return s.r.keySize }

// NonceSize returns Nn, the AEAD nonce size.
func (s *Suite) NonceSize() int { return s.r.nonceSize }

// SignatureScheme returns the suite's signature algorithm.
func (s *Suite) SignatureScheme() SignatureScheme { return s.r.sig }
