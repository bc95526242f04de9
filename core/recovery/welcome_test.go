package recovery_test

import (
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// heldWelcomeKeys returns the keys of m's Welcome outbox (COMP-243).
func heldWelcomeKeys(t *testing.T, m *world.Member) []string {
	t.Helper()
	var keys []string
	m.Tx(func(tx ports.Tx) error {
		var err error
		keys, err = tx.Blobs().Keys(m.W.Ctx, "client.welcome-outbox", "")
		return err
	})
	return keys
}

// FORK-062: the readd commit's Welcome must be sent. When the delivery
// service refuses it, the readder keeps it and publishes it again, with a
// growing delay, until it is stored; meanwhile it answers no second readd
// (FORK-064), and the requester rejoins once it is stored.
func TestFORK062_RefusedReaddWelcomeIsKeptUntilStored(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	var ft *faultTransport
	clk := clock.NewFake(time.Now())
	alice := w.Member("alice", world.Config{Clock: clk, Transport: func(tr ports.Transport) ports.Transport { ft = wrapFaults(tr); return ft }})
	bob := w.Member("bob", world.Config{Options: requester})
	all := []*world.Member{alice, bob}
	id := group(t, alice, bob)
	refused := publishFault{err: ports.ErrInvalidArgument}
	ft.failWelcomes(refused, refused)

	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	world.SyncAll(all...)
	if got := readdsOf(t, alice, id, key(bob)); len(got) != 1 {
		t.Fatalf("alice merged readds of bob at %v; want one", got)
	}
	if bob.Info(id).Active {
		t.Fatal("bob is active although the readd Welcome was refused")
	}
	if n := len(heldWelcomeKeys(t, alice)); n != 1 {
		t.Fatalf("alice holds %d refused Welcomes; want the readd's", n)
	}
	// The second publish, one second later, is refused too; the third,
	// after the doubled delay, is stored.
	clk.Advance(time.Second)
	world.SyncAll(all...)
	if bob.Info(id).Active || len(heldWelcomeKeys(t, alice)) != 1 {
		t.Fatal("the Welcome was given up, or stored, after its second refusal")
	}
	clk.Advance(2 * time.Second)
	world.SyncAll(all...)
	if n := len(heldWelcomeKeys(t, alice)); n != 0 {
		t.Fatalf("alice still holds %d Welcomes after the delivery service took them", n)
	}
	if got := readdsOf(t, alice, id, key(bob)); len(got) != 1 {
		t.Fatalf("alice merged readds of bob at %v; want still one (FORK-064)", got)
	}
	if !bob.Info(id).Active {
		t.Fatal("bob did not rejoin from the Welcome stored at last")
	}
	healthy(t, id, alice, all...)
}

// FORK-089: a readd commit that removes and adds a publisher installation
// in the same commit gives it a publisher boundary at that commit, at
// every member, whoever published the readd.
func TestFORK089_ReaddedPublisherGetsABoundary(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{})
	carol := w.Member("carol", world.Config{Options: requester})
	all := []*world.Member{alice, bob, carol}
	id := group(t, alice, bob, carol)
	if err := alice.Conv(id).SetSuperAdmins(w.Ctx, alice.C.InboxID(), carol.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(all...)
	fork(t, id, carol, mlsfault.MisrecordAuthenticator, alice)
	world.SyncAll(all...)
	readds := readdsOf(t, bob, id, key(carol))
	if len(readds) != 1 {
		t.Fatalf("bob merged readds of carol at %v; want one", readds)
	}
	var bounds map[string]uint64
	bob.Tx(func(tx ports.Tx) error {
		var err error
		bounds, err = tx.ReaderAdmission().Boundaries(w.Ctx, id)
		return err
	})
	if got := bounds[string(key(carol))]; got != readds[0] {
		t.Fatalf("bob's boundary for carol is %d; want the readd commit %d", got, readds[0])
	}
}
