package keyschedule

import (
	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// ConfirmedTranscriptHash is Hash(interim_transcript_hash_[n-1] ||
// ConfirmedTranscriptHashInput_[n]) (§8.2); input is the encoding produced by
// framing's AuthenticatedContent.ConfirmedTranscriptHashInput. The first
// epoch's interim hash is empty.
func ConfirmedTranscriptHash(s *ciphersuite.Suite, interimPrev, input []byte) []byte {
	buf := make([]byte, 0, len(interimPrev)+len(input))
	buf = append(buf, interimPrev...)
	return s.Hash(append(buf, input...))
}

// InterimTranscriptHash is Hash(confirmed_transcript_hash_[n] ||
// InterimTranscriptHashInput{confirmation_tag}) (§8.2).
func InterimTranscriptHash(s *ciphersuite.Suite, confirmed, confirmationTag []byte) ([]byte, error) {
	w := codec.NewWriter(len(confirmed) + len(confirmationTag) + 4)
	w.Raw(confirmed)
	w.Opaque(confirmationTag)
	b, err := w.Bytes()
	if err != nil {
		return nil, err
	}
	return s.Hash(b), nil
}

// ConfirmationTag is MAC(confirmation_key, confirmed_transcript_hash) (§6.1).
func ConfirmationTag(s *ciphersuite.Suite, confirmationKey, confirmed []byte) []byte {
	return s.MAC(confirmationKey, confirmed)
}

// VerifyConfirmationTag reports in constant time whether tag is the
// confirmation tag of confirmed under confirmationKey.
func VerifyConfirmationTag(s *ciphersuite.Suite, confirmationKey, confirmed, tag []byte) bool {
	return s.VerifyMAC(confirmationKey, confirmed, tag)
}
