package pqwrap

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// HPKE identifiers of the ciphersuite every X-Wing wrapper uses.
const (
	kdfHKDFSHA256        = 0x0001
	aeadChaCha20Poly1305 = 0x0003
	modeBase             = 0x00
	hashSize             = sha256.Size
)

// suiteID returns "HPKE" || I2OSP(kem_id, 2) || I2OSP(kdf_id, 2) ||
// I2OSP(aead_id, 2) (RFC 9180 section 5.1).
func suiteID(kemID uint16) []byte {
	id := []byte("HPKE\x00\x00\x00\x00\x00\x00")
	binary.BigEndian.PutUint16(id[4:], kemID)
	binary.BigEndian.PutUint16(id[6:], kdfHKDFSHA256)
	binary.BigEndian.PutUint16(id[8:], aeadChaCha20Poly1305)
	return id
}

// labeledExtract is RFC 9180's LabeledExtract over HKDF-SHA256.
func labeledExtract(suite, salt []byte, label string, ikm []byte) ([]byte, error) {
	in := make([]byte, 0, 7+len(suite)+len(label)+len(ikm))
	in = append(in, "HPKE-v1"...)
	in = append(in, suite...)
	in = append(in, label...)
	in = append(in, ikm...)
	return hkdf.Extract(sha256.New, in, salt)
}

// labeledExpand is RFC 9180's LabeledExpand over HKDF-SHA256.
func labeledExpand(suite, prk []byte, label string, info []byte, length int) ([]byte, error) {
	in := make([]byte, 0, 9+len(suite)+len(label)+len(info))
	in = binary.BigEndian.AppendUint16(in, uint16(length))
	in = append(in, "HPKE-v1"...)
	in = append(in, suite...)
	in = append(in, label...)
	in = append(in, info...)
	return hkdf.Expand(sha256.New, prk, string(in), length)
}

// keySchedule holds the outputs of RFC 9180's KeySchedule in base mode.
type keySchedule struct {
	key, baseNonce, exporterSecret []byte
}

// newKeySchedule runs RFC 9180 section 5.1 KeySchedule for mode_base (no PSK)
// for the suite of kemID with HKDF-SHA256 and ChaCha20-Poly1305.
func newKeySchedule(kemID uint16, sharedSecret, info []byte) (*keySchedule, error) {
	suite := suiteID(kemID)
	pskIDHash, err := labeledExtract(suite, nil, "psk_id_hash", nil)
	if err != nil {
		return nil, err
	}
	infoHash, err := labeledExtract(suite, nil, "info_hash", info)
	if err != nil {
		return nil, err
	}
	ksContext := make([]byte, 0, 1+2*hashSize)
	ksContext = append(ksContext, modeBase)
	ksContext = append(ksContext, pskIDHash...)
	ksContext = append(ksContext, infoHash...)
	secret, err := labeledExtract(suite, sharedSecret, "secret", nil)
	if err != nil {
		return nil, err
	}
	var ks keySchedule
	if ks.key, err = labeledExpand(suite, secret, "key", ksContext, chacha20poly1305.KeySize); err != nil {
		return nil, err
	}
	if ks.baseNonce, err = labeledExpand(suite, secret, "base_nonce", ksContext, chacha20poly1305.NonceSize); err != nil {
		return nil, err
	}
	if ks.exporterSecret, err = labeledExpand(suite, secret, "exp", ksContext, hashSize); err != nil {
		return nil, err
	}
	return &ks, nil
}

// hpkeContext is a one-direction RFC 9180 encryption context: the nonce of
// message seq is base_nonce XOR I2OSP(seq, 12). It is not safe for
// concurrent use; each Seal or Open call makes its own.
type hpkeContext struct {
	aead      cipher.AEAD
	baseNonce []byte
	seq       uint64
}

var errAuth = errors.New("authentication failed")

func newContext(ks *keySchedule) (*hpkeContext, error) {
	a, err := chacha20poly1305.New(ks.key)
	if err != nil {
		return nil, fmt.Errorf("chacha20-poly1305: %v", err)
	}
	return &hpkeContext{aead: a, baseNonce: ks.baseNonce}, nil
}

func (c *hpkeContext) nonce() []byte {
	n := make([]byte, len(c.baseNonce))
	copy(n, c.baseNonce)
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], c.seq)
	for i := range seq {
		n[len(n)-8+i] ^= seq[i]
	}
	return n
}

// seal encrypts the next message and advances the sequence number.
func (c *hpkeContext) seal(aad, pt []byte) []byte {
	ct := c.aead.Seal(nil, c.nonce(), pt, aad)
	c.seq++
	return ct
}

// open decrypts the next message; the sequence number advances only on
// success, as RFC 9180 section 5.2 requires.
func (c *hpkeContext) open(aad, ct []byte) ([]byte, error) {
	pt, err := c.aead.Open(nil, c.nonce(), ct, aad)
	if err != nil {
		return nil, errAuth
	}
	c.seq++
	return pt, nil
}
