package ciphersuite

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha512"
	"encoding/binary"
	"fmt"

	circlhpke "github.com/cloudflare/circl/hpke"
	"github.com/cloudflare/circl/kem"
)

// x448KEM is HPKE with DHKEM(X448, HKDF-SHA512) (KEM 0x0021), which the
// standard library's crypto/hpke lacks; cloudflare/circl supplies the KEM
// and the HPKE contexts. Its methods mirror the crypto/hpke paths of
// hpke.go and return the same sentinel errors.
type x448KEM struct {
	suite circlhpke.Suite
	kdfNh int // Nh of the HPKE KDF: exports are limited to 255·Nh bytes
}

const (
	x448KEMID  = 0x0021
	x448SKSize = 56
)

func newX448KEM(aead circlhpke.AEAD) *x448KEM {
	return &x448KEM{
		suite: circlhpke.NewSuite(circlhpke.KEM_X448_HKDF_SHA512, circlhpke.KDF_HKDF_SHA512, aead),
		kdfNh: sha512.Size,
	}
}

func (x *x448KEM) scheme() kem.Scheme { return circlhpke.KEM_X448_HKDF_SHA512.Scheme() }

func (x *x448KEM) generate() (priv, pub []byte, err error) {
	priv = make([]byte, x448SKSize)
	if _, err := rand.Read(priv); err != nil {
		return nil, nil, fmt.Errorf("generate hpke key: %w", err)
	}
	pub, err = x.public(priv)
	return priv, pub, err
}

// derive is DeriveKeyPair(ikm) of RFC 9180 §7.1.3 for X448. circl's own
// DeriveKeyPair takes only seeds of exactly Nsk bytes, while MLS derives
// node keys from Nh-byte secrets, so the labeled HKDF steps run here.
func (x *x448KEM) derive(ikm []byte) (priv, pub []byte, err error) {
	suiteID := []byte{'K', 'E', 'M', 0, x448KEMID}
	labeledIKM := append(append(append([]byte("HPKE-v1"), suiteID...), "dkp_prk"...), ikm...)
	prk, err := hkdf.Extract(sha512.New, labeledIKM, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: derive hpke key pair: %v", ErrInvalidKey, err)
	}
	info := binary.BigEndian.AppendUint16(nil, x448SKSize)
	info = append(append(append(info, "HPKE-v1"...), suiteID...), "sk"...)
	priv, err = hkdf.Expand(sha512.New, prk, string(info), x448SKSize)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: derive hpke key pair: %v", ErrInvalidKey, err)
	}
	pub, err = x.public(priv)
	return priv, pub, err
}

func (x *x448KEM) privateKey(priv []byte) (kem.PrivateKey, error) {
	k, err := x.scheme().UnmarshalBinaryPrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("%w: hpke private key: %v", ErrInvalidKey, err)
	}
	return k, nil
}

func (x *x448KEM) public(priv []byte) ([]byte, error) {
	k, err := x.privateKey(priv)
	if err != nil {
		return nil, err
	}
	pub, err := k.Public().MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("%w: hpke public key: %v", ErrInvalidKey, err)
	}
	return pub, nil
}

func (x *x448KEM) sender(pub, info []byte) ([]byte, circlhpke.Sealer, error) {
	pk, err := x.scheme().UnmarshalBinaryPublicKey(pub)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: hpke public key: %v", ErrInvalidKey, err)
	}
	snd, err := x.suite.NewSender(pk, info)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: hpke setup: %v", ErrInvalidKey, err)
	}
	enc, sealer, err := snd.Setup(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: hpke setup: %v", ErrInvalidKey, err)
	}
	return enc, sealer, nil
}

func (x *x448KEM) recipient(priv, info, enc []byte) (circlhpke.Opener, error) {
	k, err := x.privateKey(priv)
	if err != nil {
		return nil, err
	}
	rcv, err := x.suite.NewReceiver(k, info)
	if err != nil {
		return nil, fmt.Errorf("%w: hpke setup: %v", ErrInvalidKey, err)
	}
	op, err := rcv.Setup(enc)
	if err != nil {
		return nil, fmt.Errorf("%w: hpke kem output: %v", ErrDecrypt, err)
	}
	return op, nil
}

func (x *x448KEM) seal(pub, info, aad, plaintext []byte) (enc, ct []byte, err error) {
	enc, sealer, err := x.sender(pub, info)
	if err != nil {
		return nil, nil, err
	}
	ct, err = sealer.Seal(plaintext, aad)
	if err != nil {
		return nil, nil, fmt.Errorf("hpke seal: %w", err)
	}
	return enc, ct, nil
}

func (x *x448KEM) open(priv, info, aad, enc, ct []byte) ([]byte, error) {
	op, err := x.recipient(priv, info, enc)
	if err != nil {
		return nil, err
	}
	pt, err := op.Open(ct, aad)
	if err != nil {
		return nil, fmt.Errorf("%w: hpke open", ErrDecrypt)
	}
	return pt, nil
}

// checkExport refuses what circl's Export would panic on.
func (x *x448KEM) checkExport(length int) error {
	if length < 0 || length > 255*x.kdfNh {
		return fmt.Errorf("%w: hpke export of %d bytes", ErrInvalidLength, length)
	}
	return nil
}

func (x *x448KEM) export(pub, info, exporterContext []byte, length int) (enc, secret []byte, err error) {
	if err := x.checkExport(length); err != nil {
		return nil, nil, err
	}
	enc, sealer, err := x.sender(pub, info)
	if err != nil {
		return nil, nil, err
	}
	return enc, sealer.Export(exporterContext, uint(length)), nil
}

func (x *x448KEM) exportOpen(priv, info, enc, exporterContext []byte, length int) ([]byte, error) {
	if err := x.checkExport(length); err != nil {
		return nil, err
	}
	op, err := x.recipient(priv, info, enc)
	if err != nil {
		return nil, err
	}
	return op.Export(exporterContext, uint(length)), nil
}
