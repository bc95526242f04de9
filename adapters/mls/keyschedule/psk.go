package keyschedule

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// PSK is one pre-shared key with its identifier, in commit order.
type PSK struct {
	ID     message.PreSharedKeyID
	Secret []byte
}

// maxPSKs is the most PSKs a PSKLabel's uint16 count can describe.
const maxPSKs = 0xffff

// PSKSecret combines psks into psk_secret (§8.4); with no PSKs it is the
// all-zero Nh-byte string.
func PSKSecret(s *ciphersuite.Suite, psks []PSK) ([]byte, error) {
	if len(psks) > maxPSKs {
		return nil, fmt.Errorf("%w: %d PSKs", ciphersuite.ErrInvalidLength, len(psks))
	}
	secret := make([]byte, s.HashSize())
	for i := range psks {
		w := codec.NewWriter(64)
		psks[i].ID.MarshalMLS(w)
		w.Uint16(uint16(i))
		w.Uint16(uint16(len(psks)))
		label, err := w.Bytes()
		if err != nil {
			return nil, fmt.Errorf("psk label: %w", err)
		}
		extracted := s.Extract(nil, psks[i].Secret)
		input, err := s.ExpandWithLabel(extracted, "derived psk", label, s.HashSize())
		clear(extracted)
		if err != nil {
			return nil, fmt.Errorf("psk %d: %w", i, err)
		}
		next := s.Extract(input, secret)
		clear(secret)
		clear(input)
		secret = next
	}
	return secret, nil
}
