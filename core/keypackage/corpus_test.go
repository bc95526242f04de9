package keypackage_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	mlskp "github.com/regroup-mls/regroup/adapters/mls/keypackage"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

const testInbox = "inbox-under-test"

// craft describes a key package made with the engine's own package code,
// so that a test can write what Build never would.
type craft struct {
	suite      ciphersuite.ID
	inbox      string
	credential []byte // overrides the MlsCredential of inbox when set
	signer     ed25519.PrivateKey
	notBefore  time.Time
	notAfter   time.Time
	exts       []ports.Extension
	// afterSign changes the signed package and re-signs only the outer
	// KeyPackage signature, so the leaf signature no longer verifies.
	afterSign func(kp *message.KeyPackage)
}

// goodExtensions are the extensions Build writes, with a real X-Wing key.
func goodExtensions(t testing.TB, alg ports.WrapperAlgorithmID) []ports.Extension {
	w, err := registry(t).Wrapper(alg)
	if err != nil {
		t.Fatal(err)
	}
	pub, _, err := w.GenerateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return []ports.Extension{wrapperExt(alg, pub), aeadExt(3), lastResort(nil)}
}

func wrapperExt(alg ports.WrapperAlgorithmID, key []byte) ports.Extension {
	b, _ := proto.Marshal(&contentspb.WelcomeWrapperEncryption{PubKey: key, Algorithm: contentspb.WelcomeWrapperAlgorithm(alg)})
	return ports.Extension{Type: 0xff03, Data: b}
}

func aeadExt(values ...int32) ports.Extension {
	p := &contentspb.WelcomePointeeEncryptionAeadTypesExtension{}
	for _, v := range values {
		p.SupportedAeadTypes = append(p.SupportedAeadTypes, contentspb.WelcomePointeeEncryptionAeadType(v))
	}
	b, _ := proto.Marshal(p)
	return ports.Extension{Type: 0xff04, Data: b}
}

func lastResort(data []byte) ports.Extension {
	e, err := metadata.Dictionary{}.Set(0x0004, data).Extension()
	if err != nil {
		panic(err)
	}
	return e
}

func (c craft) build(t testing.TB) []byte {
	t.Helper()
	s, err := ciphersuite.Lookup(c.suite)
	if err != nil {
		t.Fatal(err)
	}
	cred := c.credential
	if cred == nil {
		cred, _ = proto.MarshalOptions{Deterministic: true}.Marshal(&contentspb.MlsCredential{InboxId: c.inbox})
	}
	o := &mlskp.Options{
		Credential:    message.Credential{Type: message.CredentialBasic, Identity: cred},
		SignaturePriv: c.signer.Seed(),
		Lifetime:      message.Lifetime{NotBefore: uint64(c.notBefore.Unix()), NotAfter: uint64(c.notAfter.Unix())},
	}
	for _, e := range c.exts {
		o.Extensions = append(o.Extensions, message.Extension{Type: message.ExtensionType(e.Type), Data: e.Data})
	}
	b, err := mlskp.New(s, o)
	if err != nil {
		t.Fatal(err)
	}
	if c.afterSign == nil {
		return b.Encoded
	}
	c.afterSign(b.KeyPackage)
	if err := b.KeyPackage.Sign(s, c.signer.Seed()); err != nil {
		t.Fatal(err)
	}
	enc, err := codec.Marshal(b.KeyPackage)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

func validator(t testing.TB) *keypackage.Validator {
	_, priv, _ := ed25519.GenerateKey(nil)
	engine, err := mls.New(mls.Options{SignaturePrivateKey: priv.Seed()})
	if err != nil {
		t.Fatal(err)
	}
	return &keypackage.Validator{Engine: engine, Wrappers: registry(t)}
}

// The hostile key-package corpus: every case is rejected with an error
// that wraps its check's sentinel and names the check, and the well-formed
// package it is a variation of passes. (JOIN-007, JOIN-008, JOIN-072,
// JOIN-082, JOIN-090, JOIN-093.)
func TestHostileKeyPackageCorpus(t *testing.T) {
	v := validator(t)
	pub, priv, _ := ed25519.GenerateKey(nil)
	other, otherPriv, _ := ed25519.GenerateKey(nil)
	now := t0
	base := func() craft {
		return craft{suite: ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519, inbox: testInbox, signer: priv,
			notBefore: now.Add(-time.Hour), notAfter: now.Add(time.Hour), exts: goodExtensions(t, ports.WrapperXWingMLKEM768Draft6)}
	}
	if _, err := v.Validate(context.Background(), base().build(t), testInbox, pub, now); err != nil {
		t.Fatalf("the corpus's well-formed package is rejected: %v", err)
	}
	otherInbox, _ := proto.Marshal(&contentspb.MlsCredential{InboxId: "someone-else"})
	cases := []struct {
		name   string
		mutate func(c *craft)
		key    []byte
		want   error
		names  string
	}{
		{"wrong suite (0x0001)", func(c *craft) { c.suite = ciphersuite.MLS128X25519AES128GCMSHA256Ed25519 }, pub, keypackage.ErrCipherSuite, "JOIN-072"},
		{"bad leaf signature", func(c *craft) {
			c.afterSign = func(kp *message.KeyPackage) { kp.LeafNode.Lifetime.NotAfter++ }
		}, pub, keypackage.ErrUnverifiable, "leaf node signature"},
		{"expired: now is not_after", func(c *craft) { c.notAfter = now }, pub, keypackage.ErrLifetime, "JOIN-008"},
		{"expired: now after not_after", func(c *craft) { c.notBefore, c.notAfter = now.Add(-48*time.Hour), now.Add(-time.Hour) }, pub, keypackage.ErrLifetime, "JOIN-008"},
		{"not yet valid", func(c *craft) { c.notBefore = now.Add(time.Second) }, pub, keypackage.ErrLifetime, "JOIN-008"},
		{"last-resort mark with data", func(c *craft) { c.exts[2] = lastResort([]byte{1}) }, pub, keypackage.ErrLastResortData, "JOIN-082"},
		{"undecodable 0xff03", func(c *craft) { c.exts[0].Data = []byte{0xff, 0xff} }, pub, keypackage.ErrAddressing, "0xff03 extension does not decode"},
		{"undecodable 0xff04", func(c *craft) { c.exts[1].Data = []byte{0x0a, 0x05} }, pub, keypackage.ErrAddressing, "0xff04 extension does not decode"},
		{"X-Wing wrapper key of 32 bytes", func(c *craft) {
			c.exts[0] = wrapperExt(ports.WrapperXWingMLKEM768Draft6, make([]byte, 32))
		}, pub, keypackage.ErrAddressing, "takes a 1216-byte key"},
		{"CURVE25519 wrapper key of 1216 bytes", func(c *craft) {
			c.exts[0] = wrapperExt(ports.WrapperCurve25519, make([]byte, 1216))
		}, pub, keypackage.ErrAddressing, "takes a 32-byte key"},
		{"unknown wrapper algorithm", func(c *craft) { c.exts[0] = wrapperExt(7, make([]byte, 32)) }, pub, keypackage.ErrAddressing, "neither CURVE25519"},
		{"low-order CURVE25519 wrapper key", func(c *craft) {
			c.exts[0] = wrapperExt(ports.WrapperCurve25519, make([]byte, 32))
		}, pub, keypackage.ErrAddressing, "HPKE sender setup"},
		{"credential naming another inbox", func(c *craft) { c.credential = otherInbox }, pub, keypackage.ErrWrongInbox, "JOIN-093 credential inbox"},
		{"credential that is no MlsCredential", func(c *craft) { c.credential = []byte("plain text") }, pub, keypackage.ErrCredential, "JOIN-004"},
		{"MlsCredential with a field it does not define", func(c *craft) {
			c.credential, _ = proto.Marshal(&contentspb.MlsCredential{InboxId: testInbox})
			c.credential = append(c.credential, 0x10, 0x01)
		}, pub, keypackage.ErrCredential, "JOIN-004"},
		{"leaf key of another installation", func(c *craft) { c.signer = otherPriv }, pub, keypackage.ErrWrongInstallation, "JOIN-093 leaf signature key"},
		{"this installation's package checked as another's", func(*craft) {}, other, keypackage.ErrWrongInstallation, "leaf signature key"},
	}
	for _, c := range cases {
		cr := base()
		c.mutate(&cr)
		_, err := v.Validate(context.Background(), cr.build(t), testInbox, c.key, now)
		if !errors.Is(err, c.want) || !errors.Is(err, keypackage.ErrRejected) || !strings.Contains(err.Error(), c.names) {
			t.Errorf("%s: Validate = %v; want %v naming %q", c.name, err, c.want, c.names)
		}
	}
	if _, err := v.Validate(context.Background(), []byte("not a key package"), testInbox, pub, now); !errors.Is(err, keypackage.ErrUnverifiable) {
		t.Errorf("garbage bytes: %v", err)
	}
}

// JOIN-008: the lifetime is checked at the validator's time, at the exact
// bounds: valid at not_before and one second before not_after, rejected at
// not_after; a long lifetime is never a reason to reject.
func TestJOIN008_LifetimeBounds(t *testing.T) {
	v := validator(t)
	pub, priv, _ := ed25519.GenerateKey(nil)
	nb, na := t0, t0.Add(10*time.Hour)
	kp := craft{suite: 3, inbox: testInbox, signer: priv, notBefore: nb, notAfter: na, exts: goodExtensions(t, 1)}.build(t)
	for _, c := range []struct {
		at   time.Time
		want bool
	}{{nb.Add(-time.Second), false}, {nb, true}, {na.Add(-time.Second), true}, {na, false}, {na.Add(time.Hour), false}} {
		_, err := v.Validate(context.Background(), kp, testInbox, pub, c.at)
		if (err == nil) != c.want || (err != nil && !errors.Is(err, keypackage.ErrLifetime)) {
			t.Errorf("at %v (not_before %v, not_after %v): %v, want valid=%v", c.at, nb, na, err, c.want)
		}
	}
	long := craft{suite: 3, inbox: testInbox, signer: priv, notBefore: nb, notAfter: nb.Add(20 * 365 * 24 * time.Hour), exts: goodExtensions(t, 1)}.build(t)
	if _, err := v.Validate(context.Background(), long, testInbox, pub, nb.Add(time.Hour)); err != nil {
		t.Errorf("a 20-year lifetime is rejected: %v", err)
	}
}

// JOIN-090: a supported_aead_types value this version does not know is
// treated as absent, never a reason to reject; a package whose 0xff03 is
// absent is addressed under CURVE25519 and its init_key.
func TestJOIN090_UnknownAEADAndAbsentWrapper(t *testing.T) {
	v := validator(t)
	pub, priv, _ := ed25519.GenerateKey(nil)
	exts := goodExtensions(t, ports.WrapperXWingMLKEM768Draft6)
	exts[1] = aeadExt(3, 99, 0)
	kp := craft{suite: 3, inbox: testInbox, signer: priv, notBefore: t0.Add(-time.Hour), notAfter: t0.Add(time.Hour), exts: exts}.build(t)
	got, err := v.Validate(context.Background(), kp, testInbox, pub, t0)
	if err != nil {
		t.Fatalf("unknown AEAD value rejected: %v", err)
	}
	if len(got.PointeeAEADs) != 1 || got.PointeeAEADs[0] != ports.PointeeAEADChaCha20Poly1305 || !got.PointerCapable() {
		t.Fatalf("pointee AEADs = %v (pointer-capable %v), want only ChaCha20-Poly1305", got.PointeeAEADs, got.PointerCapable())
	}
	only99 := craft{suite: 3, inbox: testInbox, signer: priv, notBefore: t0.Add(-time.Hour), notAfter: t0.Add(time.Hour),
		exts: []ports.Extension{exts[0], aeadExt(99), lastResort(nil)}}.build(t)
	if got, err := v.Validate(context.Background(), only99, testInbox, pub, t0); err != nil || len(got.PointeeAEADs) != 0 || got.PointerCapable() {
		t.Fatalf("only an unknown AEAD: %+v, %v; want valid, not pointer-capable", got.PointeeAEADs, err)
	}
	bare := craft{suite: 3, inbox: testInbox, signer: priv, notBefore: t0.Add(-time.Hour), notAfter: t0.Add(time.Hour)}.build(t)
	got, err = v.Validate(context.Background(), bare, testInbox, pub, t0)
	if err != nil || got.WrapperAlgorithm != ports.WrapperCurve25519 || len(got.WrapperPublicKey) != 32 {
		t.Fatalf("no 0xff03: %v, %v; want CURVE25519 under init_key", got.WrapperAlgorithm, err)
	}
}

func FuzzValidate(f *testing.F) {
	v := validator(f)
	pub, priv, _ := ed25519.GenerateKey(nil)
	f.Add(craft{suite: 3, inbox: testInbox, signer: priv, notBefore: t0.Add(-time.Hour), notAfter: t0.Add(time.Hour), exts: goodExtensions(f, 1)}.build(f))
	f.Add([]byte{0, 1, 0, 3})
	f.Fuzz(func(t *testing.T, kp []byte) {
		_, err := v.Validate(context.Background(), kp, testInbox, pub, t0)
		if err != nil && !errors.Is(err, keypackage.ErrRejected) {
			t.Fatalf("an error outside the rejection classes: %v", err)
		}
	})
}
