package identity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/internal/edkey"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

// UpdateContext is the Ed25519ctx context string of every signature an
// identity update carries (COMP-121).
const UpdateContext = "regroup identity update v1"

// Action values of IdentityUpdateTBS.action.
const (
	actionAdd    = 1
	actionRevoke = 2
)

// ErrInvalidUpdate reports an identity update that is malformed or whose
// signatures do not verify; readers ignore such an update and regroupd
// refuses it at admission.
var ErrInvalidUpdate = errors.New("invalid identity update")

func invalidUpdate(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidUpdate, fmt.Sprintf(format, args...))
}

// InboxID returns the inbox id of a recovery public key: the lowercase hex
// SHA-256 of its 32 bytes (COMP-070).
func InboxID(recoveryPublicKey ed25519.PublicKey) string {
	sum := sha256.Sum256(recoveryPublicKey)
	return hex.EncodeToString(sum[:])
}

// Topic returns the identity-update topic of an inbox: kind 0x02 followed
// by the 32 bytes the inbox id encodes. It fails with an error wrapping
// [ErrInvalidUpdate] when inboxID is not 64 lowercase hex digits.
func Topic(inboxID string) ([]byte, error) {
	raw, err := hex.DecodeString(inboxID)
	if err != nil || len(raw) != sha256.Size || hex.EncodeToString(raw) != inboxID {
		return nil, invalidUpdate("inbox id %q is not 64 lowercase hex digits", inboxID)
	}
	return append([]byte{byte(ports.TopicIdentityUpdates)}, raw...), nil
}

// TBS returns the bytes the recovery signature and the installation
// signature of u cover: the deterministic encoding of IdentityUpdateTBS
// built from u's fields, with no authoriser (the bytes of format 1).
func TBS(u *identitypb.IdentityUpdate) ([]byte, error) { return tbs(u, nil) }

// AuthorizerTBS returns the bytes the authorizer signature of an add
// authorised by an installation covers: [TBS] with the authorising
// installation key set (COMP-260). Naming the authoriser keeps its
// signature apart from every recovery or installation signature.
func AuthorizerTBS(u *identitypb.IdentityUpdate) ([]byte, error) {
	k := u.GetAddInstallation().GetAuthorizerKey()
	if len(k) != ed25519.PublicKeySize {
		return nil, invalidUpdate("authorizer_key is %d bytes, want %d", len(k), ed25519.PublicKeySize)
	}
	return tbs(u, k)
}

func tbs(u *identitypb.IdentityUpdate, authorizer []byte) ([]byte, error) {
	tbs := &identitypb.IdentityUpdateTBS{
		InboxId: u.GetInboxId(), RecoveryPublicKey: u.GetRecoveryPublicKey(), CreatedNs: u.GetCreatedNs(),
		AuthorizerKey: authorizer,
	}
	switch a := u.GetAction().(type) {
	case *identitypb.IdentityUpdate_AddInstallation:
		tbs.Action, tbs.InstallationKey = actionAdd, a.AddInstallation.GetInstallationKey()
	case *identitypb.IdentityUpdate_RevokeInstallation:
		tbs.Action, tbs.InstallationKey = actionRevoke, a.RevokeInstallation.GetInstallationKey()
	default:
		return nil, invalidUpdate("no action")
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(tbs)
}

func sign(priv ed25519.PrivateKey, msg []byte) ([]byte, error) {
	return priv.Sign(nil, msg, &ed25519.Options{Context: UpdateContext})
}

func verify(pub, msg, sig []byte) bool {
	if len(sig) != ed25519.SignatureSize || !edkey.Usable(pub) { // COMP-320: small-order and non-canonical keys prove nothing
		return false
	}
	return ed25519.VerifyWithOptions(pub, msg, sig, &ed25519.Options{Context: UpdateContext}) == nil
}

// NewAdd returns an update that associates installation's key with the
// inbox of recovery, authorised by the recovery key: signed by both keys,
// stamped createdNS.
func NewAdd(recovery, installation ed25519.PrivateKey, createdNS int64) (*identitypb.IdentityUpdate, error) {
	if len(recovery) != ed25519.PrivateKeySize || len(installation) != ed25519.PrivateKeySize {
		return nil, invalidUpdate("private keys must be %d bytes", ed25519.PrivateKeySize)
	}
	rpub := recovery.Public().(ed25519.PublicKey)
	add := &identitypb.AddInstallation{InstallationKey: installation.Public().(ed25519.PublicKey)}
	u := &identitypb.IdentityUpdate{
		InboxId: InboxID(rpub), RecoveryPublicKey: rpub, CreatedNs: createdNS,
		Action: &identitypb.IdentityUpdate_AddInstallation{AddInstallation: add},
	}
	tbs, err := TBS(u)
	if err != nil {
		return nil, err
	}
	if add.InstallationSignature, err = sign(installation, tbs); err != nil {
		return nil, err
	}
	if u.RecoverySignature, err = sign(recovery, tbs); err != nil {
		return nil, err
	}
	return u, nil
}

// NewRevoke returns an update that removes installationKey from the inbox
// of recovery, signed by the recovery key, stamped createdNS.
func NewRevoke(recovery ed25519.PrivateKey, installationKey []byte, createdNS int64) (*identitypb.IdentityUpdate, error) {
	if len(recovery) != ed25519.PrivateKeySize {
		return nil, invalidUpdate("recovery key must be %d bytes", ed25519.PrivateKeySize)
	}
	if len(installationKey) != ed25519.PublicKeySize {
		return nil, invalidUpdate("installation key is %d bytes, want %d", len(installationKey), ed25519.PublicKeySize)
	}
	rpub := recovery.Public().(ed25519.PublicKey)
	u := &identitypb.IdentityUpdate{
		InboxId: InboxID(rpub), RecoveryPublicKey: rpub, CreatedNs: createdNS,
		Action: &identitypb.IdentityUpdate_RevokeInstallation{RevokeInstallation: &identitypb.RevokeInstallation{
			InstallationKey: bytes.Clone(installationKey)}},
	}
	tbs, err := TBS(u)
	if err != nil {
		return nil, err
	}
	if u.RecoverySignature, err = sign(recovery, tbs); err != nil {
		return nil, err
	}
	return u, nil
}

// VerifyUpdate checks an identity update on its own (COMP-071, COMP-260):
// a 32-byte recovery key whose SHA-256 is the inbox id, an action with a
// 32-byte installation key, and its signatures. A revoke carries the
// recovery key's signature over [TBS]. An add carries the new
// installation key's signature over [TBS] and exactly one authorisation:
// the recovery key's signature over [TBS], or an authorising installation
// key other than the new one with its signature over [AuthorizerTBS].
// Whether that installation may authorise is a question of association
// state that only [Fold] answers. VerifyUpdate returns nil or an error
// wrapping [ErrInvalidUpdate] that names the failed check.
func VerifyUpdate(u *identitypb.IdentityUpdate) error {
	sigs, err := updateSignatures(u)
	if err != nil {
		return err
	}
	for _, s := range sigs {
		if !verify(s.key, s.msg, s.sig) {
			return invalidUpdate("%s signature does not verify", s.role)
		}
	}
	return nil
}

// signature is one signature an update carries: by key over msg, named
// by its role in the error of an update it fails.
type signature struct {
	role          string // "recovery", "authorizer" or "installation"
	key, msg, sig []byte
}

// updateSignatures makes every check of [VerifyUpdate] but the
// signatures, and returns those in the order VerifyUpdate verifies them:
// the authorisation (recovery or authorizer), then the new
// installation's. Every other check comes before any signature's in
// VerifyUpdate, so an update fails here exactly when VerifyUpdate fails
// it before verifying a signature, with the same error.
func updateSignatures(u *identitypb.IdentityUpdate) ([]signature, error) {
	if u == nil {
		return nil, invalidUpdate("nil update")
	}
	rpub := u.GetRecoveryPublicKey()
	if len(rpub) != ed25519.PublicKeySize {
		return nil, invalidUpdate("recovery_public_key is %d bytes, want %d", len(rpub), ed25519.PublicKeySize)
	}
	if u.GetInboxId() != InboxID(rpub) {
		return nil, invalidUpdate("inbox_id is not the SHA-256 of recovery_public_key")
	}
	tbs, err := TBS(u)
	if err != nil {
		return nil, err
	}
	add := u.GetAddInstallation()
	var key []byte
	switch a := u.GetAction().(type) {
	case *identitypb.IdentityUpdate_AddInstallation:
		key = a.AddInstallation.GetInstallationKey()
	case *identitypb.IdentityUpdate_RevokeInstallation:
		key = a.RevokeInstallation.GetInstallationKey()
	}
	if len(key) != ed25519.PublicKeySize {
		return nil, invalidUpdate("installation_key is %d bytes, want %d", len(key), ed25519.PublicKeySize)
	}
	var sigs []signature
	if add == nil || (len(add.GetAuthorizerKey()) == 0 && len(add.GetAuthorizerSignature()) == 0) {
		sigs = append(sigs, signature{"recovery", rpub, tbs, u.GetRecoverySignature()})
	} else {
		auth, err := authorizerSignature(u, add, key)
		if err != nil {
			return nil, err
		}
		sigs = append(sigs, auth)
	}
	if add != nil {
		sigs = append(sigs, signature{"installation", key, tbs, add.GetInstallationSignature()})
	}
	return sigs, nil
}

// authorizerSignature checks an add authorised by an installation: no
// recovery signature and an authorizer key that is not the added key; it
// returns the authorizer's signature over [AuthorizerTBS].
func authorizerSignature(u *identitypb.IdentityUpdate, add *identitypb.AddInstallation, key []byte) (signature, error) {
	if len(u.GetRecoverySignature()) != 0 {
		return signature{}, invalidUpdate("an add carries both a recovery signature and an authorizer")
	}
	auth := add.GetAuthorizerKey()
	if bytes.Equal(auth, key) {
		return signature{}, invalidUpdate("an installation cannot authorise its own add")
	}
	atbs, err := AuthorizerTBS(u)
	if err != nil {
		return signature{}, err
	}
	return signature{"authorizer", auth, atbs, add.GetAuthorizerSignature()}, nil
}

// DecodeUpdate parses a serialized IdentityUpdate and verifies it. It
// returns an error wrapping [ErrInvalidUpdate] for bytes that do not parse
// or an update that does not verify.
func DecodeUpdate(b []byte) (*identitypb.IdentityUpdate, error) {
	var u identitypb.IdentityUpdate
	if err := proto.Unmarshal(b, &u); err != nil {
		return nil, invalidUpdate("does not decode: %v", err)
	}
	if err := VerifyUpdate(&u); err != nil {
		return nil, err
	}
	return &u, nil
}
