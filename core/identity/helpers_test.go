package identity_test

import (
	"crypto/ed25519"
	"testing"

	"google.golang.org/protobuf/proto"
)

type ed25519Pub = ed25519.PublicKey

func protoMarshal(m proto.Message) ([]byte, error) { return proto.Marshal(m) }

func protoUnmarshal(b []byte, m proto.Message) error { return proto.Unmarshal(b, m) }

func mustKeyF(f *testing.F) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		f.Fatal(err)
	}
	return k
}

type ed25519Priv = ed25519.PrivateKey
