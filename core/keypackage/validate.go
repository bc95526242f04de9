package keypackage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// ErrRejected is the class of every key package a [Validator] rejects;
// each check's sentinel wraps it.
var ErrRejected = errors.New("key package rejected")

// One sentinel per check; each wraps [ErrRejected].
var (
	// ErrUnverifiable: RFC 9420 §10.1 validation fails (JOIN-007).
	ErrUnverifiable = fmt.Errorf("JOIN-007 RFC 9420 validation: %w", ErrRejected)
	// ErrCipherSuite: the suite is not 0x0003 (JOIN-072).
	ErrCipherSuite = fmt.Errorf("JOIN-072 cipher suite: %w", ErrRejected)
	// ErrLifetime: the validator's time is outside the lifetime (JOIN-008).
	ErrLifetime = fmt.Errorf("JOIN-008 lifetime: %w", ErrRejected)
	// ErrCredential: the credential is not a canonical MlsCredential (JOIN-004).
	ErrCredential = fmt.Errorf("JOIN-004 credential encoding: %w", ErrRejected)
	// ErrWrongInbox: the credential names another inbox (JOIN-093).
	ErrWrongInbox = fmt.Errorf("JOIN-093 credential inbox: %w", ErrRejected)
	// ErrWrongInstallation: the leaf's signature key is not the
	// installation's key (JOIN-093).
	ErrWrongInstallation = fmt.Errorf("JOIN-093 leaf signature key: %w", ErrRejected)
	// ErrLastResortData: the last-resort mark carries data, or the
	// app_data_dictionary does not decode (JOIN-082).
	ErrLastResortData = fmt.Errorf("JOIN-082 last-resort mark: %w", ErrRejected)
	// ErrAddressing: the 0xff03 or 0xff04 extension does not decode or the
	// wrapper is unusable (JOIN-090).
	ErrAddressing = fmt.Errorf("JOIN-090 addressing extensions: %w", ErrRejected)
)

// wrapperKeySize is the public key size of each wrapper JOIN-090 admits.
var wrapperKeySize = map[ports.WrapperAlgorithmID]int{
	ports.WrapperCurve25519:          32,
	ports.WrapperXWingMLKEM768Draft6: 1216,
}

// Validated is a key package that passed every check, with what a sender
// needs to address its installation.
type Validated struct {
	// InstallationKey is the leaf's signature key.
	InstallationKey []byte
	// Ref is the KeyPackageRef; KeyPackage the TLS-serialized package.
	Ref, KeyPackage []byte
	// SequenceID is the package's sequence id on its key-package topic,
	// when it was fetched from one.
	SequenceID uint64
	// WrapperAlgorithm and WrapperPublicKey are what a sender wraps a
	// Welcome under (JOIN-071).
	WrapperAlgorithm ports.WrapperAlgorithmID
	WrapperPublicKey []byte
	// PointeeAEADs are the advertised pointee AEADs this version knows;
	// unknown values are treated as absent (JOIN-090).
	PointeeAEADs []ports.PointeeAEADID
	NotAfter     time.Time
}

// PointerCapable reports whether a welcome pointer may be sent to the
// installation (JOIN-091): it advertises ChaCha20-Poly1305 in 0xff04 and
// the X-Wing wrapper in 0xff03.
func (v Validated) PointerCapable() bool {
	if v.WrapperAlgorithm != ports.WrapperXWingMLKEM768Draft6 {
		return false
	}
	for _, a := range v.PointeeAEADs {
		if a == ports.PointeeAEADChaCha20Poly1305 {
			return true
		}
	}
	return false
}

// Validator validates fetched key packages for a sender. Engine and
// Wrappers are required; [Validator.FetchInboxes] calls them, and the
// transport, from several goroutines at once.
type Validator struct {
	Engine   Engine
	Wrappers Wrappers
	// Concurrency is how many installations FetchInboxes fetches and
	// validates at once; default 8 (COMP-131).
	Concurrency int
}

func reject(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}

// Validate checks kp as the newest package of installationKey in inboxID at
// time now: RFC 9420 §10.1 (JOIN-007), suite 0x0003 (JOIN-072), now inside
// [not_before, not_after) (JOIN-008), a canonical MlsCredential (JOIN-004)
// naming inboxID, installationKey as the leaf's signature key (JOIN-093), a
// last-resort mark without data (JOIN-082) and usable addressing
// extensions (JOIN-090). A package is never rejected for the length of its
// lifetime. The error wraps [ErrRejected] and the failed check's sentinel.
func (v *Validator) Validate(ctx context.Context, kp []byte, inboxID string, installationKey []byte, now time.Time) (Validated, error) {
	vk, err := v.Engine.ValidateKeyPackage(ctx, kp, ports.ValidateOptions{})
	if err != nil {
		if s, ok := peekSuite(kp); ok && s != CipherSuite {
			return Validated{}, reject(ErrCipherSuite, "suite %#04x, want %#04x", s, CipherSuite)
		}
		if ctx.Err() != nil {
			return Validated{}, ctx.Err()
		}
		return Validated{}, reject(ErrUnverifiable, "%v", err)
	}
	if vk.CipherSuite != CipherSuite {
		return Validated{}, reject(ErrCipherSuite, "suite %#04x, want %#04x", vk.CipherSuite, CipherSuite)
	}
	if now.Before(vk.NotBefore) || !now.Before(vk.NotAfter) {
		return Validated{}, reject(ErrLifetime, "%v is outside [%v, %v)", now.UTC(), vk.NotBefore, vk.NotAfter)
	}
	var cred contentspb.MlsCredential
	if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(vk.Credential, &cred); err != nil {
		return Validated{}, reject(ErrCredential, "identity is not an MlsCredential: %v", err)
	}
	canon, err := proto.MarshalOptions{Deterministic: true}.Marshal(&cred)
	if err != nil || !bytes.Equal(canon, vk.Credential) || cred.GetInboxId() == "" {
		return Validated{}, reject(ErrCredential, "identity is not exactly one serialized MlsCredential naming an inbox")
	}
	if cred.GetInboxId() != inboxID {
		return Validated{}, reject(ErrWrongInbox, "credential names inbox %q, want %q", cred.GetInboxId(), inboxID)
	}
	if !bytes.Equal(vk.SignatureKey, installationKey) {
		return Validated{}, reject(ErrWrongInstallation, "leaf signature key %x is not installation %x", vk.SignatureKey, installationKey)
	}
	if err := checkLastResort(vk.Extensions); err != nil {
		return Validated{}, err
	}
	out := Validated{InstallationKey: bytes.Clone(installationKey), Ref: vk.Ref, KeyPackage: bytes.Clone(kp), NotAfter: vk.NotAfter}
	if err := CheckAddressing(ctx, v.Wrappers, vk, &out); err != nil {
		return Validated{}, err
	}
	return out, nil
}

// peekSuite reads the cipher_suite of a bare TLS KeyPackage (version then
// suite, two bytes each).
func peekSuite(kp []byte) (uint16, bool) {
	if len(kp) < 4 || kp[0] != 0 || kp[1] != 1 {
		return 0, false
	}
	return uint16(kp[2])<<8 | uint16(kp[3]), true
}

// checkLastResort applies JOIN-082: a last_resort_key_package component in
// the package's app_data_dictionary must carry no data.
func checkLastResort(exts []ports.Extension) error {
	for _, e := range exts {
		if e.Type != ExtAppDataDictionary {
			continue
		}
		d, err := metadata.Parse(e.Data)
		if err != nil {
			return reject(ErrLastResortData, "app_data_dictionary does not decode: %v", err)
		}
		if data, ok := d.Get(ComponentLastResort); ok && len(data) != 0 {
			return reject(ErrLastResortData, "last_resort_key_package component carries %d bytes of data", len(data))
		}
	}
	return nil
}

// CheckAddressing applies JOIN-090 to a validated package: the 0xff03 and
// 0xff04 extensions decode; the wrapper (0xff03, or CURVE25519 under
// init_key when it is absent) is CURVE25519 with a 32-byte key or
// XWING_MLKEM_768_DRAFT_6 with a 1,216-byte key; and HPKE sender setup
// under it succeeds. supported_aead_types values this version does not
// know are ignored. When out is not nil it receives the wrapper and the
// known pointee AEADs.
func CheckAddressing(ctx context.Context, wrappers Wrappers, vk ports.ValidatedKeyPackage, out *Validated) error {
	alg, key := ports.WrapperCurve25519, vk.InitKey
	var aeads []ports.PointeeAEADID
	for _, e := range vk.Extensions {
		switch e.Type {
		case ExtWelcomeWrapperEncryption:
			var w contentspb.WelcomeWrapperEncryption
			if err := proto.Unmarshal(e.Data, &w); err != nil {
				return reject(ErrAddressing, "0xff03 extension does not decode: %v", err)
			}
			alg, key = ports.WrapperAlgorithmID(w.GetAlgorithm()), w.GetPubKey()
		case ExtPointeeAEADTypes:
			var p contentspb.WelcomePointeeEncryptionAeadTypesExtension
			if err := proto.Unmarshal(e.Data, &p); err != nil {
				return reject(ErrAddressing, "0xff04 extension does not decode: %v", err)
			}
			for _, a := range p.GetSupportedAeadTypes() {
				if id := ports.PointeeAEADID(a); id == ports.PointeeAEADChaCha20Poly1305 {
					aeads = append(aeads, id)
				}
			}
		}
	}
	size, ok := wrapperKeySize[alg]
	if !ok {
		return reject(ErrAddressing, "wrapper algorithm %v is neither CURVE25519 nor XWING_MLKEM_768_DRAFT_6", alg)
	}
	if len(key) != size {
		return reject(ErrAddressing, "wrapper algorithm %v takes a %d-byte key, got %d", alg, size, len(key))
	}
	w, err := wrappers.Wrapper(alg)
	if err != nil {
		return reject(ErrAddressing, "no implementation of wrapper algorithm %v: %v", alg, err)
	}
	if err := w.CheckPublicKey(ctx, key); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return reject(ErrAddressing, "HPKE sender setup fails for the wrapper key: %v", err)
	}
	if out != nil {
		out.WrapperAlgorithm, out.WrapperPublicKey, out.PointeeAEADs = alg, bytes.Clone(key), aeads
	}
	return nil
}
