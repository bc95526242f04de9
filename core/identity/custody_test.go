package identity_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

// storeHolds reports whether any blob of the identity namespace of store
// contains secret: what a device taken by an attacker still holds.
func storeHolds(t *testing.T, store ports.Store, secret []byte) bool {
	t.Helper()
	found := false
	err := store.Tx(testCtx(t), func(tx ports.Tx) error {
		keys, err := tx.Blobs().Keys(testCtx(t), identity.BlobNamespace, "")
		if err != nil {
			return err
		}
		for _, k := range keys {
			v, err := tx.Blobs().Get(testCtx(t), identity.BlobNamespace, k)
			if err != nil {
				return err
			}
			found = found || bytes.Contains(v, secret)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// device is one installation of the attack test: its own store, and a
// transport to regroupd authenticated as it.
type device struct {
	store ports.Store
	opts  identity.Options
	id    identity.Installation
}

func (w *world) device(t *testing.T, db string) *device {
	d := &device{store: w.newStore(t, db)}
	d.opts = identity.Options{Store: d.store, Transport: w.dialAnyKey(t), Clock: w.clock}
	return d
}

// COMP-261, COMP-260, JOIN-095: against regroupd over gRPC, on SQLite and
// PostgreSQL. A new inbox hands its recovery key out and stores it on no
// installation; a second installation joins by a request another one
// authorises, and authorises a third before the user revokes it with the
// recovery key, which the caller supplies. The revoked installation, with
// everything its store holds, then cannot read the recovery key, cannot
// add a new installation or re-add itself (its adds are published but
// every reader's fold refuses them, or regroupd refuses them), and cannot
// revoke the user's good installations; the third installation stays
// associated and AddedBy names it (COMP-263).
func TestCOMP261_RevokedInstallationCanNeitherAddNorRevoke(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			w := newWorld(t, db)
			ctx := testCtx(t)
			good, evil, third := w.device(t, db), w.device(t, db), w.device(t, db)
			var err error
			if good.id, err = identity.CreateInbox(ctx, good.opts); err != nil {
				t.Fatal(err)
			}
			recovery := good.id.RecoveryKey
			inbox := good.id.InboxID
			if recovery == nil || storeHolds(t, good.store, recovery.Seed()) {
				t.Fatalf("COMP-261: CreateInbox handed out %v bytes and its store holds the recovery key: %v",
					len(recovery), storeHolds(t, good.store, recovery.Seed()))
			}
			// evil joins by request, authorised by good.
			var req []byte
			if evil.id, req, err = identity.RequestInstallation(ctx, evil.opts, inbox); err != nil {
				t.Fatal(err)
			}
			if _, err := identity.Authorize(ctx, good.opts, req); err != nil {
				t.Fatal(err)
			}
			// third joins by request, authorised by evil while associated.
			if third.id, req, err = identity.RequestInstallation(ctx, third.opts, inbox); err != nil {
				t.Fatal(err)
			}
			if _, err := identity.Authorize(ctx, evil.opts, req); err != nil {
				t.Fatal(err)
			}
			// The user revokes evil; an installation's own store cannot.
			if _, err := identity.Revoke(ctx, good.opts, nil, evil.id.PublicKey()); !errors.Is(err, identity.ErrNoRecoveryKey) {
				t.Fatalf("Revoke without the recovery key = %v, want ErrNoRecoveryKey", err)
			}
			revokeSeq, err := identity.Revoke(ctx, good.opts, recovery, evil.id.PublicKey())
			if err != nil {
				t.Fatal(err)
			}

			// The attack: evil holds everything it ever stored.
			if storeHolds(t, evil.store, recovery.Seed()) {
				t.Fatal("COMP-261: the revoked installation's store holds the recovery key")
			}
			if _, err := identity.ExportRecoveryKey(ctx, evil.store, true); !errors.Is(err, identity.ErrNoRecoveryKey) {
				t.Fatalf("ExportRecoveryKey on the revoked installation = %v, want ErrNoRecoveryKey", err)
			}
			// It adds a new installation of its own making.
			rogue := w.device(t, db)
			if _, req, err = identity.RequestInstallation(ctx, rogue.opts, inbox); err != nil {
				t.Fatal(err)
			}
			rogueSeq, err := identity.Authorize(ctx, evil.opts, req)
			if err != nil {
				t.Fatalf("regroupd refused the revoked installation's add (%v): the fold must be what refuses it", err)
			}
			// It re-adds itself: replaying its original add, and with a new
			// add authorised by the rogue.
			topic, _ := identity.Topic(inbox)
			envs, err := w.dial(t, nil).Query(ctx, topic, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var replay *identitypb.IdentityUpdate
			for _, e := range envs {
				if bytes.Equal(e.GetEnvelope().GetIdentityUpdate().GetAddInstallation().GetInstallationKey(), evil.id.PublicKey()) {
					replay = e.GetEnvelope().GetIdentityUpdate()
				}
			}
			replaySeq := publish(t, w.dialAnyKey(t), replay)
			selfReq, _ := identity.NewAddRequest(evil.id.InstallationKey, evil.id.RecoveryPublicKey, w.clock.Now().UnixNano())
			byRogue, _ := identity.AuthorizeAdd(rogue.mustLoad(t).InstallationKey, inbox, selfReq)
			byRogueSeq := publish(t, w.dialAnyKey(t), byRogue)
			if _, err := identity.AuthorizeAdd(evil.id.InstallationKey, inbox, selfReq); !errors.Is(err, identity.ErrInvalidUpdate) {
				t.Fatalf("a self-authorised add = %v, want ErrInvalidUpdate", err)
			}
			// It revokes the good installation: with its own key in place of
			// the recovery key, locally and straight to regroupd.
			if _, err := identity.Revoke(ctx, evil.opts, evil.id.InstallationKey, good.id.PublicKey()); !errors.Is(err, identity.ErrWrongRecoveryKey) {
				t.Fatalf("Revoke with the installation key = %v, want ErrWrongRecoveryKey", err)
			}
			forged, _ := identity.NewRevoke(evil.id.InstallationKey, good.id.PublicKey(), 1)
			forged.InboxId, forged.RecoveryPublicKey = inbox, evil.id.RecoveryPublicKey
			if _, err := w.dialAnyKey(t).Publish(ctx, []*backendpb.ClientEnvelope{{TargetTopic: topic,
				Payload: &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: forged}}}); !errors.Is(err, ports.ErrInvalidArgument) {
				t.Fatalf("regroupd took a revoke not signed by the recovery key: %v", err)
			}

			// Every reader, each with its own cache, folds the same state.
			// The replay is stored once (COMP-324): regroupd answers with
			// the original add's id, before the revocation, and stores
			// nothing new; a service that stored it again is read at its
			// new id like the other two.
			seqs := []uint64{rogueSeq, byRogueSeq}
			if replaySeq > revokeSeq {
				seqs = append(seqs, replaySeq)
			}
			want := [][]byte{good.id.PublicKey(), third.id.PublicKey()}
			for _, reader := range []string{"good", "third", "stranger"} {
				r := w.resolverOn(t, w.newStore(t, db))
				for _, seq := range seqs {
					st, err := r.AssociationState(ctx, inbox, seq)
					if err != nil || !same(st.InstallationKeys, want) {
						t.Fatalf("COMP-260: reader %s, state at %d (revoked at %d) = %x, %v; want good and third only",
							reader, seq, revokeSeq, st.InstallationKeys, err)
					}
				}
				added, err := r.AddedBy(ctx, inbox, evil.id.PublicKey())
				if err != nil || !same(added, [][]byte{third.id.PublicKey()}) {
					t.Fatalf("COMP-263: AddedBy(revoked) = %x, %v; want the third installation", added, err)
				}
			}
		})
	}
}

func (d *device) mustLoad(t *testing.T) identity.Installation {
	in, err := identity.Load(testCtx(t), d.store)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// v1 is testdata/identity-v1.json: an identity stored by format 1 and its
// inbox's topic.
type v1 struct {
	InboxID         string
	InstallationKey []byte
	Blobs           []struct {
		Key   string
		Value []byte
	}
	Updates []struct {
		SequenceID uint64
		Update     []byte
	}
}

func loadV1(t *testing.T) v1 {
	b, err := os.ReadFile("testdata/identity-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var r v1
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// COMP-262: a format-1 identity (recorded from regroup before recovery-key
// custody) loads with its recovery key marked legacy; its recorded updates
// verify and fold as before; ExportRecoveryKey hands the key out once and
// deletes it, after which the identity loads as format 2 without it and a
// revocation with the exported key works.
func TestCOMP262_FormatOneIdentityLoadsAndMigrates(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			ctx := testCtx(t)
			old := loadV1(t)
			w := newWorld(t, db)
			err := w.store.Tx(ctx, func(tx ports.Tx) error {
				for _, b := range old.Blobs {
					if err := tx.Blobs().Put(ctx, identity.BlobNamespace, b.Key, b.Value); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			in, err := identity.Load(ctx, w.store)
			if err != nil {
				t.Fatalf("COMP-262: a format-1 identity does not load: %v", err)
			}
			if in.InboxID != old.InboxID || !bytes.Equal(in.PublicKey(), old.InstallationKey) || !in.LegacyRecoveryKey ||
				!in.RecoveryKeyStored || identity.InboxID(in.RecoveryPublicKey) != old.InboxID {
				t.Fatalf("COMP-262: format-1 identity loads as %+v", in)
			}
			var recs []ports.IdentityUpdateRecord
			for _, u := range old.Updates {
				recs = append(recs, ports.IdentityUpdateRecord{InboxID: old.InboxID, SequenceID: u.SequenceID, Update: u.Update})
				if _, err := identity.DecodeUpdate(u.Update); err != nil {
					t.Fatalf("a format-1 update no longer verifies: %v", err)
				}
			}
			if st := identity.Fold(old.InboxID, recs, recs[len(recs)-1].SequenceID); !same(st.InstallationKeys, [][]byte{old.InstallationKey}) {
				t.Fatalf("format-1 topic folds to %x", st.InstallationKeys)
			}
			key, err := identity.ExportRecoveryKey(ctx, w.store, false)
			if err != nil || identity.InboxID(key.Public().(ed25519.PublicKey)) != old.InboxID {
				t.Fatalf("ExportRecoveryKey = %v", err)
			}
			if storeHolds(t, w.store, key.Seed()) {
				t.Fatal("COMP-262: the exported recovery key is still stored")
			}
			in, err = identity.Load(ctx, w.store)
			if err != nil || in.RecoveryKey != nil || in.RecoveryKeyStored || in.LegacyRecoveryKey || in.InboxID != old.InboxID {
				t.Fatalf("after export: %+v, %v", in, err)
			}
			if _, err := identity.ExportRecoveryKey(ctx, w.store, false); !errors.Is(err, identity.ErrNoRecoveryKey) {
				t.Fatalf("a second export = %v, want ErrNoRecoveryKey", err)
			}
			// The inbox's topic on this regroupd starts with the recorded add.
			u, err := identity.DecodeUpdate(old.Updates[0].Update)
			if err != nil {
				t.Fatal(err)
			}
			publish(t, w.dialAnyKey(t), u)
			opts := identity.Options{Store: w.store, Transport: w.dialAnyKey(t), Clock: w.clock}
			if _, err := identity.Revoke(ctx, opts, key, in.PublicKey()); err != nil {
				t.Fatalf("revoking with the exported key: %v", err)
			}
		})
	}
}

// ExportRecoveryKey with keep leaves the key stored, now on purpose: the
// identity is no longer legacy.
func TestCOMP262_ExportKeepingTheKey(t *testing.T) {
	ctx := testCtx(t)
	w := newWorld(t, "sqlite")
	for _, b := range loadV1(t).Blobs {
		if err := w.store.Tx(ctx, func(tx ports.Tx) error { return tx.Blobs().Put(ctx, identity.BlobNamespace, b.Key, b.Value) }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := identity.ExportRecoveryKey(ctx, w.store, true); err != nil {
		t.Fatal(err)
	}
	in, err := identity.Load(ctx, w.store)
	if err != nil || !in.RecoveryKeyStored || in.LegacyRecoveryKey || in.RecoveryKey == nil {
		t.Fatalf("after a kept export: %+v, %v", in, err)
	}
}
