package identity_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/keypackage"
	rworld "github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// requested returns a world member identity: an installation requested
// for inbox (read through reader), approved by approver.
func requested(t *testing.T, inbox string, reader ports.Transport, approver *rworld.Member) func(context.Context, ports.Store, ports.Clock) (identity.Installation, error) {
	return func(ctx context.Context, store ports.Store, clk ports.Clock) (identity.Installation, error) {
		in, req, err := identity.RequestInstallation(ctx, identity.Options{Store: store, Transport: reader, Clock: clk}, inbox)
		if err != nil {
			return in, err
		}
		_, err = identity.Authorize(ctx, identity.Options{Store: approver.Store, Transport: approver.Transport, Clock: clk}, req)
		return in, err
	}
}

// groupInstallations returns the installations of inbox in a group bob
// creates with it now.
func groupInstallations(t *testing.T, w *rworld.World, bob *rworld.Member, inbox string) [][]byte {
	t.Helper()
	cv, err := bob.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g", Members: []string{inbox}})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := cv.Members(w.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, m := range ms {
		if m.InboxID == inbox {
			out = append(out, m.InstallationKey)
		}
	}
	return out
}

func sameSet(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if indexOf(b, x) < 0 {
			return false
		}
	}
	return true
}

// COMP-261, COMP-260, COMP-263 with real clients on a regroupd process:
// alice's phone (a client added with the recovery key the user typed in)
// approves a tablet, then the user revokes the phone. The revoked phone's
// store holds no recovery key; an installation it approves afterwards is
// a real client that cannot even publish a key package (its inbox does
// not associate it, JOIN-001), and bob's client, adding alice's inbox to a
// group, adds alice and the tablet only. Once the user also revokes the
// tablet (the installation the phone approved before its revocation),
// bob's next group has alice alone.
func TestCOMP261_RevokedClientCannotBringInstallations(t *testing.T) {
	rworld.Each(t, []string{"sqlite"}, func(t *testing.T, w *rworld.World) {
		alice := w.Member("alice", rworld.Config{})
		recovery := alice.C.Identity().RecoveryKey
		if recovery == nil {
			t.Fatal("COMP-261: a new inbox's client does not hand its recovery key out")
		}
		phone := w.Member("phone", rworld.Config{RecoveryKey: recovery})
		tablet := w.Member("tablet", rworld.Config{Installation: requested(t, alice.C.InboxID(), phone.Transport, phone)})
		bob := w.Member("bob", rworld.Config{})
		for _, m := range []*rworld.Member{alice, phone, tablet} {
			if in, err := identity.Load(w.Ctx, m.Store); err != nil || in.RecoveryKeyStored || storeHolds(t, m.Store, recovery.Seed()) {
				t.Fatalf("COMP-261: %s's store holds the recovery key (%v)", m.Name, err)
			}
		}
		aliceOpts := identity.Options{Store: alice.Store, Transport: alice.Transport, Clock: alice.Clock}
		if _, err := identity.Revoke(w.Ctx, aliceOpts, recovery, phone.C.InstallationKey()); err != nil {
			t.Fatal(err)
		}

		// The revoked phone approves a rogue installation: a real client.
		rogueStore, closeStore, err := regroup.OpenSQLiteStore(w.Ctx, filepath.Join(t.TempDir(), "rogue.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer closeStore()
		rogueID, err := requested(t, alice.C.InboxID(), phone.Transport, phone)(w.Ctx, rogueStore, alice.Clock)
		if err != nil {
			t.Fatalf("regroupd refused the revoked phone's approval (%v): the fold must be what refuses it", err)
		}
		if _, err := identity.ExportRecoveryKey(w.Ctx, phone.Store, false); !errors.Is(err, identity.ErrNoRecoveryKey) {
			t.Fatalf("the revoked phone exports a recovery key: %v", err)
		}
		if _, err := identity.Revoke(w.Ctx, identity.Options{Store: phone.Store, Transport: phone.Transport, Clock: phone.Clock},
			phone.C.Identity().InstallationKey, alice.C.InstallationKey()); !errors.Is(err, identity.ErrWrongRecoveryKey) {
			t.Fatalf("the revoked phone revoking alice: %v", err)
		}
		if err := startClient(w, rogueStore, rogueID); !errors.Is(err, keypackage.ErrNotAssociated) {
			t.Fatalf("COMP-260: the rogue's client started with %v, want ErrNotAssociated (JOIN-001)", err)
		}

		want := [][]byte{alice.C.InstallationKey(), tablet.C.InstallationKey()}
		if got := groupInstallations(t, w, bob, alice.C.InboxID()); !sameSet(got, want) {
			t.Fatalf("COMP-260: bob's group has alice's installations %x, want alice and the tablet", got)
		}
		r, err := identity.NewResolver(identity.ResolverOptions{Store: alice.Store, Transport: alice.Transport, Clock: alice.Clock})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Sync(w.Ctx, alice.C.InboxID()); err != nil {
			t.Fatal(err)
		}
		added, err := r.AddedBy(w.Ctx, alice.C.InboxID(), phone.C.InstallationKey())
		if err != nil || len(added) != 1 || !bytes.Equal(added[0], tablet.C.InstallationKey()) {
			t.Fatalf("COMP-263: AddedBy(phone) = %x, %v", added, err)
		}
		if _, err := identity.Revoke(w.Ctx, aliceOpts, recovery, added[0]); err != nil {
			t.Fatal(err)
		}
		if got := groupInstallations(t, w, bob, alice.C.InboxID()); !sameSet(got, [][]byte{alice.C.InstallationKey()}) {
			t.Fatalf("bob's group after the tablet's revocation has %x, want alice alone", got)
		}
	})
}

// startClient builds a client for id on store, on the world's regroupd,
// as an app does, and closes it.
func startClient(w *rworld.World, store ports.Store, id identity.Installation) error {
	eng, err := regroup.ProvideEngine(id)
	if err != nil {
		return err
	}
	tr, closeTr, err := regroup.DialTransport(w.Regroupd.Addr, nil, id)
	if err != nil {
		return err
	}
	defer closeTr()
	clk := regroup.ProvideClock(nil)
	res, err := regroup.ProvideResolver(store, tr, clk)
	if err != nil {
		return err
	}
	reg, err := regroup.ProvideAlgorithms()
	if err != nil {
		return err
	}
	c, closeClient, err := regroup.ProvideClient(w.Ctx, client.Deps{Store: store, MLS: eng, Transport: tr, Identity: res,
		Clock: clk, Algorithms: reg, Installation: id}, nil)
	if err == nil {
		closeClient()
		_ = c
	}
	return err
}
