package message_test

import (
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// FuzzExternalSenders fuzzes the external_senders extension decoder
// (§12.1.8.1), read from group contexts and GroupContextExtensions
// proposals.
func FuzzExternalSenders(f *testing.F) {
	seed, _ := codec.Marshal(message.ExternalSenders{{SignatureKey: []byte{1, 2},
		Credential: message.Credential{Type: message.CredentialBasic, Identity: []byte("ds")}}})
	fuzzRoundTrip[message.ExternalSenders](f, [][]byte{seed})
}

// FuzzReInit fuzzes the ReInit proposal body decoder (§12.1.5).
func FuzzReInit(f *testing.F) {
	seed, _ := codec.Marshal(&message.ReInit{GroupID: []byte("g"), Version: message.MLS10, CipherSuite: 3, Extensions: message.Extensions{}})
	fuzzRoundTrip[message.ReInit](f, [][]byte{seed})
}
