package ciphersuite

import (
	"crypto/hpke"
	"fmt"
)

// GenerateHPKEKey returns a fresh HPKE key pair in the suite's KEM, both
// halves serialized as RFC 9180 SerializePrivateKey/SerializePublicKey.
func (s *Suite) GenerateHPKEKey() (priv, pub []byte, err error) {
	if x := s.r.x448; x != nil {
		return x.generate()
	}
	k, err := s.r.kem.GenerateKey()
	if err != nil {
		return nil, nil, fmt.Errorf("generate hpke key: %w", err)
	}
	return serializeKeyPair(k)
}

// DeriveHPKEKeyPair derives the HPKE key pair DeriveKeyPair(ikm) of RFC 9180
// (used for node keys, §7.4, and external_pub, §8).
func (s *Suite) DeriveHPKEKeyPair(ikm []byte) (priv, pub []byte, err error) {
	if x := s.r.x448; x != nil {
		return x.derive(ikm)
	}
	k, err := s.r.kem.DeriveKeyPair(ikm)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: derive hpke key pair: %v", ErrInvalidKey, err)
	}
	return serializeKeyPair(k)
}

// HPKEPublicKey returns the public key that belongs to an HPKE private key.
func (s *Suite) HPKEPublicKey(priv []byte) ([]byte, error) {
	if x := s.r.x448; x != nil {
		return x.public(priv)
	}
	k, err := s.r.kem.NewPrivateKey(leftPad(priv, s.r.skSize))
	if err != nil {
		return nil, fmt.Errorf("%w: hpke private key: %v", ErrInvalidKey, err)
	}
	return k.PublicKey().Bytes(), nil
}

func serializeKeyPair(k hpke.PrivateKey) (priv, pub []byte, err error) {
	priv, err = k.Bytes()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: serialize hpke key: %v", ErrInvalidKey, err)
	}
	return priv, k.PublicKey().Bytes(), nil
}

// HPKESeal is SealBase(pub, info, aad, plaintext) of RFC 9180: it returns the
// KEM output and the ciphertext.
func (s *Suite) HPKESeal(pub, info, aad, plaintext []byte) (kemOutput, ciphertext []byte, err error) {
	if x := s.r.x448; x != nil {
		return x.seal(pub, info, aad, plaintext)
	}
	enc, snd, err := s.hpkeSender(pub, info)
	if err != nil {
		return nil, nil, err
	}
	ct, err := snd.Seal(aad, plaintext)
	if err != nil {
		return nil, nil, fmt.Errorf("hpke seal: %w", err)
	}
	return enc, ct, nil
}

// hpkeSender runs SetupBaseS(pub, info); failures wrap ErrInvalidKey.
func (s *Suite) hpkeSender(pub, info []byte) ([]byte, *hpke.Sender, error) {
	pk, err := s.r.kem.NewPublicKey(pub)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: hpke public key: %v", ErrInvalidKey, err)
	}
	enc, snd, err := hpke.NewSender(pk, s.r.kdf, s.r.aead, info)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: hpke setup: %v", ErrInvalidKey, err)
	}
	return enc, snd, nil
}

// HPKEOpen is OpenBase(kemOutput, priv, info, aad, ciphertext) of RFC 9180;
// failures wrap ErrInvalidKey (malformed key or KEM output) or ErrDecrypt.
func (s *Suite) HPKEOpen(priv, info, aad, kemOutput, ciphertext []byte) ([]byte, error) {
	if x := s.r.x448; x != nil {
		return x.open(priv, info, aad, kemOutput, ciphertext)
	}
	k, err := s.r.kem.NewPrivateKey(leftPad(priv, s.r.skSize))
	if err != nil {
		return nil, fmt.Errorf("%w: hpke private key: %v", ErrInvalidKey, err)
	}
	rcv, err := hpke.NewRecipient(kemOutput, k, s.r.kdf, s.r.aead, info)
	if err != nil {
		return nil, fmt.Errorf("%w: hpke kem output: %v", ErrDecrypt, err)
	}
	pt, err := rcv.Open(aad, ciphertext)
	if err != nil {
		return nil, fmt.Errorf("%w: hpke open", ErrDecrypt)
	}
	return pt, nil
}

// HPKEExport runs SetupBaseS(pub, info) and exports length bytes under
// exporterContext (RFC 9180 §5.3); it returns the KEM output and the secret.
func (s *Suite) HPKEExport(pub, info, exporterContext []byte, length int) (kemOutput, secret []byte, err error) {
	if x := s.r.x448; x != nil {
		return x.export(pub, info, exporterContext, length)
	}
	enc, snd, err := s.hpkeSender(pub, info)
	if err != nil {
		return nil, nil, err
	}
	secret, err = snd.Export(string(exporterContext), length)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: hpke export: %v", ErrInvalidLength, err)
	}
	return enc, secret, nil
}

// HPKEExportOpen runs SetupBaseR(kemOutput, priv, info) and exports length
// bytes under exporterContext: the receiving side of [Suite.HPKEExport].
func (s *Suite) HPKEExportOpen(priv, info, kemOutput, exporterContext []byte, length int) ([]byte, error) {
	if x := s.r.x448; x != nil {
		return x.exportOpen(priv, info, kemOutput, exporterContext, length)
	}
	k, err := s.r.kem.NewPrivateKey(leftPad(priv, s.r.skSize))
	if err != nil {
		return nil, fmt.Errorf("%w: hpke private key: %v", ErrInvalidKey, err)
	}
	rcv, err := hpke.NewRecipient(kemOutput, k, s.r.kdf, s.r.aead, info)
	if err != nil {
		return nil, fmt.Errorf("%w: hpke kem output: %v", ErrDecrypt, err)
	}
	secret, err := rcv.Export(string(exporterContext), length)
	if err != nil {
		return nil, fmt.Errorf("%w: hpke export: %v", ErrInvalidLength, err)
	}
	return secret, nil
}

// leftPad restores leading zero bytes that some encoders drop from
// fixed-size scalars (P-521 keys of 65 bytes).
func leftPad(b []byte, size int) []byte {
	if len(b) >= size || len(b) == 0 {
		return b
	}
	return append(make([]byte, size-len(b)), b...)
}
