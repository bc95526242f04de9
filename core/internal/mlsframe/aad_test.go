package mlsframe

import (
	"bytes"
	"testing"
)

// privateMessage is a PrivateMessage's framing up to its ciphertext, with
// aad as its authenticated_data.
func privateMessage(contentType byte, aad []byte) []byte {
	b := []byte{0, 1, 0, WirePrivateMessage, 2, 0xaa, 0xbb, 0, 0, 0, 0, 0, 0, 0, 7, contentType, byte(len(aad))}
	b = append(b, aad...)
	return append(b, 1, 0xcc, 1, 0xdd) // encrypted_sender_data, ciphertext
}

// publicMessage is a PublicMessage's framing up to its content, from a
// member sender.
func publicMessage(contentType byte, aad []byte) []byte {
	b := []byte{0, 1, 0, WirePublicMessage, 1, 0xaa, 0, 0, 0, 0, 0, 0, 0, 3, 1, 0, 0, 0, 2, byte(len(aad))}
	b = append(b, aad...)
	return append(b, contentType, 0)
}

// COMP-403: the kind a viewer rule reads is the authenticated_data of
// either framing, read in the clear; anything truncated or of another
// wire format is not read.
func TestCOMP403_PeekAuthenticatedData(t *testing.T) {
	for _, c := range []struct {
		name string
		msg  []byte
		ct   uint8
		aad  []byte
		ok   bool
	}{
		{"private application", privateMessage(ContentApplication, []byte{3}), ContentApplication, []byte{3}, true},
		{"private commit", privateMessage(ContentCommit, nil), ContentCommit, []byte{}, true},
		{"public application", publicMessage(ContentApplication, []byte{1}), ContentApplication, []byte{1}, true},
		{"truncated", privateMessage(ContentApplication, []byte{3})[:16], 0, nil, false},
		{"group info", []byte{0, 1, 0, WireGroupInfo, 0, 1}, 0, nil, false},
		{"empty", nil, 0, nil, false},
	} {
		ct, aad, ok := PeekAuthenticatedData(c.msg)
		if ok != c.ok || (ok && (ct != c.ct || !bytes.Equal(aad, c.aad))) {
			t.Errorf("%s: %d %x %v, want %d %x %v", c.name, ct, aad, ok, c.ct, c.aad, c.ok)
		}
	}
}

// FuzzPeekAuthenticatedData: the service reads this of every message a
// publisher sends; it never panics and returns an aad inside the input.
func FuzzPeekAuthenticatedData(f *testing.F) {
	f.Add(privateMessage(ContentApplication, []byte{3}))
	f.Add(publicMessage(ContentApplication, []byte{1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, aad, ok := PeekAuthenticatedData(b)
		if ok && len(aad) > len(b) {
			t.Fatalf("aad of %d bytes from %d", len(aad), len(b))
		}
	})
}
