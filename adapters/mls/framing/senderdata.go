package framing

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// SenderData names the sender and generation of a PrivateMessage (§6.3.2).
type SenderData struct {
	LeafIndex  uint32
	Generation uint32
	ReuseGuard [4]byte
}

// MarshalMLS writes the SenderData.
func (d *SenderData) MarshalMLS(w *codec.Writer) {
	w.Uint32(d.LeafIndex)
	w.Uint32(d.Generation)
	w.Raw(d.ReuseGuard[:])
}

// UnmarshalMLS reads SenderData.
func (d *SenderData) UnmarshalMLS(r *codec.Reader) {
	d.LeafIndex = r.Uint32()
	d.Generation = r.Uint32()
	copy(d.ReuseGuard[:], r.Raw(4))
}

// SenderDataKeyNonce derives the sender data key and nonce from
// sender_data_secret and the first Nh bytes of the content ciphertext
// (§6.3.2).
func SenderDataKeyNonce(s *ciphersuite.Suite, senderDataSecret, ciphertext []byte) (key, nonce []byte, err error) {
	sample := ciphertext
	if len(sample) > s.HashSize() {
		sample = sample[:s.HashSize()]
	}
	if key, err = s.ExpandWithLabel(senderDataSecret, "key", sample, s.KeySize()); err != nil {
		return nil, nil, err
	}
	if nonce, err = s.ExpandWithLabel(senderDataSecret, "nonce", sample, s.NonceSize()); err != nil {
		return nil, nil, err
	}
	return key, nonce, nil
}

// senderDataAAD returns SenderDataAAD (§6.3.2).
func (p *PrivateMessage) senderDataAAD() ([]byte, error) {
	w := codec.NewWriter(16 + len(p.GroupID))
	w.Opaque(p.GroupID)
	w.Uint64(p.Epoch)
	w.Uint8(uint8(p.ContentType))
	return w.Bytes()
}

func sealSenderData(s *ciphersuite.Suite, pm *PrivateMessage, secret []byte, sd *SenderData) ([]byte, error) {
	key, nonce, err := SenderDataKeyNonce(s, secret, pm.Ciphertext)
	if err != nil {
		return nil, err
	}
	aad, err := pm.senderDataAAD()
	if err != nil {
		return nil, err
	}
	pt, err := codec.Marshal(sd)
	if err != nil {
		return nil, err
	}
	return s.Seal(key, nonce, aad, pt)
}

// DecryptSenderData decrypts the sender data of pm; failures wrap ErrDecrypt.
func DecryptSenderData(s *ciphersuite.Suite, pm *PrivateMessage, senderDataSecret []byte) (*SenderData, error) {
	if pm == nil {
		return nil, fmt.Errorf("%w: no message", ErrDecrypt)
	}
	key, nonce, err := SenderDataKeyNonce(s, senderDataSecret, pm.Ciphertext)
	if err != nil {
		return nil, fmt.Errorf("%w: sender data key: %v", ErrDecrypt, err)
	}
	aad, err := pm.senderDataAAD()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
	}
	pt, err := s.Open(key, nonce, aad, pm.EncryptedSenderData)
	if err != nil {
		return nil, fmt.Errorf("%w: sender data: %v", ErrDecrypt, err)
	}
	var sd SenderData
	if err := codec.Unmarshal(pt, &sd); err != nil {
		return nil, fmt.Errorf("%w: sender data: %v", ErrDecrypt, err)
	}
	return &sd, nil
}
