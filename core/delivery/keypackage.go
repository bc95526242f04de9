package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/internal/edkey"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// Key-package extension types of the addressing extensions (joining-groups
// section 1).
const (
	extWrapperEncryption = 0xff03
	extPointeeAEADTypes  = 0xff04
)

// KeyPackageParser parses and validates a TLS-serialized key package under
// RFC 9420 §10.1; [ports.MLS] provides it.
type KeyPackageParser interface {
	ValidateKeyPackage(ctx context.Context, kp []byte, opts ports.ValidateOptions) (ports.ValidatedKeyPackage, error)
}

// WrapperLookup returns the wrapper algorithm registered under an id; the
// registry of core/algorithm provides it.
type WrapperLookup interface {
	Wrapper(id ports.WrapperAlgorithmID) (ports.WrapperAlgorithm, error)
}

// KeyPackageAdmission is the [KeyPackageValidator] the delivery service
// applies at admission: the package must parse and validate (RFC 9420
// §10.1, JOIN-007, without the lifetime check, which is the sender's), its
// leaf's signature key must be the installation key its topic names, and
// it must pass JOIN-090.
type KeyPackageAdmission struct {
	Parser   KeyPackageParser
	Wrappers WrapperLookup
}

var _ KeyPackageValidator = (*KeyPackageAdmission)(nil)

// ValidateKeyPackage implements [KeyPackageValidator].
func (a *KeyPackageAdmission) ValidateKeyPackage(ctx context.Context, installationKey, kp []byte) error {
	v, err := a.Parser.ValidateKeyPackage(ctx, kp, ports.ValidateOptions{})
	if err != nil {
		return fmt.Errorf("does not validate: %v", err)
	}
	if err := edkey.Check(v.SignatureKey); err != nil {
		return fmt.Errorf("leaf signature key: %v", err) // COMP-320
	}
	if !bytes.Equal(v.SignatureKey, installationKey) {
		return errors.New("leaf signature key is not the installation key the topic names")
	}
	return CheckAddressing(ctx, a.Wrappers, v)
}

// CheckAddressing applies JOIN-090 to a validated key package: its 0xff03
// and 0xff04 extensions must decode; its wrapper (the 0xff03 extension, or
// WELCOME_WRAPPER_ALGORITHM_CURVE25519 under init_key when that extension
// is absent) must be CURVE25519 with a 32-byte key or
// XWING_MLKEM_768_DRAFT_6 with a 1,216-byte key; and HPKE sender setup
// under that algorithm must succeed for the key. A supported_aead_types
// value this version does not know is ignored, never a reason to refuse.
func CheckAddressing(ctx context.Context, wrappers WrapperLookup, v ports.ValidatedKeyPackage) error {
	alg, key := ports.WrapperCurve25519, v.InitKey
	for _, e := range v.Extensions {
		switch e.Type {
		case extWrapperEncryption:
			var w contentspb.WelcomeWrapperEncryption
			if err := proto.Unmarshal(e.Data, &w); err != nil {
				return fmt.Errorf("JOIN-090: 0xff03 extension does not decode: %v", err)
			}
			alg, key = ports.WrapperAlgorithmID(w.GetAlgorithm()), w.GetPubKey()
		case extPointeeAEADTypes:
			var p contentspb.WelcomePointeeEncryptionAeadTypesExtension
			if err := proto.Unmarshal(e.Data, &p); err != nil {
				return fmt.Errorf("JOIN-090: 0xff04 extension does not decode: %v", err)
			}
		}
	}
	want := map[ports.WrapperAlgorithmID]int{ports.WrapperCurve25519: 32, ports.WrapperXWingMLKEM768Draft6: 1216}
	size, ok := want[alg]
	if !ok {
		return fmt.Errorf("JOIN-090: wrapper algorithm %d is neither CURVE25519 nor XWING_MLKEM_768_DRAFT_6", alg)
	}
	if len(key) != size {
		return fmt.Errorf("JOIN-090: wrapper algorithm %d takes a %d-byte key, got %d", alg, size, len(key))
	}
	w, err := wrappers.Wrapper(alg)
	if err != nil {
		return fmt.Errorf("JOIN-090: cannot check the wrapper key: %v", err)
	}
	if err := w.CheckPublicKey(ctx, key); err != nil {
		return fmt.Errorf("JOIN-090: HPKE sender setup fails for the wrapper key: %v", err)
	}
	return nil
}
