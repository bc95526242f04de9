package framing_test

import (
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/secrettree"
)

// BenchmarkPrivateMessage measures Encrypt (protect) and Decrypt
// (unprotect, without the signature check) of application messages of
// 100 B and 10 KiB in suite 3, next to the raw AEAD seal and open of the
// same size as the reference.
func BenchmarkPrivateMessage(b *testing.B) {
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	sigPriv, _, _ := s.GenerateSignatureKey()
	secret, sdSecret := make([]byte, 32), make([]byte, 32)
	gc := []byte("group context")
	for _, size := range []int{100, 10 << 10} {
		content := &framing.FramedContent{
			GroupID: []byte("group"), Epoch: 7, Sender: framing.Sender{Type: framing.SenderMember, LeafIndex: 1},
			ContentType: framing.ContentApplication, Application: make([]byte, size),
		}
		ac, err := framing.Sign(s, framing.WirePrivateMessage, content, sigPriv, gc)
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("%dB", size)
		if size >= 1024 {
			name = fmt.Sprintf("%dKiB", size>>10)
		}
		b.Run("protect-"+name, func(b *testing.B) {
			tree, _ := secrettree.New(s, secret, 2, nil)
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := framing.Encrypt(s, ac, tree, sdSecret, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("unprotect-"+name, func(b *testing.B) {
			sender, _ := secrettree.New(s, secret, 2, nil)
			receiver, _ := secrettree.New(s, secret, 2, nil)
			b.SetBytes(int64(size))
			const batch = 128
			msgs := make([]*framing.PrivateMessage, batch)
			for i := 0; i < b.N; i += batch {
				b.StopTimer()
				n := min(batch, b.N-i)
				for j := range n {
					if msgs[j], err = framing.Encrypt(s, ac, sender, sdSecret, 0); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				for j := range n {
					if _, err := framing.Decrypt(s, msgs[j], receiver, sdSecret); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		key, nonce, pt := make([]byte, s.KeySize()), make([]byte, s.NonceSize()), make([]byte, size)
		b.Run("reference-aead-seal-"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := s.Seal(key, nonce, nil, pt); err != nil {
					b.Fatal(err)
				}
			}
		})
		ct, _ := s.Seal(key, nonce, nil, pt)
		b.Run("reference-aead-open-"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := s.Open(key, nonce, nil, ct); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
