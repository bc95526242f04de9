package keyschedule_test

import (
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
)

// TestNoPanicOnHostileInput: wrong-size secrets and absurd lengths are
// errors, never panics.
func TestNoPanicOnHostileInput(t *testing.T) {
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	for _, b := range [][]byte{nil, {}, {1}, make([]byte, 32), make([]byte, 100)} {
		if _, err := keyschedule.Derive(s, b, b, b, b); err == nil && len(b) != 32 {
			t.Errorf("Derive accepted %d-byte secrets", len(b))
		}
		_, _ = keyschedule.FromJoiner(s, b, b, b)
		_, _ = keyschedule.Export(s, b, "x", b, 1<<17)
		_, _, _ = keyschedule.WelcomeKeyNonce(s, b)
		_, _, _ = keyschedule.ExternalKeyPair(s, b)
		_, _, _ = keyschedule.ExternalInitSecret(s, b)
		_, _ = keyschedule.ExternalInitSecretFromKEMOutput(s, b, b)
		_, _ = keyschedule.InterimTranscriptHash(s, b, b)
		_ = keyschedule.ConfirmedTranscriptHash(s, b, b)
		_, _ = keyschedule.PSKSecret(s, []keyschedule.PSK{{Secret: b}})
	}
}
