package delivery

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// fakeParser stands in for the MLS engine in this rule test: it "parses"
// any package into v (the real engine runs under regroupd's tests).
type fakeParser struct {
	v   ports.ValidatedKeyPackage
	err error
}

func (p *fakeParser) ValidateKeyPackage(context.Context, []byte, ports.ValidateOptions) (ports.ValidatedKeyPackage, error) {
	return p.v, p.err
}

// fakeWrapper refuses an all-zero key, as X25519 refuses a low-order point.
type fakeWrapper struct {
	id   ports.WrapperAlgorithmID
	size int
}

func (w fakeWrapper) ID() ports.WrapperAlgorithmID { return w.id }
func (w fakeWrapper) PublicKeySize() int           { return w.size }
func (w fakeWrapper) GenerateKey(context.Context) ([]byte, []byte, error) {
	return nil, nil, errors.New("unused")
}
func (w fakeWrapper) CheckPublicKey(_ context.Context, pub []byte) error {
	for _, b := range pub {
		if b != 0 {
			return nil
		}
	}
	return fmt.Errorf("%w: all-zero key", ports.ErrInvalidKey)
}
func (w fakeWrapper) Seal(context.Context, []byte, []byte, ...[]byte) ([][]byte, error) {
	return nil, errors.New("unused")
}
func (w fakeWrapper) Open(context.Context, []byte, []byte, ...[]byte) ([][]byte, error) {
	return nil, errors.New("unused")
}

type wrappers map[ports.WrapperAlgorithmID]ports.WrapperAlgorithm

func (m wrappers) Wrapper(id ports.WrapperAlgorithmID) (ports.WrapperAlgorithm, error) {
	if w, ok := m[id]; ok {
		return w, nil
	}
	return nil, fmt.Errorf("%w: %d", ports.ErrUnsupportedAlgorithm, id)
}

func ones(n int) []byte { return []byte(strings.Repeat("\x01", n)) }

func wrapperExt(alg contentspb.WelcomeWrapperAlgorithm, key []byte) ports.Extension {
	b, _ := proto.Marshal(&contentspb.WelcomeWrapperEncryption{PubKey: key, Algorithm: alg})
	return ports.Extension{Type: 0xff03, Data: b}
}

func aeadExt(values ...contentspb.WelcomePointeeEncryptionAeadType) ports.Extension {
	b, _ := proto.Marshal(&contentspb.WelcomePointeeEncryptionAeadTypesExtension{SupportedAeadTypes: values})
	return ports.Extension{Type: 0xff04, Data: b}
}

// JOIN-090: the backend at admission refuses a key package whose
// addressing extensions do not decode or whose wrapper no sender can use,
// and does not refuse one for an AEAD value it does not know.
func TestJOIN090_AddressingExtensions(t *testing.T) {
	key := ones(32)
	reg := wrappers{
		ports.WrapperCurve25519:          fakeWrapper{ports.WrapperCurve25519, 32},
		ports.WrapperXWingMLKEM768Draft6: fakeWrapper{ports.WrapperXWingMLKEM768Draft6, 1216},
	}
	curve := contentspb.WelcomeWrapperAlgorithm_WELCOME_WRAPPER_ALGORITHM_CURVE25519
	xwing := contentspb.WelcomeWrapperAlgorithm_WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6
	for _, c := range []struct {
		name   string
		init   []byte
		exts   []ports.Extension
		reason string // empty: accepted
	}{
		{"no 0xff03: CURVE25519 under a 32-byte init key", ones(32), nil, ""},
		{"no 0xff03 and a 31-byte init key", ones(31), nil, "32-byte key"},
		{"no 0xff03 and an init key HPKE refuses", make([]byte, 32), nil, "HPKE sender setup"},
		{"0xff03 CURVE25519, 32 bytes", ones(31), []ports.Extension{wrapperExt(curve, ones(32))}, ""},
		{"0xff03 XWING, 1216 bytes", ones(32), []ports.Extension{wrapperExt(xwing, ones(1216))}, ""},
		{"0xff03 XWING with a 32-byte key", ones(32), []ports.Extension{wrapperExt(xwing, ones(32))}, "1216-byte key"},
		{"0xff03 SYMMETRIC_KEY", ones(32), []ports.Extension{wrapperExt(3, ones(32))}, "neither"},
		{"0xff03 UNSPECIFIED", ones(32), []ports.Extension{wrapperExt(0, ones(32))}, "neither"},
		{"0xff03 that does not decode", ones(32), []ports.Extension{{Type: 0xff03, Data: []byte{0xff, 0xff}}}, "0xff03 extension does not decode"},
		{"0xff04 that does not decode", ones(32), []ports.Extension{{Type: 0xff04, Data: []byte{0x0a, 0x05}}}, "0xff04 extension does not decode"},
		{"0xff04 with CHACHA20_POLY1305", ones(32), []ports.Extension{aeadExt(3)}, ""},
		{"0xff04 with an AEAD value defined later", ones(32), []ports.Extension{aeadExt(3, 99)}, ""},
	} {
		p := &fakeParser{v: ports.ValidatedKeyPackage{SignatureKey: key, InitKey: c.init, Extensions: c.exts}}
		err := (&KeyPackageAdmission{Parser: p, Wrappers: reg}).ValidateKeyPackage(context.Background(), key, []byte{1})
		switch {
		case c.reason == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.reason != "" && (err == nil || !strings.Contains(err.Error(), c.reason)):
			t.Errorf("%s: got %v, want a refusal naming %q", c.name, err, c.reason)
		}
	}
}

// A package that does not validate, or whose leaf is another
// installation's key, is refused before JOIN-090 is looked at.
func TestKeyPackageAdmission_ParseAndLeafKey(t *testing.T) {
	reg := wrappers{ports.WrapperCurve25519: fakeWrapper{ports.WrapperCurve25519, 32}}
	bad := &KeyPackageAdmission{Parser: &fakeParser{err: fmt.Errorf("%w: bad signature", ports.ErrInvalid)}, Wrappers: reg}
	if err := bad.ValidateKeyPackage(context.Background(), ones(32), []byte{1}); err == nil || !strings.Contains(err.Error(), "bad signature") {
		t.Fatalf("invalid package: %v", err)
	}
	otherKey, _, _ := ed25519.GenerateKey(nil)
	other := &KeyPackageAdmission{Parser: &fakeParser{v: ports.ValidatedKeyPackage{SignatureKey: otherKey, InitKey: ones(32)}}, Wrappers: reg}
	if err := other.ValidateKeyPackage(context.Background(), ones(32), []byte{1}); err == nil || !strings.Contains(err.Error(), "installation key") {
		t.Fatalf("another installation's package: %v", err)
	}
	// COMP-320: a leaf key of small order is refused, even on its own topic.
	identity := append([]byte{1}, make([]byte, 31)...)
	weak := &KeyPackageAdmission{Parser: &fakeParser{v: ports.ValidatedKeyPackage{SignatureKey: identity, InitKey: ones(32)}}, Wrappers: reg}
	if err := weak.ValidateKeyPackage(context.Background(), identity, []byte{1}); err == nil || !strings.Contains(err.Error(), "small order") {
		t.Fatalf("small-order leaf key: %v", err)
	}
}
