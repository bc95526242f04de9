package keypackage

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// DefaultLifetime is the lifetime a key package states when none is
// configured: 12 weeks (joining-groups section 2).
const DefaultLifetime = 12 * 7 * 24 * time.Hour

// notBeforeSkew is how far before its creation a package's lifetime
// starts, so that a validator whose clock is behind still accepts it
// (COMP-127).
const notBeforeSkew = time.Hour

// Engine creates and validates key packages; [ports.MLS] provides it.
type Engine interface {
	CreateKeyPackage(ctx context.Context, opts ports.KeyPackageOptions) (ports.KeyPackageBundle, error)
	ValidateKeyPackage(ctx context.Context, kp []byte, opts ports.ValidateOptions) (ports.ValidatedKeyPackage, error)
}

// Wrappers looks a wrapper algorithm up by its wire id; the registry of
// core/algorithm provides it.
type Wrappers interface {
	Wrapper(id ports.WrapperAlgorithmID) (ports.WrapperAlgorithm, error)
}

// BuildOptions describe a key package to build.
type BuildOptions struct {
	Engine   Engine
	Wrappers Wrappers
	// WrapperAlgorithm is the algorithm of the package's wrapper key:
	// X-Wing (the default, when zero) or CURVE25519 (JOIN-090 admits no
	// other).
	WrapperAlgorithm ports.WrapperAlgorithmID
	InboxID          string
	// InstallationKey is the installation's Ed25519 key; the leaf's
	// signature key is its public half.
	InstallationKey ed25519.PrivateKey
	// Now is the creation time.
	Now time.Time
	// Lifetime is how long the package is valid from Now; zero means
	// [DefaultLifetime]. A longer one is allowed.
	Lifetime time.Duration
}

// ErrBuild reports options a key package cannot be built from.
var ErrBuild = errors.New("cannot build key package")

// Build creates a key package and all three of its private keys (JOIN-001,
// JOIN-002, JOIN-004, JOIN-072): fresh init and leaf encryption keys from
// the engine, and a wrapper key pair generated for this package alone
// (JOIN-016). The record it returns is not stored.
func Build(ctx context.Context, o BuildOptions) (ports.KeyPackageRecord, error) {
	if o.Engine == nil || o.Wrappers == nil {
		return ports.KeyPackageRecord{}, fmt.Errorf("%w: no engine or wrapper registry", ErrBuild)
	}
	if o.InboxID == "" || len(o.InstallationKey) != ed25519.PrivateKeySize {
		return ports.KeyPackageRecord{}, fmt.Errorf("%w: an inbox id and a %d-byte installation key are required", ErrBuild, ed25519.PrivateKeySize)
	}
	alg := o.WrapperAlgorithm
	if alg == ports.WrapperUnspecified {
		alg = ports.WrapperXWingMLKEM768Draft6
	}
	if _, ok := wrapperKeySize[alg]; !ok {
		return ports.KeyPackageRecord{}, fmt.Errorf("%w: wrapper algorithm %v is neither CURVE25519 nor XWING_MLKEM_768_DRAFT_6", ErrBuild, alg)
	}
	w, err := o.Wrappers.Wrapper(alg)
	if err != nil {
		return ports.KeyPackageRecord{}, fmt.Errorf("build key package: %w", err)
	}
	wpub, wpriv, err := w.GenerateKey(ctx)
	if err != nil {
		return ports.KeyPackageRecord{}, fmt.Errorf("build key package: wrapper key: %w", err)
	}
	exts, err := extensions(alg, wpub)
	if err != nil {
		return ports.KeyPackageRecord{}, err
	}
	cred, err := proto.MarshalOptions{Deterministic: true}.Marshal(&contentspb.MlsCredential{InboxId: o.InboxID})
	if err != nil {
		return ports.KeyPackageRecord{}, err
	}
	life := o.Lifetime
	if life <= 0 {
		life = DefaultLifetime
	}
	notAfter := o.Now.Add(life).Truncate(time.Second)
	b, err := o.Engine.CreateKeyPackage(ctx, ports.KeyPackageOptions{
		Credential: cred, SignaturePrivateKey: o.InstallationKey.Seed(),
		NotBefore: o.Now.Add(-notBeforeSkew), NotAfter: notAfter, Extensions: exts,
		CapabilityExtensions: CapabilityExtensions(), CapabilityProposals: CapabilityProposals(),
	})
	if err != nil {
		return ports.KeyPackageRecord{}, fmt.Errorf("build key package: %w", err)
	}
	return ports.KeyPackageRecord{
		Ref: b.Ref, KeyPackage: b.KeyPackage, WrapperAlgorithm: int32(alg), WrapperPublicKey: wpub,
		InitPrivateKey: b.InitPrivateKey, EncryptionPrivateKey: b.EncryptionPrivateKey, WrapperPrivateKey: wpriv,
		CreatedAt: o.Now, NotAfter: notAfter,
	}, nil
}

// extensions returns the key package's own extensions: 0xff03 with the
// wrapper key, 0xff04 with ChaCha20-Poly1305, and the app_data_dictionary
// with the last-resort mark (empty data).
func extensions(alg ports.WrapperAlgorithmID, wpub []byte) ([]ports.Extension, error) {
	det := proto.MarshalOptions{Deterministic: true}
	wrap, err := det.Marshal(&contentspb.WelcomeWrapperEncryption{
		PubKey: wpub, Algorithm: contentspb.WelcomeWrapperAlgorithm(alg)})
	if err != nil {
		return nil, err
	}
	aead, err := det.Marshal(&contentspb.WelcomePointeeEncryptionAeadTypesExtension{
		SupportedAeadTypes: []contentspb.WelcomePointeeEncryptionAeadType{
			contentspb.WelcomePointeeEncryptionAeadType_WELCOME_POINTEE_ENCRYPTION_AEAD_TYPE_CHACHA20_POLY1305}})
	if err != nil {
		return nil, err
	}
	dict, err := metadata.Dictionary{}.Set(ComponentLastResort, nil).Extension()
	if err != nil {
		return nil, err
	}
	return []ports.Extension{
		{Type: ExtWelcomeWrapperEncryption, Data: wrap},
		{Type: ExtPointeeAEADTypes, Data: aead},
		dict,
	}, nil
}
