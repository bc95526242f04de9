package ciphersuite

import (
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"fmt"
	"hash"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// dhkem is a DHKEM of RFC 9180 §4.1 over a crypto/ecdh curve.
type dhkem struct {
	curve   ecdh.Curve
	hash    func() hash.Hash
	nsecret int
}

// dhkems are the KEMs of the crypto/hpke suites, by KEM id.
var dhkems = map[uint16]dhkem{
	0x0010: {ecdh.P256(), sha256.New, 32},
	0x0011: {ecdh.P384(), sha512.New384, 48},
	0x0012: {ecdh.P521(), sha512.New, 64},
	0x0020: {ecdh.X25519(), sha256.New, 32},
}

// hkdfHashes are the HPKE KDFs by id (RFC 9180 §7.2).
var hkdfHashes = map[uint16]func() hash.Hash{0x0001: sha256.New, 0x0002: sha512.New384, 0x0003: sha512.New}

// openLabeled is DecryptWithLabel for the suites whose HPKE is
// crypto/hpke's: OpenBase (RFC 9180 §5.1, mode_base, one message) with
// info = EncryptContext{"MLS 1.0 "+label, context}, whose info_hash is
// computed over the parts as they are instead of over an encoded copy
// (a Welcome's context is its encrypted GroupInfo, the size of the
// group's tree). ok is false for a suite it does not cover.
func (s *Suite) openLabeled(priv []byte, label string, context, kemOutput, ciphertext []byte) (pt []byte, ok bool, err error) {
	if s.r.kem == nil {
		return nil, false, nil
	}
	kem, ok1 := dhkems[s.r.kem.ID()]
	kdf, ok2 := hkdfHashes[s.r.kdf.ID()]
	if !ok1 || !ok2 {
		return nil, false, nil
	}
	sk, err := kem.curve.NewPrivateKey(leftPad(priv, s.r.skSize))
	if err != nil {
		return nil, true, fmt.Errorf("%w: hpke private key: %v", ErrInvalidKey, err)
	}
	pkE, err := kem.curve.NewPublicKey(kemOutput)
	if err != nil {
		return nil, true, fmt.Errorf("%w: hpke kem output: %v", ErrDecrypt, err)
	}
	dh, err := sk.ECDH(pkE)
	if err != nil {
		return nil, true, fmt.Errorf("%w: hpke kem output: %v", ErrDecrypt, err)
	}
	// Decap: ExtractAndExpand(dh, enc || pkRm) under suite_id "KEM" || kem_id.
	kemID := binary.BigEndian.AppendUint16([]byte("KEM"), s.r.kem.ID())
	eae, err := labeledExtract(kem.hash, kemID, nil, "eae_prk", dh)
	if err != nil {
		return nil, true, fmt.Errorf("%w: hpke: %v", ErrDecrypt, err)
	}
	kemContext := append(append(make([]byte, 0, len(kemOutput)+len(kemOutput)+1), kemOutput...), sk.PublicKey().Bytes()...)
	shared, err := labeledExpand(kem.hash, kemID, eae, "shared_secret", kemContext, kem.nsecret)
	if err != nil {
		return nil, true, fmt.Errorf("%w: hpke: %v", ErrDecrypt, err)
	}
	// KeySchedule (§5.1), mode_base: empty psk and psk_id.
	sid := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16([]byte("HPKE"), s.r.kem.ID()), s.r.kdf.ID()), s.r.aead.ID())
	pskIDHash, err := labeledExtract(kdf, sid, nil, "psk_id_hash", nil)
	if err != nil {
		return nil, true, fmt.Errorf("%w: hpke: %v", ErrDecrypt, err)
	}
	infoHash := hmac.New(kdf, make([]byte, kdf().Size())) // Extract with the default salt
	infoHash.Write([]byte("HPKE-v1"))
	infoHash.Write(sid)
	infoHash.Write([]byte("info_hash"))
	var head [4]byte
	lb := []byte(LabelPrefix + label)
	h, _ := codec.AppendLength(head[:0], len(lb)) // labels are short
	infoHash.Write(h)
	infoHash.Write(lb)
	h, err = codec.AppendLength(head[:0], len(context))
	if err != nil {
		return nil, true, err
	}
	infoHash.Write(h)
	infoHash.Write(context)
	ksContext := append(append([]byte{0}, pskIDHash...), infoHash.Sum(nil)...)
	secret, err := labeledExtract(kdf, sid, shared, "secret", nil)
	if err != nil {
		return nil, true, fmt.Errorf("%w: hpke: %v", ErrDecrypt, err)
	}
	key, err := labeledExpand(kdf, sid, secret, "key", ksContext, s.r.keySize)
	if err != nil {
		return nil, true, fmt.Errorf("%w: hpke: %v", ErrDecrypt, err)
	}
	nonce, err := labeledExpand(kdf, sid, secret, "base_nonce", ksContext, s.r.nonceSize)
	if err != nil {
		return nil, true, fmt.Errorf("%w: hpke: %v", ErrDecrypt, err)
	}
	a, err := s.r.newAEAD(key)
	if err != nil {
		return nil, true, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	if pt, err = a.Open(nil, nonce, ciphertext, nil); err != nil { // sequence number 0
		return nil, true, fmt.Errorf("%w: hpke open", ErrDecrypt)
	}
	return pt, true, nil
}

// labeledExtract is LabeledExtract of RFC 9180 §4.
func labeledExtract(h func() hash.Hash, suiteID, salt []byte, label string, ikm []byte) ([]byte, error) {
	in := append(append(append([]byte("HPKE-v1"), suiteID...), label...), ikm...)
	return hkdf.Extract(h, in, salt)
}

// labeledExpand is LabeledExpand of RFC 9180 §4.
func labeledExpand(h func() hash.Hash, suiteID, prk []byte, label string, info []byte, length int) ([]byte, error) {
	in := binary.BigEndian.AppendUint16(nil, uint16(length))
	in = append(append(append(append(in, "HPKE-v1"...), suiteID...), label...), info...)
	return hkdf.Expand(h, prk, string(in), length)
}
