package identity

import (
	"bytes"
	"crypto/ed25519"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/proto/identitypb"
)

// NewAddRequest returns the request of a new installation to join the
// inbox of recoveryPublicKey (COMP-260): an add of installation's key,
// signed by it over [TBS], stamped createdNS, and not yet authorised. An
// installation the inbox associates completes it with [AuthorizeAdd].
func NewAddRequest(installation ed25519.PrivateKey, recoveryPublicKey ed25519.PublicKey, createdNS int64) (*identitypb.IdentityUpdate, error) {
	if len(installation) != ed25519.PrivateKeySize {
		return nil, invalidUpdate("installation key must be %d bytes", ed25519.PrivateKeySize)
	}
	if len(recoveryPublicKey) != ed25519.PublicKeySize {
		return nil, invalidUpdate("recovery public key is %d bytes, want %d", len(recoveryPublicKey), ed25519.PublicKeySize)
	}
	add := &identitypb.AddInstallation{InstallationKey: installation.Public().(ed25519.PublicKey)}
	u := &identitypb.IdentityUpdate{
		InboxId: InboxID(recoveryPublicKey), RecoveryPublicKey: bytes.Clone(recoveryPublicKey), CreatedNs: createdNS,
		Action: &identitypb.IdentityUpdate_AddInstallation{AddInstallation: add},
	}
	tbs, err := TBS(u)
	if err != nil {
		return nil, err
	}
	if add.InstallationSignature, err = sign(installation, tbs); err != nil {
		return nil, err
	}
	return u, nil
}

// AuthorizeAdd returns request, an add made by [NewAddRequest], authorised
// by the installation key authorizer: it checks that the request is an add
// to inboxID signed by the installation it adds, sets the authorizer key
// and signs [AuthorizerTBS]. Readers apply the result only when authorizer
// is associated with the inbox at the sequence id the update gets (COMP-260).
// It returns an error wrapping [ErrInvalidUpdate] for a request that is
// not such an add.
func AuthorizeAdd(authorizer ed25519.PrivateKey, inboxID string, request *identitypb.IdentityUpdate) (*identitypb.IdentityUpdate, error) {
	if len(authorizer) != ed25519.PrivateKeySize {
		return nil, invalidUpdate("authorizer key must be %d bytes", ed25519.PrivateKeySize)
	}
	if request.GetAddInstallation() == nil {
		return nil, invalidUpdate("the request is not an add")
	}
	if request.GetInboxId() != inboxID {
		return nil, invalidUpdate("the request adds to inbox %q, not %q", request.GetInboxId(), inboxID)
	}
	u := proto.Clone(request).(*identitypb.IdentityUpdate)
	u.RecoverySignature = nil
	add := u.GetAddInstallation()
	add.AuthorizerKey = authorizer.Public().(ed25519.PublicKey)
	atbs, err := AuthorizerTBS(u)
	if err != nil {
		return nil, err
	}
	if add.AuthorizerSignature, err = sign(authorizer, atbs); err != nil {
		return nil, err
	}
	if err := VerifyUpdate(u); err != nil {
		return nil, err
	}
	return u, nil
}

// DecodeAddRequest parses a serialized add request ([NewAddRequest]) and
// checks it: an add whose recovery key names its inbox, signed by the
// installation it adds, carrying no authorisation yet. It returns an error
// wrapping [ErrInvalidUpdate] naming what was wrong.
func DecodeAddRequest(b []byte) (*identitypb.IdentityUpdate, error) {
	var u identitypb.IdentityUpdate
	if err := proto.Unmarshal(b, &u); err != nil {
		return nil, invalidUpdate("add request does not decode: %v", err)
	}
	add := u.GetAddInstallation()
	if add == nil {
		return nil, invalidUpdate("add request is not an add")
	}
	if len(u.GetRecoverySignature()) != 0 || len(add.GetAuthorizerKey()) != 0 || len(add.GetAuthorizerSignature()) != 0 {
		return nil, invalidUpdate("add request is already authorised")
	}
	rpub := u.GetRecoveryPublicKey()
	if len(rpub) != ed25519.PublicKeySize || u.GetInboxId() != InboxID(rpub) {
		return nil, invalidUpdate("add request: inbox_id is not the SHA-256 of a 32-byte recovery_public_key")
	}
	key := add.GetInstallationKey()
	if len(key) != ed25519.PublicKeySize {
		return nil, invalidUpdate("add request: installation_key is %d bytes, want %d", len(key), ed25519.PublicKeySize)
	}
	tbs, err := TBS(&u)
	if err != nil {
		return nil, err
	}
	if !verify(key, tbs, add.GetInstallationSignature()) {
		return nil, invalidUpdate("add request: installation signature does not verify")
	}
	return &u, nil
}
