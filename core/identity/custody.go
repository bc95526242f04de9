package identity

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
)

// Revoke removes installationKey from this installation's inbox with an
// update signed by recovery, the inbox's recovery key, which the caller
// supplies: installations do not hold it (COMP-261). It returns the
// sequence id the delivery service assigned the update. It fails with an
// error wrapping [ErrNoRecoveryKey] when recovery is nil and
// [ErrWrongRecoveryKey] when it is not this inbox's key. When the publish
// fails the update stays pending for [PublishPending]. Installations that
// installationKey authorised stay associated: [AddedBy] lists them.
func Revoke(ctx context.Context, opts Options, recovery ed25519.PrivateKey, installationKey []byte) (uint64, error) {
	if err := opts.check(); err != nil {
		return 0, err
	}
	if recovery == nil {
		return 0, fmt.Errorf("revoke installation: %w", ErrNoRecoveryKey)
	}
	if len(recovery) != ed25519.PrivateKeySize {
		return 0, fmt.Errorf("revoke installation: recovery key is %d bytes, want %d", len(recovery), ed25519.PrivateKeySize)
	}
	var key string
	err := opts.Store.Tx(ctx, func(tx ports.Tx) error {
		in, err := load(ctx, tx)
		if err != nil {
			return err
		}
		if InboxID(recovery.Public().(ed25519.PublicKey)) != in.InboxID {
			return ErrWrongRecoveryKey
		}
		u, err := NewRevoke(recovery, installationKey, opts.Clock.Now().UnixNano())
		if err != nil {
			return err
		}
		return putPendingAs(ctx, tx, u, &key)
	})
	if err != nil {
		return 0, fmt.Errorf("revoke installation: %w", err)
	}
	seqs, err := PublishPending(ctx, opts)
	if err != nil {
		return 0, fmt.Errorf("revoke installation: update stored, not yet published: %w", err)
	}
	return seqs[key], nil
}

// ExportRecoveryKey hands out the recovery key store holds and, unless
// keep is set, deletes it from store in the same transaction; either way
// the identity is stored in format 2 afterwards, so a kept key counts as
// kept on purpose (COMP-262). It fails with an error wrapping
// [ErrNoRecoveryKey] when store does not hold the key. The caller writes
// the key where the user keeps it before it drops the result: a deleted
// key is gone from this installation.
func ExportRecoveryKey(ctx context.Context, store ports.Store, keep bool) (ed25519.PrivateKey, error) {
	var key ed25519.PrivateKey
	err := store.Tx(ctx, func(tx ports.Tx) error {
		in, err := load(ctx, tx)
		if err != nil {
			return err
		}
		if !in.RecoveryKeyStored {
			return ErrNoRecoveryKey
		}
		key = in.RecoveryKey
		b := tx.Blobs()
		if err := b.Put(ctx, BlobNamespace, blobRecoveryPublic, in.RecoveryPublicKey); err != nil {
			return err
		}
		if err := b.Put(ctx, BlobNamespace, blobFormat, []byte(formatCustody)); err != nil {
			return err
		}
		if keep {
			return nil
		}
		return b.Delete(ctx, BlobNamespace, blobRecovery)
	})
	if err != nil {
		return nil, fmt.Errorf("export recovery key: %w", err)
	}
	return key, nil
}

// ErrNoRecoveryPublicKey reports an inbox whose topic shows no valid
// update, so its recovery public key is unknown.
var ErrNoRecoveryPublicKey = fmt.Errorf("no valid identity update on the inbox's topic: %w", ports.ErrNotFound)

// RecoveryPublicKeyOf reads the inbox's identity-update topic and returns
// the recovery public key of its first valid update. The key is checked
// against the inbox id, so whatever else the topic holds cannot change it.
// It fails with an error wrapping [ErrNoRecoveryPublicKey] when the first
// page holds no valid update of the inbox.
func RecoveryPublicKeyOf(ctx context.Context, tr ports.Transport, inboxID string) (ed25519.PublicKey, error) {
	topic, err := Topic(inboxID)
	if err != nil {
		return nil, err
	}
	envs, err := tr.Query(ctx, topic, 0, 100)
	if err != nil {
		return nil, fmt.Errorf("read identity updates of %s: %w", inboxID, err)
	}
	for _, env := range envs {
		u := env.GetEnvelope().GetIdentityUpdate()
		if u.GetInboxId() == inboxID && VerifyUpdate(u) == nil {
			return bytes.Clone(u.GetRecoveryPublicKey()), nil
		}
	}
	return nil, fmt.Errorf("inbox %s: %w", inboxID, ErrNoRecoveryPublicKey)
}

// RequestInstallation creates this installation for the inbox inboxID
// without the recovery key: it reads the inbox's recovery public key from
// its topic, generates an installation key, stores the identity and the
// request ([NewAddRequest]) in one transaction, and returns the identity
// and the serialized request. An installation the inbox associates passes
// the request to [Authorize]; until that update is published, the inbox
// does not associate this installation. A store that already holds an
// identity fails with an error wrapping [ports.ErrAlreadyExists].
func RequestInstallation(ctx context.Context, opts Options, inboxID string) (Installation, []byte, error) {
	if err := opts.check(); err != nil {
		return Installation{}, nil, err
	}
	rpub, err := RecoveryPublicKeyOf(ctx, opts.Transport, inboxID)
	if err != nil {
		return Installation{}, nil, fmt.Errorf("request installation: %w", err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Installation{}, nil, err
	}
	u, err := NewAddRequest(key, rpub, opts.Clock.Now().UnixNano())
	if err != nil {
		return Installation{}, nil, err
	}
	req, err := proto.Marshal(u)
	if err != nil {
		return Installation{}, nil, err
	}
	in := Installation{InboxID: inboxID, InstallationKey: key, RecoveryPublicKey: rpub}
	err = opts.Store.Tx(ctx, func(tx ports.Tx) error {
		if err := storeIdentity(ctx, tx, in, false, nil); err != nil {
			return err
		}
		return tx.Blobs().Put(ctx, BlobNamespace, blobRequest, req)
	})
	if err != nil {
		return Installation{}, nil, fmt.Errorf("request installation: %w", err)
	}
	return in, req, nil
}

// PendingRequest returns the request [RequestInstallation] stored, or an
// error wrapping [ports.ErrNotFound] when the store holds none.
func PendingRequest(ctx context.Context, store ports.Store) ([]byte, error) {
	var req []byte
	err := store.Tx(ctx, func(tx ports.Tx) error {
		var err error
		req, err = tx.Blobs().Get(ctx, BlobNamespace, blobRequest)
		return err
	})
	return req, err
}

// Authorize authorises another installation's request (made by
// [RequestInstallation]) with this installation's key and publishes the
// add, returning its sequence id. The add takes effect only if this
// installation is associated with the inbox at that sequence id: a
// revoked installation's authorisation is ignored by every reader
// (COMP-260). A request that does not decode, or adds to another inbox,
// fails with an error wrapping [ErrInvalidUpdate]. When the publish fails
// the update stays pending for [PublishPending].
func Authorize(ctx context.Context, opts Options, request []byte) (uint64, error) {
	if err := opts.check(); err != nil {
		return 0, err
	}
	req, err := DecodeAddRequest(request)
	if err != nil {
		return 0, fmt.Errorf("authorize installation: %w", err)
	}
	var key string
	err = opts.Store.Tx(ctx, func(tx ports.Tx) error {
		in, err := load(ctx, tx)
		if err != nil {
			return err
		}
		u, err := AuthorizeAdd(in.InstallationKey, in.InboxID, req)
		if err != nil {
			return err
		}
		return putPendingAs(ctx, tx, u, &key)
	})
	if err != nil {
		return 0, fmt.Errorf("authorize installation: %w", err)
	}
	seqs, err := PublishPending(ctx, opts)
	if err != nil {
		return 0, fmt.Errorf("authorize installation: update stored, not yet published: %w", err)
	}
	if _, ok := seqs[key]; !ok {
		return 0, errors.New("authorize installation: the delivery service assigned the add no sequence id")
	}
	return seqs[key], nil
}
