package keypackage_test

import (
	"errors"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/keypackage"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

func bundle(t *testing.T) (*ciphersuite.Suite, *keypackage.Bundle) {
	t.Helper()
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	sig, _, _ := s.GenerateSignatureKey()
	now := uint64(time.Now().Unix())
	b, err := keypackage.New(s, &keypackage.Options{
		Credential: message.Credential{Type: message.CredentialBasic, Identity: []byte("alice")}, SignaturePriv: sig,
		Lifetime:       message.Lifetime{NotBefore: now - 60, NotAfter: now + 3600},
		LeafExtensions: message.Extensions{{Type: 0xff03, Data: []byte{1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, b
}

// TestCreateAndValidate (§10.1): a created KeyPackage validates, decodes
// from its encoding and has the ref of that encoding.
func TestCreateAndValidate(t *testing.T) {
	s, b := bundle(t)
	if err := keypackage.Validate(s, b.KeyPackage, &keypackage.ValidateOptions{Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var kp message.KeyPackage
	if err := codec.Unmarshal(b.Encoded, &kp); err != nil {
		t.Fatal(err)
	}
	if ref, _ := kp.Ref(s); string(ref) != string(b.Ref) {
		t.Fatal("ref differs")
	}
}

// TestValidateRejects (§10.1, §7.3): each broken rule is ErrInvalid; the
// lifetime is checked only when asked.
func TestValidateRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(kp *message.KeyPackage)
		now    time.Time
	}{
		{"expired with Now set", func(kp *message.KeyPackage) {}, time.Now().Add(48 * time.Hour)},
		{"wrong version", func(kp *message.KeyPackage) { kp.Version = 2 }, time.Time{}},
		{"wrong suite", func(kp *message.KeyPackage) { kp.CipherSuite = 1 }, time.Time{}},
		{"leaf source update", func(kp *message.KeyPackage) { kp.LeafNode.Source = message.SourceUpdate }, time.Time{}},
		{"init key equals encryption key", func(kp *message.KeyPackage) { kp.InitKey = kp.LeafNode.EncryptionKey }, time.Time{}},
		{"forged signature", func(kp *message.KeyPackage) { kp.Signature = append([]byte{^kp.Signature[0]}, kp.Signature[1:]...) }, time.Time{}},
		{"extension not in capabilities", func(kp *message.KeyPackage) { kp.LeafNode.Capabilities.Extensions = nil }, time.Time{}},
		{"credential not in capabilities", func(kp *message.KeyPackage) { kp.LeafNode.Capabilities.Credentials = nil }, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, b := bundle(t)
			kp := *b.KeyPackage
			c.mutate(&kp)
			if err := keypackage.Validate(s, &kp, &keypackage.ValidateOptions{Now: c.now}); !errors.Is(err, keypackage.ErrInvalid) {
				t.Fatalf("accepted: %v", err)
			}
		})
	}
	// JOIN-008's lifetime check is the caller's option: without Now, a
	// package outside its lifetime still validates.
	s, b := bundle(t)
	late := &keypackage.ValidateOptions{Now: time.Now().Add(48 * time.Hour)}
	if keypackage.Validate(s, b.KeyPackage, late) == nil || keypackage.Validate(s, b.KeyPackage, nil) != nil {
		t.Fatal("lifetime must be checked exactly when Now is set")
	}
}
