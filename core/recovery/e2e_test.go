package recovery_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/recovery"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// The whole loop in a group, on the specification's path: bob's log
// diverges at a commit while his MLS state does not (the fork section 7
// repairs); he detects it, sends one request to the super admin, alice,
// who publishes one readd commit; bob processes his removal, accepts the
// Welcome under JOIN-042, keeps his messages (JOIN-044), reads unknown,
// and not forked once a later commit agrees.
func TestRepairGroup(t *testing.T) {
	t.Parallel()
	world.Each(t, world.Networked, testRepairGroup)
}

func testRepairGroup(t *testing.T, w *world.World) {
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{Options: requester})
	carol := w.Member("carol", world.Config{})
	all := []*world.Member{alice, bob, carol}
	id := group(t, alice, bob, carol)
	if _, err := bob.Conv(id).Send(w.Ctx, []byte("before the fork")); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(all...)

	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	world.SyncAll(all...)

	if got := readdsOf(t, carol, id, key(bob)); len(got) != 1 {
		t.Fatalf("carol merged readds of bob at %v; want exactly one", got)
	}
	if info := bob.Info(id); !info.Active {
		t.Fatal("bob is not active after the readd")
	}
	if st := bob.ForkState(id); st != ports.ForkUnknown {
		t.Errorf("bob right after his rejoin: %v, want unknown", st)
	}
	msgs, err := bob.Conv(id).Messages(w.Ctx, 0, 0)
	if err != nil || !slices.ContainsFunc(msgs, func(m ports.Message) bool { return string(m.Content) == "before the fork" }) {
		t.Errorf("bob lost his messages across the rejoin (JOIN-044): %v", err)
	}
	healthy(t, id, alice, all...)
}

// The whole loop in DMs, where both members are publishers and permitted
// readders: bob's log diverges (the specification's path: he processes
// his removal and rejoins under JOIN-042), and carol really diverges (she
// refused the winning commit and merged her own): the readd commit cannot
// reach her state, so she is repaired by the opt-in path, alice's Welcome
// replacing her forked state.
func TestRepairDM(t *testing.T) {
	t.Parallel()
	world.Each(t, world.Networked, testRepairDM)
}

func testRepairDM(t *testing.T, w *world.World) {
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{Options: requester})
	carol := w.Member("carol", world.Config{Options: divergedRequester})
	for _, tc := range []struct {
		m     *world.Member
		fault mlsfault.Fault
	}{{bob, mlsfault.MisrecordAuthenticator}, {carol, mlsfault.RefuseWinner}} {
		id := dm(t, alice, tc.m)
		fork(t, id, tc.m, tc.fault, alice)
		world.SyncAll(alice, tc.m)
		if got := readdsOf(t, alice, id, key(tc.m)); len(got) != 1 {
			t.Fatalf("%v: alice merged readds of %s at %v; want exactly one", tc.fault, tc.m.Name, got)
		}
		healthy(t, id, alice, alice, tc.m)
	}
}

// FORK-080: a readder whose fork state is unknown keeps the request and
// publishes nothing; once its state is known and not forked it answers.
// alice holds bob's request when carol commits; alice's response pass
// processes that commit first, which leaves her state unknown until the
// commit's entry is read, so she waits; her next sync reads it and she
// answers.
func TestFORK080_UnknownReadderWaits(t *testing.T) {
	t.Parallel()
	world.Each(t, world.Networked, testUnknownReadderWaits)
}

func testUnknownReadderWaits(t *testing.T, w *world.World) {
	alice := w.Member("alice", world.Config{Options: &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}}})
	bob := w.Member("bob", world.Config{Options: requester})
	carol := w.Member("carol", world.Config{})
	all := []*world.Member{alice, bob, carol}
	id := group(t, alice, bob, carol)
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	world.SyncAll(all...)
	if st := status(t, alice, id, key(bob)); !st.Requested {
		t.Fatalf("alice does not hold bob's request: %+v", st)
	}
	alice.Restart(nil)
	if err := carol.Conv(id).UpdateKeys(w.Ctx); err != nil {
		t.Fatal(err)
	}
	if err := alice.C.Recovery().Respond(w.Ctx); err != nil {
		t.Fatal(err)
	}
	if st := alice.ForkState(id); st != ports.ForkUnknown {
		t.Fatalf("alice after processing carol's commit: %v, want unknown", st)
	}
	if st := status(t, alice, id, key(bob)); !st.Requested || len(readdsOf(t, alice, id, key(bob))) != 0 {
		t.Fatalf("alice, unknown, did not wait: %+v, readds %v", st, readdsOf(t, alice, id, key(bob)))
	}
	world.SyncAll(all...)
	if got := readdsOf(t, alice, id, key(bob)); len(got) != 1 {
		t.Fatalf("readds of bob at %v; want the one alice publishes once not forked", got)
	}
	healthy(t, id, alice, all...)
}

// FORK-064, COMP-206: two readders hold one request and answer it at the same time;
// one readd commit is published, the other readder's attempt is built
// again on the state that holds it and dropped, and both record it, so a
// replay of the request is answered by neither.
func TestFORK064_TwoReaddersOneReadd(t *testing.T) {
	t.Parallel()
	world.Each(t, world.Networked, testTwoReaddersOneReadd)
}

func testTwoReaddersOneReadd(t *testing.T, w *world.World) {
	off := &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}}
	alice := w.Member("alice", world.Config{Options: off})
	dave := w.Member("dave", world.Config{Options: off})
	bob := w.Member("bob", world.Config{Options: requester})
	all := []*world.Member{alice, dave, bob}
	id := group(t, alice, dave, bob)
	if err := alice.Conv(id).SetSuperAdmins(w.Ctx, alice.C.InboxID(), dave.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(all...)
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	world.SyncAll(all...) // both readders keep the request, responses off
	latest := status(t, bob, id, key(bob)).RequestedAt
	alice.Restart(nil)
	dave.Restart(nil)
	var wg sync.WaitGroup
	for _, m := range []*world.Member{alice, dave} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.C.Recovery().Respond(w.Ctx); err != nil {
				t.Errorf("%s: respond: %v", m.Name, err)
			}
		}()
	}
	wg.Wait()
	world.SyncAll(all...)
	got := readdsOf(t, alice, id, key(bob))
	if len(got) != 1 {
		t.Fatalf("readds of bob at %v; two readders answering one request publish one", got)
	}
	for _, m := range []*world.Member{alice, dave} {
		if st := status(t, m, id, key(bob)); st.Requested || st.RespondedAt != got[0] {
			t.Errorf("%s: status %+v; want the request answered at %d", m.Name, st, got[0])
		}
	}
	// The same request again, as a late copy: both drop it.
	request(t, bob, id, latest, alice, dave)
	world.SyncAll(all...)
	if again := readdsOf(t, alice, id, key(bob)); len(again) != 1 {
		t.Fatalf("a replayed request was answered again: readds at %v", again)
	}
	healthy(t, id, alice, all...)
}

// FORK-080: a readder whose own fork state is forked never acts, even
// when it is the only one answering; it keeps the request. Once the other
// readder answers, both forked members are repaired.
func TestFORK080_ForkedReadderNeverActs(t *testing.T) {
	t.Parallel()
	world.Each(t, world.Networked, testForkedReadder)
}

func testForkedReadder(t *testing.T, w *world.World) {
	alice := w.Member("alice", world.Config{Options: &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}}})
	dave := w.Member("dave", world.Config{Options: requester})
	bob := w.Member("bob", world.Config{Options: requester})
	all := []*world.Member{alice, dave, bob}
	id := group(t, alice, dave, bob)
	if err := alice.Conv(id).SetSuperAdmins(w.Ctx, alice.C.InboxID(), dave.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(all...)
	fork(t, id, dave, mlsfault.MisrecordAuthenticator, alice)
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	world.SyncAll(all...)
	world.SyncAll(all...)
	if st := status(t, dave, id, key(bob)); !st.Requested {
		t.Fatalf("dave, forked, does not keep bob's request: %+v", st)
	}
	if got := readdsOf(t, alice, id, key(bob)); len(got) != 0 {
		t.Fatalf("readds of bob at %v; the only responding readder is forked", got)
	}
	alice.Restart(nil)
	world.SyncAll(all...)
	for _, m := range []*world.Member{dave, bob} {
		if got := readdsOf(t, alice, id, key(m)); len(got) != 1 {
			t.Errorf("readds of %s at %v; want one", m.Name, got)
		}
	}
	healthy(t, id, alice, all...)
}

// FORK-053: a request for a group from an installation that is not a
// member of it — an outsider, or a member removed since — is discarded:
// the Welcome is rejected and no readd follows.
func TestFORK053_RequestFromNonMember(t *testing.T) {
	t.Parallel()
	world.Each(t, world.Networked, testRequestFromNonMember)
}

func testRequestFromNonMember(t *testing.T, w *world.World) {
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{})
	carol := w.Member("carol", world.Config{})
	dave := w.Member("dave", world.Config{})
	id := group(t, alice, bob, carol)
	request(t, dave, id, 1, alice)
	alice.Sync()
	if err := alice.Conv(id).RemoveMembers(w.Ctx, bob.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, bob, carol)
	request(t, bob, id, bob.Info(id).Cursor, alice)
	world.SyncAll(alice, carol)
	if got := rejected(t, alice); len(got) != 2 || got[0] != "FORK-053" || got[1] != "FORK-053" {
		t.Fatalf("alice rejected %v; want both requests under FORK-053", got)
	}
	for _, m := range []*world.Member{dave, bob} {
		if st := status(t, alice, id, key(m)); st.Requested || st.RequestedAt != 0 {
			t.Errorf("alice keeps %s's request: %+v", m.Name, st)
		}
	}
	healthy(t, id, alice, alice, carol)
}

// FORK-062, COMP-204: the requester's newest key package fails validation (expired
// by the readder's clock): the readder does not remove it, and fetches
// its key package again only once the membership refresh interval has
// passed. The requester stays a member, forked; the others are not.
func TestFORK062_InvalidKeyPackage(t *testing.T) {
	t.Parallel()
	world.Each(t, world.Networked, testInvalidKeyPackage)
}

func testInvalidKeyPackage(t *testing.T, w *world.World) {
	clk := clock.NewFake(time.Now())
	var ft *faultTransport
	alice := w.Member("alice", world.Config{Clock: clk, Transport: func(tr ports.Transport) ports.Transport {
		ft = wrapFaults(tr)
		return ft
	}})
	bob := w.Member("bob", world.Config{Options: requester})
	carol := w.Member("carol", world.Config{})
	all := []*world.Member{alice, bob, carol}
	id := group(t, alice, bob, carol)
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	clk.Advance(13 * 7 * 24 * time.Hour) // past bob's key package's not_after
	world.SyncAll(all...)
	fetched := ft.keyPackageQueries(key(bob))
	st := status(t, alice, id, key(bob))
	if fetched == 0 || !st.Requested || !st.NotBefore.Equal(clk.Now().Add(recovery.DefaultRefreshInterval)) {
		t.Fatalf("after %d fetches alice holds %+v; want the request kept until the refresh interval", fetched, st)
	}
	world.SyncAll(all...)
	if n := ft.keyPackageQueries(key(bob)); n != fetched {
		t.Fatalf("alice fetched bob's key package %d times before the refresh interval, want %d", n, fetched)
	}
	clk.Advance(recovery.DefaultRefreshInterval)
	alice.Sync()
	if n := ft.keyPackageQueries(key(bob)); n != fetched+1 {
		t.Fatalf("alice fetched bob's key package %d times after the interval, want %d", n, fetched+1)
	}
	if got := readdsOf(t, carol, id, key(bob)); len(got) != 0 {
		t.Fatalf("bob was readded at %v without a valid key package", got)
	}
	world.SyncAll(all...)
	stillForked(t, id, bob, all...) // bob is still a member, at the group's state: only his log forked
}

// FORK-064, FORK-051: a repaired member that forks again asks again, with
// a latest_commit_sequence_id past the first readd, and is repaired
// again; a late copy of its first request, below that readd, is not
// answered.
func TestFORK064_RepairedAgain(t *testing.T) {
	t.Parallel()
	world.Each(t, world.Networked, testRepairedAgain)
}

func testRepairedAgain(t *testing.T, w *world.World) {
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{Options: requester})
	carol := w.Member("carol", world.Config{})
	all := []*world.Member{alice, bob, carol}
	id := group(t, alice, bob, carol)
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	first := status(t, bob, id, key(bob)).RequestedAt
	world.SyncAll(all...)
	healthy(t, id, alice, all...)
	readd := readdsOf(t, carol, id, key(bob))
	if len(readd) != 1 || first >= readd[0] {
		t.Fatalf("first request at %d, readds at %v", first, readd)
	}
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	second := status(t, bob, id, key(bob)).RequestedAt
	if second <= readd[0] {
		t.Fatalf("the second request names %d, not past the first readd %d", second, readd[0])
	}
	request(t, bob, id, first, alice) // the first request, delivered late
	world.SyncAll(all...)
	healthy(t, id, alice, all...)
	if got := readdsOf(t, carol, id, key(bob)); len(got) != 2 || got[1] <= second {
		t.Fatalf("readds of bob at %v; want the first and one answering the second request", got)
	}
}

// FORK-071: a member that forks at every commit is readded at every
// commit — a readd loop. Restarting the readder with responses disabled
// stops it: requests keep arriving, no readd commit follows.
func TestFORK071_ReaddLoopStopped(t *testing.T) {
	t.Parallel()
	world.Each(t, world.Networked, testReaddLoop)
}

func testReaddLoop(t *testing.T, w *world.World) {
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{Options: requester})
	carol := w.Member("carol", world.Config{})
	all := []*world.Member{alice, bob, carol}
	id := group(t, alice, bob, carol)
	bob.Engine.ArmRepeat(id, mlsfault.MisrecordAuthenticator)
	for i := 1; i <= 2; i++ {
		commit(t, alice, id)
		world.SyncAll(all...)
		if got := readdsOf(t, carol, id, key(bob)); len(got) != i {
			t.Fatalf("loop %d: readds of bob at %v", i, got)
		}
	}
	alice.Restart(&client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}})
	commit(t, alice, id)
	world.SyncAll(all...)
	world.SyncAll(all...)
	if got := readdsOf(t, carol, id, key(bob)); len(got) != 2 {
		t.Fatalf("readds of bob at %v after responses were disabled", got)
	}
	if st := status(t, alice, id, key(bob)); !st.Requested {
		t.Fatalf("no request arrived after responses were disabled: %+v", st)
	}
	stillForked(t, id, bob, all...)
}

// COMP-205: a member whose epoch secrets diverged (a commit merged onto
// a state nobody else holds) cannot verify the readd commit; with the
// opt-in repair it accepts the Welcome of a permitted readder in place of
// its forked state. A hostile member that is not a permitted readder
// takes the same path first — a readd commit built with its engine alone
// and its Welcome — and is refused: the Welcome is rejected under
// JOIN-042 and the member stays forked until the readder answers.
func TestCOMP205_DivergedRepairedHostileRefused(t *testing.T) {
	t.Parallel()
	world.Each(t, world.Networked, testDivergedRepaired)
}

func testDivergedRepaired(t *testing.T, w *world.World) {
	alice := w.Member("alice", world.Config{Options: &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}}})
	bob := w.Member("bob", world.Config{Options: divergedRequester})
	mallory := w.Member("mallory", world.Config{})
	all := []*world.Member{alice, bob, mallory}
	id := group(t, alice, bob, mallory)
	fork(t, id, bob, mlsfault.DivergeAfterMerge, alice)
	world.SyncAll(all...)
	if st := status(t, bob, id, key(bob)); !st.Requested {
		t.Fatalf("bob sent no request: %+v", st)
	}

	hostileReadd(t, mallory, id, bob)
	world.SyncAll(all...)
	if got := rejected(t, bob); !slices.Contains(got, "JOIN-042") {
		t.Fatalf("bob rejected %v; want mallory's Welcome refused under JOIN-042", got)
	}
	if st := bob.ForkState(id); st != ports.ForkForked {
		t.Fatalf("bob after mallory's Welcome: %v, want still forked", st)
	}

	alice.Restart(nil)
	world.SyncAll(all...)
	if got := readdsOf(t, alice, id, key(bob)); len(got) != 1 {
		t.Fatalf("alice merged readds of bob at %v; want one", got)
	}
	healthy(t, id, alice, all...)
}
