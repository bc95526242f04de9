package framing_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
	"github.com/regroup-mls/regroup/adapters/mls/secrettree"
)

// vectorSeeds returns the byte fields named in fields of the first cases of
// a vector file; none when the vectors are absent.
func vectorSeeds(file string, fields ...string) [][]byte {
	p, ok := vectors.Path(file)
	if !ok {
		return nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	var cases []map[string]any
	if json.Unmarshal(data, &cases) != nil {
		return nil
	}
	var out [][]byte
	for i, c := range cases {
		if i >= 30 {
			break
		}
		for _, f := range fields {
			if s, ok := c[f].(string); ok {
				if b, err := hex.DecodeString(s); err == nil {
					out = append(out, b)
				}
			}
		}
	}
	return out
}

func mlsMessageSeeds() [][]byte {
	s := vectorSeeds("messages.json", "mls_welcome", "mls_group_info", "mls_key_package",
		"public_message_application", "public_message_proposal", "public_message_commit", "private_message")
	return append(s, vectorSeeds("message-protection.json", "proposal_priv", "proposal_pub",
		"commit_priv", "commit_pub", "application_priv")...)
}

// FuzzMLSMessage fuzzes the MLSMessage envelope and, through it, the
// PublicMessage, PrivateMessage, Welcome, GroupInfo and KeyPackage decoders
// (§6): no panic, and whatever decodes re-encodes to the same bytes.
func FuzzMLSMessage(f *testing.F) {
	for _, s := range mlsMessageSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := framing.Decode(in)
		if err != nil {
			return
		}
		out, err := codec.Marshal(m)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("re-encoding differs (%v):\n in %x\nout %x", err, in, out)
		}
	})
}

// FuzzAuthenticatedContent fuzzes the AuthenticatedContent decoder (§6.1).
func FuzzAuthenticatedContent(f *testing.F) {
	for _, s := range vectorSeeds("transcript-hashes.json", "authenticated_content") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var ac framing.AuthenticatedContent
		if codec.Unmarshal(in, &ac) != nil {
			return
		}
		out, err := codec.Marshal(&ac)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
	})
}

// FuzzUnprotect feeds hostile messages to Decrypt and Unprotect with the
// keys of the first message-protection case: they must fail cleanly or
// return content, never panic.
func FuzzUnprotect(f *testing.F) {
	var c protectionCase
	var cases []protectionCase
	if _, ok := vectors.Path("message-protection.json"); ok {
		vectors.Load(f, "message-protection.json", &cases)
	}
	for _, x := range cases {
		if x.Suite == 3 {
			c = x
		}
	}
	if c.Suite == 0 {
		c = protectionCase{Suite: 3, EncryptionSecret: make([]byte, 32), SenderDataSecret: make([]byte, 32)}
	}
	for _, s := range mlsMessageSeeds() {
		f.Add(s)
	}
	s, _ := ciphersuite.Lookup(ciphersuite.ID(c.Suite))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := framing.Decode(in)
		if err != nil {
			return
		}
		if m.Private != nil {
			tree, _ := secrettree.New(s, c.EncryptionSecret, 2, nil)
			_, _ = framing.Decrypt(s, m.Private, tree, c.SenderDataSecret)
		}
		if m.Public != nil {
			if ac, err := m.Public.Unprotect(s, c.MembershipKey, nil); err == nil {
				_ = ac.Verify(s, c.SignaturePub, nil)
			}
		}
	})
}

// FuzzPrivateMessageContent encrypts the fuzz input correctly as the
// plaintext of a PrivateMessage (§6.3.1), so Decrypt reaches the
// PrivateMessageContent decoder and padding check: it must fail cleanly or
// return content, never panic.
func FuzzPrivateMessageContent(f *testing.F) {
	f.Add(uint8(1), []byte{3, 'a', 'b', 'c', 1, 0xff, 0, 0})
	f.Add(uint8(2), append([]byte{0, 3, 0, 0, 0, 2, 1, 0}, 0, 0))
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	secret, sdSecret := make([]byte, 32), make([]byte, 32)
	f.Fuzz(func(t *testing.T, ct uint8, plaintext []byte) {
		ctype := framing.ContentType(ct%3 + 1)
		pm := &framing.PrivateMessage{GroupID: []byte("g"), Epoch: 1, ContentType: ctype}
		w := codec.NewWriter(32)
		w.Opaque(pm.GroupID)
		w.Uint64(pm.Epoch)
		w.Uint8(uint8(ctype))
		w.Opaque(nil)
		aad, _ := w.Bytes()
		sender, _ := secrettree.New(s, secret, 2, nil)
		typ := secrettree.Handshake
		if ctype == framing.ContentApplication {
			typ = secrettree.Application
		}
		kn, err := sender.Next(1, typ)
		if err != nil {
			t.Fatal(err)
		}
		if pm.Ciphertext, err = s.Seal(kn.Key, kn.Nonce, aad, plaintext); err != nil {
			t.Fatal(err)
		}
		key, nonce, _ := framing.SenderDataKeyNonce(s, sdSecret, pm.Ciphertext)
		w = codec.NewWriter(16)
		w.Opaque(pm.GroupID)
		w.Uint64(pm.Epoch)
		w.Uint8(uint8(ctype))
		sdAAD, _ := w.Bytes()
		sd, _ := codec.Marshal(&framing.SenderData{LeafIndex: 1})
		pm.EncryptedSenderData, _ = s.Seal(key, nonce, sdAAD, sd)
		receiver, _ := secrettree.New(s, secret, 2, nil)
		ac, err := framing.Decrypt(s, pm, receiver, sdSecret)
		if err == nil && ac.Content.ContentType != ctype {
			t.Fatal("content type changed")
		}
	})
}
