package ciphersuite

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
)

// Hash returns the suite hash of data.
func (s *Suite) Hash(data []byte) []byte {
	if s.r.hashSize == sha256.Size { // every SHA-256 suite: no hash state on the heap
		h := sha256.Sum256(data)
		return h[:]
	}
	h := s.r.newHash()
	h.Write(data)
	return h.Sum(nil)
}

// MAC returns the suite HMAC of data under key (§5.2 MAC).
func (s *Suite) MAC(key, data []byte) []byte {
	m := hmac.New(s.r.newHash, key)
	m.Write(data)
	return m.Sum(nil)
}

// VerifyMAC reports in constant time whether tag is the MAC of data under key.
func (s *Suite) VerifyMAC(key, data, tag []byte) bool {
	return hmac.Equal(s.MAC(key, data), tag)
}

// Extract is KDF.Extract(salt, ikm). An empty salt means Nh zero bytes.
func (s *Suite) Extract(salt, ikm []byte) []byte {
	if len(salt) == 0 {
		salt = make([]byte, s.r.hashSize)
	}
	prk, err := hkdf.Extract(s.r.newHash, ikm, salt)
	if err != nil { // only for FIPS-only key sizes; not reachable with HMAC-SHA2
		return nil
	}
	return prk
}

// Expand is KDF.Expand(prk, info, length); length must be at most 255·Nh.
func (s *Suite) Expand(prk, info []byte, length int) ([]byte, error) {
	if length < 0 || length > 255*s.r.hashSize {
		return nil, fmt.Errorf("%w: expand to %d bytes", ErrInvalidLength, length)
	}
	out, err := hkdf.Expand(s.r.newHash, prk, string(info), length)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidLength, err)
	}
	return out, nil
}

// Seal encrypts and authenticates plaintext with the suite AEAD.
func (s *Suite) Seal(key, nonce, aad, plaintext []byte) ([]byte, error) {
	a, err := s.aead(key, nonce)
	if err != nil {
		return nil, err
	}
	return a.Seal(nil, nonce, plaintext, aad), nil
}

// Open decrypts and authenticates ciphertext with the suite AEAD; a failure
// wraps ErrDecrypt.
func (s *Suite) Open(key, nonce, aad, ciphertext []byte) ([]byte, error) {
	return s.OpenAppend(nil, key, nonce, aad, ciphertext)
}

// OpenAppend is Open appending the plaintext to dst: it returns dst
// extended by the plaintext. ciphertext and dst's free capacity must not
// overlap.
func (s *Suite) OpenAppend(dst, key, nonce, aad, ciphertext []byte) ([]byte, error) {
	a, err := s.aead(key, nonce)
	if err != nil {
		return nil, err
	}
	pt, err := a.Open(dst, nonce, ciphertext, aad)
	if err != nil {
		return nil, fmt.Errorf("%w: aead open", ErrDecrypt)
	}
	return pt, nil
}

type aeadCipher interface {
	Seal(dst, nonce, plaintext, aad []byte) []byte
	Open(dst, nonce, ciphertext, aad []byte) ([]byte, error)
}

func (s *Suite) aead(key, nonce []byte) (aeadCipher, error) {
	if len(key) != s.r.keySize {
		return nil, fmt.Errorf("%w: AEAD key of %d bytes, want %d", ErrInvalidKey, len(key), s.r.keySize)
	}
	if len(nonce) != s.r.nonceSize {
		return nil, fmt.Errorf("%w: AEAD nonce of %d bytes, want %d", ErrInvalidKey, len(nonce), s.r.nonceSize)
	}
	a, err := s.r.newAEAD(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	return a, nil
}
