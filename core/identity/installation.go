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

// Blob namespace and keys of this installation's identity (COMP-122,
// COMP-261).
const (
	// BlobNamespace is the [ports.Blobs] namespace the identity lives in.
	BlobNamespace = "regroup/identity"

	blobInbox          = "inbox-id"
	blobInstallation   = "installation-key"
	blobRecovery       = "recovery-key"
	blobRecoveryPublic = "recovery-public-key"
	blobFormat         = "format"
	blobRequest        = "add-request"
	blobPending        = "pending/"

	// formatCustody is the stored format written since recovery-key custody
	// (COMP-261); a store without the format blob holds format 1, in which
	// every installation stored the recovery key.
	formatCustody = "2"
)

// ErrNoIdentity reports a store that holds no installation identity. It
// wraps [ports.ErrNotFound].
var ErrNoIdentity = fmt.Errorf("no installation identity in the store: %w", ports.ErrNotFound)

// ErrNoRecoveryKey reports an operation that needs the inbox's recovery
// key when none was given or, for [ExportRecoveryKey], when the store
// does not hold it.
var ErrNoRecoveryKey = errors.New("no recovery key: the inbox's recovery key is kept apart from its installations")

// ErrWrongRecoveryKey reports a recovery key that is not the key of this
// installation's inbox.
var ErrWrongRecoveryKey = errors.New("the recovery key given is not this inbox's")

// Installation is this installation's identity: its inbox and its private
// keys.
type Installation struct {
	InboxID string
	// InstallationKey is the installation's Ed25519 key; its public half
	// is the installation key other parties see, and its seed is the MLS
	// engine's signature key.
	InstallationKey ed25519.PrivateKey
	// RecoveryPublicKey is the inbox's recovery public key (its SHA-256 is
	// InboxID).
	RecoveryPublicKey ed25519.PublicKey
	// RecoveryKey is the inbox's recovery Ed25519 key when this value holds
	// it: the result of [CreateInbox] or [StoreNewInbox] (the one time the
	// key is handed out: export it), or an installation that stores it
	// (RecoveryKeyStored). Nil otherwise.
	RecoveryKey ed25519.PrivateKey
	// RecoveryKeyStored reports that the store holds the recovery key:
	// because it was asked to (Options.KeepRecoveryKey), or because the
	// identity was stored in format 1 (LegacyRecoveryKey).
	RecoveryKeyStored bool
	// LegacyRecoveryKey reports an identity stored in format 1, which kept
	// the recovery key on every installation without being asked to; see
	// [ExportRecoveryKey] (COMP-262).
	LegacyRecoveryKey bool
}

// PublicKey returns the 32-byte installation key.
func (i Installation) PublicKey() ed25519.PublicKey {
	return i.InstallationKey.Public().(ed25519.PublicKey)
}

// Options are what identity operations need: the store that keeps this
// installation's identity, the transport to its delivery service and the
// clock that stamps updates. All three are required except where a
// function says otherwise.
type Options struct {
	Store     ports.Store
	Transport ports.Transport
	Clock     ports.Clock
	// KeepRecoveryKey stores the inbox's recovery key in Store when an
	// identity is created or added with it. Off by default: the recovery
	// key is kept apart from every installation, so that an installation
	// the user revokes cannot revoke, add or re-add (COMP-261).
	KeepRecoveryKey bool
}

func (o Options) check() error {
	if o.Store == nil || o.Transport == nil || o.Clock == nil {
		return errors.New("identity: options need a store, a transport and a clock")
	}
	return nil
}

// Load returns the identity kept in store, or an error wrapping
// [ErrNoIdentity] when it holds none. It reads both stored formats: format
// 1, in which every installation stored the recovery key, loads with
// LegacyRecoveryKey set (COMP-262).
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
	format, err := optional(ctx, b, blobFormat)
	if err != nil {
		return Installation{}, err
	}
	rseed, err := optional(ctx, b, blobRecovery)
	if err != nil {
		return Installation{}, err
	}
	if rseed != nil {
		if len(rseed) != ed25519.SeedSize {
			return Installation{}, fmt.Errorf("load identity: stored recovery key is %d bytes, want %d", len(rseed), ed25519.SeedSize)
		}
		in.RecoveryKey, in.RecoveryKeyStored = ed25519.NewKeyFromSeed(rseed), true
		in.RecoveryPublicKey = in.RecoveryKey.Public().(ed25519.PublicKey)
	}
	switch string(format) {
	case "": // format 1: the recovery key is on every installation
		if rseed == nil {
			return Installation{}, fmt.Errorf("load identity: a format-1 identity without its recovery key")
		}
		in.LegacyRecoveryKey = true
	case formatCustody:
		rpub, err := b.Get(ctx, BlobNamespace, blobRecoveryPublic)
		if err != nil {
			return Installation{}, fmt.Errorf("load identity: recovery public key: %w", err)
		}
		if len(rpub) != ed25519.PublicKeySize {
			return Installation{}, fmt.Errorf("load identity: stored recovery public key is %d bytes, want %d", len(rpub), ed25519.PublicKeySize)
		}
		in.RecoveryPublicKey = ed25519.PublicKey(rpub)
	default:
		return Installation{}, fmt.Errorf("load identity: unknown stored format %q", format)
	}
	if InboxID(in.RecoveryPublicKey) != in.InboxID {
		return Installation{}, fmt.Errorf("load identity: stored inbox id is not the SHA-256 of the stored recovery key")
	}
	return in, nil
}

// optional returns the blob under key, or nil when there is none.
func optional(ctx context.Context, b ports.Blobs, key string) ([]byte, error) {
	v, err := b.Get(ctx, BlobNamespace, key)
	if errors.Is(err, ports.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load identity: %s: %w", key, err)
	}
	return v, nil
}

// storeIdentity stores in (format 2) and, when pending is not nil, the
// update that associates it, in tx; it fails when tx already holds an
// identity. The recovery key is stored only when keep is set.
func storeIdentity(ctx context.Context, tx ports.Tx, in Installation, keep bool, pending *identitypb.IdentityUpdate) error {
	if _, err := load(ctx, tx); err == nil {
		return fmt.Errorf("add installation: %w: the store already holds an identity", ports.ErrAlreadyExists)
	} else if !errors.Is(err, ports.ErrNotFound) {
		return err
	}
	blobs := map[string][]byte{
		blobInbox: []byte(in.InboxID), blobInstallation: in.InstallationKey.Seed(),
		blobRecoveryPublic: in.RecoveryPublicKey, blobFormat: []byte(formatCustody),
	}
	if keep {
		blobs[blobRecovery] = in.RecoveryKey.Seed()
	}
	for k, v := range blobs {
		if err := tx.Blobs().Put(ctx, BlobNamespace, k, v); err != nil {
			return err
		}
	}
	if pending == nil {
		return nil
	}
	return putPending(ctx, tx, pending)
}

// CreateInbox creates a new inbox with this installation as its first
// installation: it generates the recovery and installation keys, stores
// the installation key (and the recovery key only when
// opts.KeepRecoveryKey) with the signed add update in one transaction,
// and publishes the update to the inbox's topic. The result's RecoveryKey
// is the one place the recovery key is handed out: the caller gives it to
// the user to keep apart (COMP-261). When the publish fails the identity
// is kept and the update stays pending; [PublishPending] sends it later.
// A store that already holds an identity fails with an error wrapping
// [ports.ErrAlreadyExists].
func CreateInbox(ctx context.Context, opts Options) (Installation, error) {
	in, err := StoreNewInbox(ctx, opts)
	if err != nil {
		return Installation{}, err
	}
	return publishNew(ctx, opts, in)
}

// StoreNewInbox is the first half of [CreateInbox]: it generates the
// recovery and installation keys and stores the identity with the signed
// add update, without publishing; only opts.Store and opts.Clock are
// needed. A caller that needs the installation key before it can reach
// the delivery service (a transport authenticated as this installation)
// stores first, then calls [PublishPending]. The result carries the
// recovery key, as [CreateInbox]'s does.
func StoreNewInbox(ctx context.Context, opts Options) (Installation, error) {
	_, recovery, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Installation{}, err
	}
	in, err := StoreInstallation(ctx, opts, recovery)
	if err != nil {
		return Installation{}, err
	}
	in.RecoveryKey = recovery
	return in, nil
}

// AddInstallation creates this installation in the inbox of recovery,
// authorised by the recovery key: it generates an installation key,
// stores it (and recovery only when opts.KeepRecoveryKey) with the add
// update signed by both keys in one transaction, then publishes the update
// as [CreateInbox] does. [RequestInstallation] adds an installation
// without the recovery key.
func AddInstallation(ctx context.Context, opts Options, recovery ed25519.PrivateKey) (Installation, error) {
	if err := opts.check(); err != nil {
		return Installation{}, err
	}
	in, err := StoreInstallation(ctx, opts, recovery)
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
// an installation key for the inbox of recovery and stores it with the
// add update signed by both, in one transaction, without publishing; only
// opts.Store and opts.Clock are needed. [PublishPending] publishes the
// update. The recovery key is stored, and in the result, only when
// opts.KeepRecoveryKey.
func StoreInstallation(ctx context.Context, opts Options, recovery ed25519.PrivateKey) (Installation, error) {
	if opts.Store == nil || opts.Clock == nil {
		return Installation{}, errors.New("store installation: store and clock are required")
	}
	if len(recovery) != ed25519.PrivateKeySize {
		return Installation{}, fmt.Errorf("add installation: recovery key is %d bytes, want %d", len(recovery), ed25519.PrivateKeySize)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Installation{}, err
	}
	u, err := NewAdd(recovery, key, opts.Clock.Now().UnixNano())
	if err != nil {
		return Installation{}, err
	}
	in := Installation{InboxID: u.GetInboxId(), InstallationKey: key, RecoveryPublicKey: u.GetRecoveryPublicKey(), RecoveryKey: recovery}
	err = opts.Store.Tx(ctx, func(tx ports.Tx) error { return storeIdentity(ctx, tx, in, opts.KeepRecoveryKey, u) })
	if err != nil {
		return Installation{}, err
	}
	if !opts.KeepRecoveryKey {
		in.RecoveryKey = nil
	}
	in.RecoveryKeyStored = opts.KeepRecoveryKey
	return in, nil
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
