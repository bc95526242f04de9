package identity

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

// Blob namespace and keys of this installation's identity (COMP-122).
const (
	// BlobNamespace is the [ports.Blobs] namespace the identity lives in.
	BlobNamespace = "regroup/identity"

	blobInbox        = "inbox-id"
	blobInstallation = "installation-key"
	blobRecovery     = "recovery-key"
	blobPending      = "pending/"
)

// ErrNoIdentity reports a store that holds no installation identity. It
// wraps [ports.ErrNotFound].
var ErrNoIdentity = fmt.Errorf("no installation identity in the store: %w", ports.ErrNotFound)

// ErrNoRecoveryKey reports an operation that needs the inbox's recovery
// key on an installation that does not hold it.
var ErrNoRecoveryKey = errors.New("this installation does not hold the inbox's recovery key")

// Installation is this installation's identity: its inbox and its private
// keys. RecoveryKey is nil on an installation that was not given it.
type Installation struct {
	InboxID string
	// InstallationKey is the installation's Ed25519 key; its public half
	// is the installation key other parties see, and its seed is the MLS
	// engine's signature key.
	InstallationKey ed25519.PrivateKey
	// RecoveryKey is the inbox's recovery Ed25519 key, nil when not held.
	RecoveryKey ed25519.PrivateKey
}

// PublicKey returns the 32-byte installation key.
func (i Installation) PublicKey() ed25519.PublicKey {
	return i.InstallationKey.Public().(ed25519.PublicKey)
}

// Options are what identity operations need: the store that keeps this
// installation's identity, the transport to its delivery service and the
// clock that stamps updates. All three are required.
type Options struct {
	Store     ports.Store
	Transport ports.Transport
	Clock     ports.Clock
}

func (o Options) check() error {
	if o.Store == nil || o.Transport == nil || o.Clock == nil {
		return errors.New("identity: options need a store, a transport and a clock")
	}
	return nil
}

// Load returns the identity kept in store, or an error wrapping
// [ErrNoIdentity] when it holds none.
func Load(ctx context.Context, store ports.Store) (Installation, error) {
	var in Installation
	err := store.Tx(ctx, func(tx ports.Tx) error {
		var err error
		in, err = load(ctx, tx)
		return err
	})
	return in, err
}

func load(ctx context.Context, tx ports.Tx) (Installation, error) {
	b := tx.Blobs()
	seed, err := b.Get(ctx, BlobNamespace, blobInstallation)
	if errors.Is(err, ports.ErrNotFound) {
		return Installation{}, ErrNoIdentity
	}
	if err != nil {
		return Installation{}, fmt.Errorf("load identity: %w", err)
	}
	if len(seed) != ed25519.SeedSize {
		return Installation{}, fmt.Errorf("load identity: stored installation key is %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	inbox, err := b.Get(ctx, BlobNamespace, blobInbox)
	if err != nil {
		return Installation{}, fmt.Errorf("load identity: inbox id: %w", err)
	}
	in := Installation{InboxID: string(inbox), InstallationKey: ed25519.NewKeyFromSeed(seed)}
	rseed, err := b.Get(ctx, BlobNamespace, blobRecovery)
	switch {
	case err == nil && len(rseed) == ed25519.SeedSize:
		in.RecoveryKey = ed25519.NewKeyFromSeed(rseed)
	case err == nil:
		return Installation{}, fmt.Errorf("load identity: stored recovery key is %d bytes, want %d", len(rseed), ed25519.SeedSize)
	case !errors.Is(err, ports.ErrNotFound):
		return Installation{}, fmt.Errorf("load identity: %w", err)
	}
	return in, nil
}

// CreateInbox creates a new inbox with this installation as its first
// installation: it generates the recovery and installation keys, stores
// them with the signed add update in one transaction, and publishes the
// update to the inbox's topic. When the publish fails the identity is kept
// and the update stays pending; [PublishPending] sends it later. A store
// that already holds an identity fails with an error wrapping
// [ports.ErrAlreadyExists].
func CreateInbox(ctx context.Context, opts Options) (Installation, error) {
	in, err := StoreNewInbox(ctx, opts.Store, opts.Clock)
	if err != nil {
		return Installation{}, err
	}
	return publishNew(ctx, opts, in)
}

// StoreNewInbox is the first half of [CreateInbox]: it generates the
// recovery and installation keys and stores them with the signed add
// update, without publishing. A caller that needs the installation key
// before it can reach the delivery service (a transport authenticated as
// this installation) stores first, then calls [PublishPending].
func StoreNewInbox(ctx context.Context, store ports.Store, clock ports.Clock) (Installation, error) {
	_, recovery, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Installation{}, err
	}
	return StoreInstallation(ctx, store, clock, recovery)
}

// AddInstallation creates this installation in the inbox of recovery: it
// generates an installation key, stores it, the recovery key and the add
// update signed by both keys in one transaction, then publishes the update
// as [CreateInbox] does.
func AddInstallation(ctx context.Context, opts Options, recovery ed25519.PrivateKey) (Installation, error) {
	if err := opts.check(); err != nil {
		return Installation{}, err
	}
	in, err := StoreInstallation(ctx, opts.Store, opts.Clock, recovery)
	if err != nil {
		return Installation{}, err
	}
	return publishNew(ctx, opts, in)
}

func publishNew(ctx context.Context, opts Options, in Installation) (Installation, error) {
	if _, err := PublishPending(ctx, opts); err != nil {
		return in, fmt.Errorf("add installation: identity stored, update not yet published: %w", err)
	}
	return in, nil
}

// StoreInstallation is the first half of [AddInstallation]: it generates
// an installation key for the inbox of recovery and stores it, the
// recovery key and the add update signed by both, in one transaction,
// without publishing. [PublishPending] publishes the update.
func StoreInstallation(ctx context.Context, store ports.Store, clock ports.Clock, recovery ed25519.PrivateKey) (Installation, error) {
	if store == nil || clock == nil {
		return Installation{}, errors.New("store installation: store and clock are required")
	}
	if len(recovery) != ed25519.PrivateKeySize {
		return Installation{}, fmt.Errorf("add installation: recovery key is %d bytes, want %d", len(recovery), ed25519.PrivateKeySize)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Installation{}, err
	}
	u, err := NewAdd(recovery, key, clock.Now().UnixNano())
	if err != nil {
		return Installation{}, err
	}
	in := Installation{InboxID: u.GetInboxId(), InstallationKey: key, RecoveryKey: recovery}
	err = store.Tx(ctx, func(tx ports.Tx) error {
		if _, err := load(ctx, tx); err == nil {
			return fmt.Errorf("add installation: %w: the store already holds an identity", ports.ErrAlreadyExists)
		} else if !errors.Is(err, ports.ErrNotFound) {
			return err
		}
		b := tx.Blobs()
		for k, v := range map[string][]byte{
			blobInbox: []byte(in.InboxID), blobInstallation: key.Seed(), blobRecovery: recovery.Seed(),
		} {
			if err := b.Put(ctx, BlobNamespace, k, v); err != nil {
				return err
			}
		}
		return putPending(ctx, tx, u)
	})
	if err != nil {
		return Installation{}, err
	}
	return in, nil
}

// Revoke removes installationKey from this installation's inbox with an
// update signed by the recovery key, and returns the sequence id the
// delivery service assigned it. It fails with [ErrNoRecoveryKey] on an
// installation that does not hold the recovery key. When the publish fails
// the update stays pending for [PublishPending].
func Revoke(ctx context.Context, opts Options, installationKey []byte) (uint64, error) {
	if err := opts.check(); err != nil {
		return 0, err
	}
	var key string
	err := opts.Store.Tx(ctx, func(tx ports.Tx) error {
		in, err := load(ctx, tx)
		if err != nil {
			return err
		}
		if in.RecoveryKey == nil {
			return ErrNoRecoveryKey
		}
		u, err := NewRevoke(in.RecoveryKey, installationKey, opts.Clock.Now().UnixNano())
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

func putPending(ctx context.Context, tx ports.Tx, u *identitypb.IdentityUpdate) error {
	var k string
	return putPendingAs(ctx, tx, u, &k)
}

// putPendingAs stores u under the next pending key, in creation order.
func putPendingAs(ctx context.Context, tx ports.Tx, u *identitypb.IdentityUpdate, key *string) error {
	keys, err := tx.Blobs().Keys(ctx, BlobNamespace, blobPending)
	if err != nil {
		return err
	}
	n := len(keys)
	if n > 0 {
		fmt.Sscanf(keys[n-1][len(blobPending):], "%d", &n)
		n++
	}
	b, err := proto.Marshal(u)
	if err != nil {
		return err
	}
	*key = fmt.Sprintf("%s%020d", blobPending, n)
	return tx.Blobs().Put(ctx, BlobNamespace, *key, b)
}

// PublishPending publishes every identity update this installation has
// stored and not yet seen published, oldest first, and returns the
// sequence id each got, keyed by its pending key. An update the delivery
// service refuses with INVALID_ARGUMENT is dropped and the refusal is
// returned; any other failure leaves the rest pending.
func PublishPending(ctx context.Context, opts Options) (map[string]uint64, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	var keys []string
	updates := map[string][]byte{}
	err := opts.Store.Tx(ctx, func(tx ports.Tx) error {
		var err error
		if keys, err = tx.Blobs().Keys(ctx, BlobNamespace, blobPending); err != nil {
			return err
		}
		for _, k := range keys {
			if updates[k], err = tx.Blobs().Get(ctx, BlobNamespace, k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	seqs := map[string]uint64{}
	for _, k := range keys {
		var u identitypb.IdentityUpdate
		if err := proto.Unmarshal(updates[k], &u); err != nil {
			return seqs, fmt.Errorf("pending identity update %s: %w", k, err)
		}
		topic, err := Topic(u.GetInboxId())
		if err != nil {
			return seqs, err
		}
		ids, perr := opts.Transport.Publish(ctx, []*backendpb.ClientEnvelope{{
			TargetTopic: topic, Payload: &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: &u},
		}})
		if perr != nil && !errors.Is(perr, ports.ErrInvalidArgument) {
			return seqs, fmt.Errorf("publish identity update: %w", perr)
		}
		if err := opts.Store.Tx(ctx, func(tx ports.Tx) error { return tx.Blobs().Delete(ctx, BlobNamespace, k) }); err != nil {
			return seqs, err
		}
		if perr != nil {
			return seqs, fmt.Errorf("publish identity update: %w", perr)
		}
		if len(ids) == 1 {
			seqs[k] = ids[0]
		}
	}
	return seqs, nil
}
