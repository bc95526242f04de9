package message_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// TestExtensionPayloads round-trips each typed extension payload (§11,
// §12.1.8.1, §12.4.3.2) and rejects a truncated one.
func TestExtensionPayloads(t *testing.T) {
	values := []interface {
		codec.Marshaler
		codec.Unmarshaler
	}{
		&message.RequiredCapabilities{ExtensionTypes: []message.ExtensionType{0xff00}, ProposalTypes: []message.ProposalType{8}, CredentialTypes: []message.CredentialType{1}},
		&message.ExternalSenders{{SignatureKey: []byte{1, 2}, Credential: message.Credential{Type: message.CredentialBasic, Identity: []byte("ds")}}},
		&message.ExternalPub{PublicKey: bytes.Repeat([]byte{7}, 32)},
		&message.ApplicationID{ID: []byte("app")},
	}
	fresh := []func() codec.Unmarshaler{
		func() codec.Unmarshaler { return new(message.RequiredCapabilities) },
		func() codec.Unmarshaler { return new(message.ExternalSenders) },
		func() codec.Unmarshaler { return new(message.ExternalPub) },
		func() codec.Unmarshaler { return new(message.ApplicationID) },
	}
	for i, v := range values {
		b, err := codec.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got := fresh[i]()
		if err := codec.Unmarshal(b, got); err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		b2, _ := codec.Marshal(got.(codec.Marshaler))
		if !bytes.Equal(b, b2) {
			t.Fatalf("%T: round trip differs", v)
		}
		if err := codec.Unmarshal(b[:len(b)-1], fresh[i]()); !errors.Is(err, codec.ErrTruncated) && !errors.Is(err, codec.ErrLengthTooLarge) {
			t.Fatalf("%T: truncated payload: %v", v, err)
		}
	}
}

// TestUnknownSelectors: a select over an unknown type is ErrUnknownType.
func TestUnknownSelectors(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		v    codec.Unmarshaler
	}{
		{"credential type 9", []byte{0, 9, 0}, new(message.Credential)},
		{"proposal type 99", []byte{0, 99}, new(message.Proposal)},
		{"node type 3", []byte{3}, new(message.Node)},
		{"psk type 0", []byte{0, 0}, new(message.PreSharedKeyID)},
		{"proposal-or-ref type 3", []byte{3}, new(message.ProposalOrRef)},
	}
	for _, c := range cases {
		if err := codec.Unmarshal(c.in, c.v); !errors.Is(err, message.ErrUnknownType) || !errors.Is(err, codec.ErrInvalidValue) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
