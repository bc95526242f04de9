package recovery_test

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/recovery"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// The rules of sections 6 to 8, one test each, on the embedded
// deployment (the end-to-end matrix runs the scenarios over regroupd).

// FORK-050, COMP-200: the request goes to the permitted readders only — in a group
// the super admins (alice), and the requester's other installation (bob2,
// added with its inbox) — never to a plain member (carol); it names the
// group and the highest commit sequence id among the requester's
// accepted remote entries; the one-shot group carries no application
// message: its topic holds the one commit that added the readders.
func TestFORK050_RequestToPermittedReadders(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{Options: &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}}})
	bob := w.Member("bob", world.Config{Options: requester})
	bob2 := w.Member("bob2", world.Config{RecoveryKey: bob.C.Identity().RecoveryKey})
	carol := w.Member("carol", world.Config{})
	all := []*world.Member{alice, bob, bob2, carol}
	id := group(t, alice, bob, bob2, carol)
	commit(t, alice, id)
	world.SyncAll(all...)
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)

	var latest uint64 // independently: the maximum over every accepted entry
	remote, err := bob.Conv(id).RemoteEntries(w.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range remote {
		latest = max(latest, e.CommitSequenceID)
	}
	world.SyncAll(all...)
	for _, m := range []*world.Member{alice, bob2} {
		if st := status(t, m, id, key(bob)); st.RequestedAt != latest || st.RequestedAt == 0 {
			t.Errorf("%s holds bob's request %+v; want latest_commit_sequence_id %d", m.Name, st, latest)
		}
	}
	if st := status(t, carol, id, key(bob)); st.RequestedAt != 0 || len(rejected(t, carol)) != 0 {
		t.Errorf("carol, a plain member, received the request: %+v, rejected %v", st, rejected(t, carol))
	}
	os := oneshots(t, bob)
	if len(os) != 1 {
		t.Fatalf("bob created %d one-shot groups, want 1", len(os))
	}
	envs, err := bob.Transport.Query(w.Ctx, append([]byte{byte(ports.TopicGroupMessages)}, os[0].ID...), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	entries := localEntries(t, bob, os[0].ID)
	if len(envs) != 1 || len(entries) != 1 || entries[0].CommitSequenceID != envs[0].GetSequenceId() ||
		entries[0].CommitResult != ports.CommitResultApplied {
		t.Fatalf("the one-shot group's topic holds %d envelopes, its log %+v; want only the commit that added the readders", len(envs), entries)
	}
}

// FORK-050 in a DM: both members' inboxes are the permitted readders, so
// the other member and the requester's other installation receive it.
func TestFORK050_DMRequestToBothInboxes(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{Options: &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}}})
	bob := w.Member("bob", world.Config{Options: requester})
	bob2 := w.Member("bob2", world.Config{RecoveryKey: bob.C.Identity().RecoveryKey})
	id := dm(t, alice, bob)
	world.SyncAll(alice, bob, bob2)
	allow(t, id, bob2)
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	world.SyncAll(alice, bob, bob2)
	for _, m := range []*world.Member{alice, bob2} {
		if st := status(t, m, id, key(bob)); st.RequestedAt == 0 {
			t.Errorf("%s did not receive bob's request", m.Name)
		}
	}
}

// FORK-051, COMP-201: one request per fork. Passes after the first send nothing
// more; a send that certainly reached nobody (the delivery service
// rate-limited every attempt of the Welcome) clears the mark and is sent
// again after the retry delay; a send whose outcome is unknown (the
// Welcome was stored, the answers were lost) is never sent again.
func TestFORK051_OneRequestPerFork(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	var ft *faultTransport
	clk := clock.NewFake(time.Now())
	alice := w.Member("alice", world.Config{Options: &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}}})
	bob := w.Member("bob", world.Config{Options: requester, Clock: clk,
		Transport: func(tr ports.Transport) ports.Transport { ft = wrapFaults(tr); return ft }})
	id := group(t, alice, bob)

	// A definite failure: four rate-limited attempts, nothing stored.
	limited := publishFault{err: ports.ErrRateLimited}
	ft.failWelcomes(limited, limited, limited, limited)
	bob.Engine.Arm(id, mlsfault.MisrecordAuthenticator)
	commit(t, alice, id)
	if err := bob.C.SyncAll(w.Ctx); !errors.Is(err, recovery.ErrNotSent) || !errors.Is(err, ports.ErrRateLimited) {
		t.Fatalf("bob's sync = %v; want the request not sent, rate limited", err)
	}
	if st := status(t, bob, id, key(bob)); st.Requested || st.NotBefore.IsZero() {
		t.Fatalf("after a send that reached nobody bob holds %+v; want the mark cleared and a retry time", st)
	}
	clk.Advance(recovery.DefaultRetryDelay)
	for i := 0; i < 3; i++ {
		bob.Sync()
		if err := bob.C.Recovery().Request(w.Ctx); err != nil {
			t.Fatal(err)
		}
	}
	alice.Sync()
	if n := len(oneshots(t, bob)); n != 2 {
		t.Fatalf("bob created %d one-shot groups; want the refused one and one retry", n)
	}
	if st := status(t, alice, id, key(bob)); !st.Requested {
		t.Fatalf("alice did not receive the retried request: %+v", st)
	}

	// An unknown outcome: the first attempt is stored, every answer lost.
	// The Welcome goes to the outbox and is published again once (a
	// second copy of the same Welcome); the request stays the only one.
	lost := publishFault{err: ports.ErrUnavailable}
	ft.failWelcomes(publishFault{store: true, err: ports.ErrUnavailable}, lost, lost, lost)
	bobGroup := group(t, alice, bob)
	bob.Engine.Arm(bobGroup, mlsfault.MisrecordAuthenticator)
	commit(t, alice, bobGroup)
	if err := bob.C.SyncAll(w.Ctx); errors.Is(err, recovery.ErrNotSent) {
		t.Fatalf("bob's sync = %v; want the outcome unknown, the Welcome kept", err)
	}
	before := len(oneshots(t, bob))
	clk.Advance(recovery.DefaultRetryDelay)
	world.SyncAll(alice, bob)
	if n := len(oneshots(t, bob)); n != before {
		t.Fatalf("bob sent again after an unknown outcome: %d one-shot groups, had %d", n, before)
	}
	if st := status(t, bob, bobGroup, key(bob)); !st.Requested {
		t.Fatalf("bob cleared the mark after an unknown outcome: %+v", st)
	}
	if st := status(t, alice, bobGroup, key(bob)); !st.Requested {
		t.Fatalf("the stored Welcome did not reach alice: %+v", st)
	}
}

// FORK-051, COMP-270: a request whose Welcome publish had an unknown
// outcome and in fact reached nobody (every attempt lost before it was
// stored) is not lost: the one-shot group's Welcome is kept and
// published again until stored, so the readder receives that one
// request, and no second request or one-shot group is ever made.
func TestFORK051_UnknownOutcomeDelivered(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	var ft *faultTransport
	clk := clock.NewFake(time.Now())
	alice := w.Member("alice", world.Config{Options: &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}}})
	bob := w.Member("bob", world.Config{Options: requester, Clock: clk,
		Transport: func(tr ports.Transport) ports.Transport { ft = wrapFaults(tr); return ft }})
	id := group(t, alice, bob)

	lost := publishFault{err: ports.ErrUnavailable}
	for i := 0; i < 64; i++ {
		ft.failWelcomes(lost)
	}
	bob.Engine.Arm(id, mlsfault.MisrecordAuthenticator)
	commit(t, alice, id)
	for i := 0; i < 3; i++ {
		if err := bob.C.SyncAll(w.Ctx); errors.Is(err, recovery.ErrNotSent) {
			t.Fatalf("bob's sync = %v; want the outcome unknown, the Welcome kept", err)
		}
		alice.Sync()
		clk.Advance(2 * time.Second) // the outbox's first delays
	}
	if st := status(t, bob, id, key(bob)); !st.Requested {
		t.Fatalf("bob cleared the mark after an unknown outcome: %+v", st)
	}
	if st := status(t, alice, id, key(bob)); st.Requested {
		t.Fatalf("alice holds a request whose every publish was lost: %+v", st)
	}
	// The service stores again: the kept Welcome reaches alice.
	ft.mu.Lock()
	ft.welcomeFaults = nil
	ft.mu.Unlock()
	clk.Advance(recovery.DefaultRetryDelay)
	for i := 0; i < 4; i++ {
		bob.Sync()
		clk.Advance(10 * time.Second)
	}
	alice.Sync()
	if n := len(oneshots(t, bob)); n != 1 {
		t.Fatalf("bob made %d one-shot groups; want the one request (FORK-051)", n)
	}
	if st := status(t, alice, id, key(bob)); !st.Requested || st.RequestedAt == 0 {
		t.Fatalf("the kept Welcome never reached alice: %+v", st)
	}
}

// FORK-052: a one-shot group is acted on and never listed: the readder
// keeps the request, holds no conversation, record or join event for the
// one-shot group, and the requester does not list its own either, nor
// stream any event that names it (its own add commit's membership, a
// Welcome outcome on its other installation).
func TestFORK052_OneshotNeverListed(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{Options: &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}}})
	bob := w.Member("bob", world.Config{Options: requester})
	bob2 := w.Member("bob2", world.Config{RecoveryKey: bob.C.Identity().RecoveryKey})
	id := group(t, alice, bob, bob2)
	drainEvents(bob, bob2)
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	alice.Sync()
	bob2.Sync()
	// Nothing the requester's installations stream names the one-shot
	// group: not its own commit's membership, nor a Welcome outcome.
	defer func() {
		for _, m := range []*world.Member{bob, bob2} {
			for _, ev := range drainEvents(m) {
				if gid := eventGroup(ev); gid != nil && !bytes.Equal(gid, id) {
					t.Errorf("%s streamed %T for the one-shot group %x", m.Name, ev, gid)
				}
			}
		}
	}()
	os := oneshots(t, bob)
	if len(os) != 1 {
		t.Fatalf("bob created %d one-shot groups", len(os))
	}
	oid := os[0].ID
	if st := status(t, alice, id, key(bob)); !st.Requested {
		t.Fatalf("alice did not act on the one-shot message: %+v", st)
	}
	for _, m := range []*world.Member{alice, bob} {
		convs, err := m.C.Conversations(w.Ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(convs, func(cv *client.Conversation) bool { return bytes.Equal(cv.ID(), oid) }) {
			t.Errorf("%s lists the one-shot group", m.Name)
		}
		if _, err := m.C.Conversation(w.Ctx, oid); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("%s: Conversation(one-shot) = %v, want not found", m.Name, err)
		}
	}
	alice.Tx(func(tx ports.Tx) error {
		if _, err := tx.Groups().Get(w.Ctx, oid); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("alice holds a record of the one-shot group: %v", err)
		}
		return nil
	})
}

// FORK-053: a readder whose consent for the group is not allowed
// discards the request: the Welcome is rejected, nothing is kept.
func TestFORK053_ConsentNotAllowed(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{Options: requester})
	id := group(t, alice, bob)
	if err := alice.Conv(id).SetConsent(w.Ctx, ports.ConsentDenied); err != nil {
		t.Fatal(err)
	}
	request(t, bob, id, bob.Info(id).Cursor, alice)
	alice.Sync()
	if got := rejected(t, alice); len(got) != 1 || got[0] != "FORK-053" {
		t.Fatalf("alice rejected %v; want the request under FORK-053", got)
	}
	if st := status(t, alice, id, key(bob)); st.RequestedAt != 0 {
		t.Fatalf("alice keeps a request of a conversation she denied: %+v", st)
	}
}

// FORK-053, COMP-202: a request the store could not hold — a group id of
// the wrong size, a position beyond every sequence id — is rejected, not
// retried for ever.
func TestCOMP202_UnanswerableRequestsRejected(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{})
	id := group(t, alice, bob)
	request(t, bob, id, math.MaxInt64+1, alice)
	request(t, bob, id[:8], 1, alice)
	alice.Sync()
	if got := rejected(t, alice); len(got) != 2 || got[0] != "FORK-080" || got[1] != "FORK-053" {
		t.Fatalf("alice rejected %v", got)
	}
	if held, err := alice.C.HeldWelcomes(w.Ctx); err != nil || len(held) != 0 {
		t.Fatalf("alice holds %d Welcomes (%v)", len(held), err)
	}
}

// FORK-061: a requester removed between its request and the response is
// not readded: the request is dropped, no commit follows.
func TestFORK061_RemovedRequesterNotReadded(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{Options: &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}}})
	bob := w.Member("bob", world.Config{Options: requester})
	carol := w.Member("carol", world.Config{})
	all := []*world.Member{alice, bob, carol}
	id := group(t, alice, bob, carol)
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	alice.Sync()
	if st := status(t, alice, id, key(bob)); !st.Requested {
		t.Fatalf("alice holds no request: %+v", st)
	}
	if err := alice.Conv(id).RemoveMembers(w.Ctx, bob.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	alice.Restart(nil)
	world.SyncAll(all...)
	if st := status(t, alice, id, key(bob)); st.Requested {
		t.Fatalf("alice still keeps the request of a removed member: %+v", st)
	}
	if got := readdsOf(t, carol, id, key(bob)); len(got) != 0 {
		t.Fatalf("a removed member was readded at %v", got)
	}
	if bob.Info(id).Active {
		t.Fatal("bob is back in the group")
	}
	healthy(t, id, alice, alice, carol)
}

// FORK-062: the readd is one commit that removes the requester's leaf
// and adds the same installation back — no member sees it leave or
// arrive — and the requester joins from that commit's Welcome, anchored
// at it.
func TestFORK062_OneCommitRemovesAndAdds(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{Options: requester})
	carol := w.Member("carol", world.Config{})
	all := []*world.Member{alice, bob, carol}
	id := group(t, alice, bob, carol)
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	world.SyncAll(all...)
	readd := readdsOf(t, carol, id, key(bob))
	if len(readd) != 1 {
		t.Fatalf("readds at %v", readd)
	}
	for _, u := range groupUpdates(t, carol, id) {
		if slices.Contains(u.Removed, bob.C.InboxID()) || slices.Contains(u.Added, bob.C.InboxID()) {
			t.Fatalf("carol saw bob removed or added by a commit of its own: %+v", u)
		}
	}
	if info := bob.Info(id); !info.Active || info.Cursor < readd[0] {
		t.Fatalf("bob %+v after the readd at %d", info, readd[0])
	}
	if a := joinAnchor(t, bob, id); a != readd[0] {
		t.Fatalf("bob's membership is anchored at %d, want the readd commit %d", a, readd[0])
	}
	healthy(t, id, alice, all...)
}

// FORK-063, COMP-204: before readding in a group whose minimum protocol
// version is absent or lower than 1.6.0, the readder sets it to 1.6.0 in
// a commit of its own, and the readd commit follows it.
func TestFORK063_VersionRaisedFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		version []byte // nil removes the component
	}{
		{"lower", []byte("1.5.9")},
		{"absent", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := world.New(t, "embedded")
			alice := w.Member("alice", world.Config{})
			bob := w.Member("bob", world.Config{Options: requester})
			carol := w.Member("carol", world.Config{})
			all := []*world.Member{alice, bob, carol}
			id := group(t, alice, bob, carol)
			rawCommit(t, alice, id, func(v ports.GroupView) ports.CommitOptions {
				d, err := metadata.FromExtensions(v.Extensions)
				if err != nil {
					t.Fatal(err)
				}
				if tc.version == nil {
					d = without(d, metadata.ComponentMinProtocol)
				} else {
					d = d.Set(metadata.ComponentMinProtocol, tc.version)
				}
				ext, err := d.Extension()
				if err != nil {
					t.Fatal(err)
				}
				return ports.CommitOptions{GroupContextExtensions: []ports.Extension{ext}}
			})
			world.SyncAll(all...)
			if v := carol.Info(id).MinProtocolVersion; v != string(tc.version) && tc.version != nil {
				t.Fatalf("the group's minimum version is %q", v)
			}
			fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
			world.SyncAll(all...)
			readd := readdsOf(t, carol, id, key(bob))
			if len(readd) != 1 {
				t.Fatalf("readds at %v", readd)
			}
			var raised uint64
			for _, m := range updates(t, carol, id) {
				u, _ := client.DecodeGroupUpdate(m.Content)
				if slices.Contains(u.Components, metadata.ComponentMinProtocol) {
					raised = m.SequenceID
				}
			}
			if raised == 0 || raised > readd[0] || carol.Info(id).MinProtocolVersion != recovery.ReaddVersion.String() {
				t.Fatalf("version raised at %d to %q, readd at %d; want 1.6.0 set before the readd", raised,
					carol.Info(id).MinProtocolVersion, readd[0])
			}
			healthy(t, id, alice, all...)
		})
	}
}

// FORK-070: with no policy set a client sends no request and answers
// requests; a list selects only its groups.
func TestFORK070_Policy(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{}) // no policy: none, responses on
	carol := w.Member("carol", world.Config{})
	all := []*world.Member{alice, bob, carol}
	first := group(t, alice, bob, carol)
	second := group(t, alice, bob, carol)
	fork(t, first, bob, mlsfault.MisrecordAuthenticator, alice)
	world.SyncAll(all...)
	if n := len(oneshots(t, bob)); n != 0 || status(t, bob, first, key(bob)).Requested {
		t.Fatalf("bob, with no policy, sent %d requests", n)
	}

	carol.Restart(&client.Options{Recovery: client.RecoveryPolicy{Mode: client.RecoverListed, Groups: [][]byte{second}}})
	fork(t, first, carol, mlsfault.MisrecordAuthenticator, alice)
	fork(t, second, carol, mlsfault.MisrecordAuthenticator, alice)
	world.SyncAll(all...)
	if status(t, carol, first, key(carol)).Requested || status(t, alice, first, key(carol)).RequestedAt != 0 {
		t.Fatal("carol sent a request for a group her list does not name")
	}
	// alice, with no policy, answers the request for the listed group.
	if got := readdsOf(t, alice, second, key(carol)); len(got) != 1 {
		t.Fatalf("readds of carol in the listed group at %v; want one", got)
	}
}

// FORK-071: while responses are disabled the readder keeps the request
// and never publishes a readd commit.
func TestFORK071_ResponsesDisabled(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	var ft *faultTransport
	alice := w.Member("alice", world.Config{Options: &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}},
		Transport: func(tr ports.Transport) ports.Transport { ft = wrapFaults(tr); return ft }})
	bob := w.Member("bob", world.Config{Options: requester})
	id := group(t, alice, bob)
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	published := ft.publishesToGroups()
	for i := 0; i < 3; i++ {
		world.SyncAll(alice, bob)
		if err := alice.C.Recovery().Respond(w.Ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := ft.publishesToGroups(); n != published {
		t.Fatalf("alice published %d commits with responses disabled", n-published)
	}
	if st := status(t, alice, id, key(bob)); !st.Requested {
		t.Fatalf("alice dropped the request: %+v", st)
	}
}

// FORK-080, COMP-271: envelopes the readder read past without
// authenticating them count as processed. A copy of the group's last
// commit stored again at a higher id (a publish whose answer was lost,
// sent again) is junk to every member, so the stored cursor stays below
// the newest id the service reports; the readder still answers the
// request.
func TestFORK080_JunkAtTheTopIsProcessed(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{})
	id := group(t, alice, bob)
	commit(t, alice, id)
	world.SyncAll(alice, bob)
	topic := append([]byte{byte(ports.TopicGroupMessages)}, id...)
	last, err := alice.Transport.QueryNewest(w.Ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	env := &backendpb.ClientEnvelope{TargetTopic: topic,
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: last.GetEnvelope().GetGroupMessage()}}
	seqs, err := bob.Transport.Publish(w.Ctx, []*backendpb.ClientEnvelope{env})
	if err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, bob)
	if cur := alice.Info(id).Cursor; cur >= seqs[0] {
		t.Fatalf("alice's cursor %d moved over the copy at %d", cur, seqs[0])
	}
	request(t, bob, id, bob.Info(id).Cursor, alice)
	world.SyncAll(alice, bob)
	if got := readdsOf(t, alice, id, key(bob)); len(got) != 1 {
		t.Fatalf("alice merged readds of bob at %v; want one, junk above her cursor being read", got)
	}
}

// FORK-080: the readder acts only from a position it holds: while its
// reads of the group's topic lag behind what the delivery service
// reports, and while a request names a commit beyond what it processed,
// it keeps the request and publishes nothing; a readder that is not a
// permitted readder drops the request.
func TestFORK080_Conditions(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	var ft *faultTransport
	alice := w.Member("alice", world.Config{Transport: func(tr ports.Transport) ports.Transport { ft = wrapFaults(tr); return ft }})
	bob := w.Member("bob", world.Config{})
	carol := w.Member("carol", world.Config{})
	all := []*world.Member{alice, bob, carol}
	id := group(t, alice, bob, carol)

	// A lagging read: alice's queries stop at her cursor, while the
	// service reports carol's commit beyond it.
	ft.lagGroups(alice.Info(id).Cursor)
	commit(t, carol, id)
	published := ft.publishesToGroups()
	request(t, bob, id, bob.Info(id).Cursor, alice, carol)
	alice.Sync()
	if st := status(t, alice, id, key(bob)); !st.Requested || ft.publishesToGroups() != published {
		t.Fatalf("alice acted from a lagging read: %+v, %d publishes", st, ft.publishesToGroups()-published)
	}
	ft.lagGroups(0)

	// A request naming a commit beyond every processed position.
	ahead := alice.Info(id).Cursor + 40
	request(t, bob, id, ahead, alice)
	world.SyncAll(all...)
	if st := status(t, alice, id, key(bob)); !st.Requested || st.RequestedAt != ahead {
		t.Fatalf("alice does not keep the request ahead of her: %+v", st)
	}
	if got := readdsOf(t, alice, id, key(bob)); len(got) != 0 {
		t.Fatalf("a request beyond alice's position was answered at %v", got)
	}
	for alice.Info(id).Cursor < ahead { // the topic moves past it
		if _, err := carol.Conv(id).Send(w.Ctx, []byte("move on")); err != nil {
			t.Fatal(err)
		}
		alice.Sync()
	}
	world.SyncAll(all...)
	if got := readdsOf(t, alice, id, key(bob)); len(got) != 1 {
		t.Fatalf("readds at %v once alice holds the position", got)
	}
	// carol, a plain member, received the first request and dropped it.
	if st := status(t, carol, id, key(bob)); st.Requested || st.RequestedAt == 0 {
		t.Fatalf("carol, not a permitted readder, holds %+v", st)
	}
	healthy(t, id, alice, all...)

	// A request kept while the conversation was allowed is dropped once
	// it is not: consent is checked again when answering.
	alice.Restart(&client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}})
	request(t, bob, id, bob.Info(id).Cursor, alice)
	alice.Sync()
	if err := alice.Conv(id).SetConsent(w.Ctx, ports.ConsentDenied); err != nil {
		t.Fatal(err)
	}
	alice.Restart(nil)
	alice.Sync()
	if st := status(t, alice, id, key(bob)); st.Requested {
		t.Fatalf("alice keeps a request of a conversation she no longer allows: %+v", st)
	}
	if got := readdsOf(t, alice, id, key(bob)); len(got) != 1 {
		t.Fatalf("readds at %v after consent was withdrawn", got)
	}
}

// FORK-004, FORK-080: with the commit log off every fork state reads
// unknown, so a readder keeps every request and never answers, and a
// client sends no request, whatever fork state it stored before.
func TestFORK080_CommitLogOffNeverAnswers(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{})
	id := group(t, alice, bob)
	commit(t, alice, id)
	if st := alice.ForkState(id); st != ports.ForkNotForked {
		t.Fatalf("alice: %v", st)
	}
	alice.Restart(&client.Options{DisableCommitLog: true}) // the stored state says not forked
	request(t, bob, id, bob.Info(id).Cursor, alice)
	world.SyncAll(alice, bob)
	if st := status(t, alice, id, key(bob)); !st.Requested || len(readdsOf(t, alice, id, key(bob))) != 0 {
		t.Fatalf("alice, with the log off, answered: %+v", st)
	}

	carol := w.Member("carol", world.Config{Options: &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}}})
	erin := w.Member("erin", world.Config{Options: requester})
	other := group(t, carol, erin)
	fork(t, other, erin, mlsfault.MisrecordAuthenticator, carol)
	erin.Restart(&client.Options{Recovery: client.RecoveryPolicy{Mode: client.RecoverAll}, DisableCommitLog: true})
	erin.Tx(func(tx ports.Tx) error { // as if no request had been sent yet
		return tx.Readds().Upsert(w.Ctx, other, key(erin), func(s *ports.ReaddStatus) error { s.Requested = false; return nil })
	})
	before := len(oneshots(t, erin))
	erin.Sync()
	if n := len(oneshots(t, erin)); n != before {
		t.Fatalf("erin, with the log off, sent %d requests", n-before)
	}
}

// oneshots returns the one-shot groups m created.
func oneshots(t *testing.T, m *world.Member) []ports.Group {
	t.Helper()
	ct := ports.ConversationOneshot
	var gs []ports.Group
	m.Tx(func(tx ports.Tx) (err error) {
		gs, err = tx.Groups().List(m.W.Ctx, ports.GroupFilter{ConversationType: &ct})
		return err
	})
	return gs
}

func localEntries(t *testing.T, m *world.Member, id []byte) []ports.LocalCommitLogEntry {
	t.Helper()
	var es []ports.LocalCommitLogEntry
	m.Tx(func(tx ports.Tx) (err error) {
		es, err = tx.LocalCommitLog().List(m.W.Ctx, id, 0, 0)
		return err
	})
	return es
}

func joinAnchor(t *testing.T, m *world.Member, id []byte) uint64 {
	t.Helper()
	var g ports.Group
	m.Tx(func(tx ports.Tx) (err error) {
		g, err = tx.Groups().Get(m.W.Ctx, id)
		return err
	})
	return g.JoinAnchor
}

// updates returns m's group-update records of the group.
func updates(t *testing.T, m *world.Member, id []byte) []ports.Message {
	t.Helper()
	msgs, err := m.Conv(id).Messages(m.W.Ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(msgs, func(msg ports.Message) bool { return msg.Kind != ports.MessageGroupUpdated })
}

func groupUpdates(t *testing.T, m *world.Member, id []byte) []client.GroupUpdate {
	t.Helper()
	var out []client.GroupUpdate
	for _, msg := range updates(t, m, id) {
		u, err := client.DecodeGroupUpdate(msg.Content)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// without returns d without component id.
func without(d metadata.Dictionary, id uint16) metadata.Dictionary {
	return metadata.Dictionary{Components: slices.DeleteFunc(slices.Clone(d.Components), func(c metadata.Component) bool { return c.ID == id })}
}

// COMP-203: a readder drops a request whose latest_commit_sequence_id is
// below the start of its own membership: a readd between the two may
// have answered it and was never processed here. a2 joins after bob's
// request was made; a copy of it reaching a2 is dropped, and alice, a
// member throughout, answers it.
func TestCOMP203_RequestOlderThanTheMembership(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	off := &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}}
	alice := w.Member("alice", world.Config{Options: off})
	bob := w.Member("bob", world.Config{Options: requester})
	id := group(t, alice, bob)
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	latest := status(t, bob, id, key(bob)).RequestedAt
	a2 := w.Member("a2", world.Config{RecoveryKey: alice.C.Identity().RecoveryKey})
	if err := alice.Conv(id).AddMembers(w.Ctx, alice.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, a2, bob)
	allow(t, id, a2)
	if a := joinAnchor(t, a2, id); a <= latest {
		t.Fatalf("a2 joined at %d, not after the request's %d", a, latest)
	}
	request(t, bob, id, latest, a2)
	a2.Sync()
	if st := status(t, a2, id, key(bob)); st.Requested || st.RequestedAt != latest {
		t.Fatalf("a2 holds %+v; want the request received and dropped", st)
	}
	alice.Restart(nil)
	world.SyncAll(alice, a2, bob)
	if got := readdsOf(t, alice, id, key(bob)); len(got) != 1 {
		t.Fatalf("readds at %v", got)
	}
	healthy(t, id, alice, alice, a2, bob)
}

// COMP-205: the opt-in repair answers true only when every condition
// holds — the policy opts in, a group or DM, forked, active, this
// installation's own request outstanding, and the adder a leaf of the
// held tree whose inbox there is a permitted readder — and false when any
// one of them fails.
func TestCOMP205_RepairForkedConditions(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{Options: divergedRequester})
	carol := w.Member("carol", world.Config{})
	id := group(t, alice, bob, carol)
	fork(t, id, bob, mlsfault.MisrecordAuthenticator, alice)
	var g ports.Group
	var held ports.GroupView
	bob.Tx(func(tx ports.Tx) (err error) {
		if g, err = tx.Groups().Get(w.Ctx, id); err != nil {
			return err
		}
		held, err = bob.Engine.Group(w.Ctx, tx, id)
		return err
	})
	leaf := func(m *world.Member) ports.Member {
		for _, l := range held.Members {
			if bytes.Equal(l.SignatureKey, key(m)) {
				return l
			}
		}
		t.Fatalf("%s holds no leaf", m.Name)
		return ports.Member{}
	}
	repair := func(r *recovery.Recovery, g ports.Group, held ports.GroupView, adder ports.Member) bool {
		var ok bool
		bob.Tx(func(tx ports.Tx) (err error) {
			ok, err = r.RepairForked(w.Ctx, tx, g, held, adder)
			return err
		})
		return ok
	}
	rec := bob.C.Recovery()
	if !repair(rec, g, held, leaf(alice)) {
		t.Fatal("every condition holds, yet no repair")
	}
	notForked, inactive, oneshot := g, held, g
	notForked.ForkState = ports.ForkUnknown
	inactive.Active = false
	oneshot.ConversationType = ports.ConversationOneshot
	stranger := leaf(alice)
	stranger.SignatureKey = bytes.Repeat([]byte{9}, 32)
	for _, tc := range []struct {
		name  string
		ok    bool
		g     ports.Group
		held  ports.GroupView
		adder ports.Member
	}{
		{"not forked", repair(rec, notForked, held, leaf(alice)), notForked, held, leaf(alice)},
		{"inactive", repair(rec, g, inactive, leaf(alice)), g, inactive, leaf(alice)},
		{"one-shot", repair(rec, oneshot, held, leaf(alice)), oneshot, held, leaf(alice)},
		{"adder not a permitted readder", repair(rec, g, held, leaf(carol)), g, held, leaf(carol)},
		{"adder not a leaf", repair(rec, g, held, stranger), g, held, stranger},
		{"adder is this installation", repair(rec, g, held, leaf(bob)), g, held, leaf(bob)},
	} {
		if tc.ok {
			t.Errorf("%s: repair allowed", tc.name)
		}
	}
	bob.Tx(func(tx ports.Tx) error {
		return tx.Readds().Upsert(w.Ctx, id, key(bob), func(s *ports.ReaddStatus) error { s.Requested = false; return nil })
	})
	if repair(rec, g, held, leaf(alice)) {
		t.Error("no request outstanding: repair allowed")
	}
	bob.Restart(requester) // the policy does not opt in
	bob.Tx(func(tx ports.Tx) error {
		return tx.Readds().Upsert(w.Ctx, id, key(bob), func(s *ports.ReaddStatus) error { s.Requested = true; return nil })
	})
	if repair(bob.C.Recovery(), g, held, leaf(alice)) {
		t.Error("the policy does not opt in: repair allowed")
	}
}

// COMP-207: the workers repair a fork by themselves: with the periodic
// passes an hour away, the wake-ups alone — the conversation becoming
// forked, the request kept — carry the request and the readd, once both
// clients' workers are past their first sync and subscribed, and the
// member rejoins without any explicit sync.
func TestCOMP207_WorkersRepairByThemselves(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	slow := func(p client.RecoveryPolicy) *client.Options {
		return &client.Options{Recovery: p, RecoveryInterval: time.Hour, SyncInterval: time.Hour}
	}
	var subs [2]*faultTransport
	watch := func(i int) func(ports.Transport) ports.Transport {
		return func(tr ports.Transport) ports.Transport { subs[i] = wrapFaults(tr); return subs[i] }
	}
	alice := w.Member("alice", world.Config{Options: slow(client.RecoveryPolicy{}), Transport: watch(0)})
	bob := w.Member("bob", world.Config{Options: slow(client.RecoveryPolicy{Mode: client.RecoverAll}), Transport: watch(1)})
	id := group(t, alice, bob)
	for i, m := range []*world.Member{alice, bob} {
		if err := m.C.Start(w.Ctx); err != nil {
			t.Fatal(err)
		}
		select { // the first sync is over once the worker subscribes
		case <-subs[i].subscribed:
		case <-time.After(time.Minute):
			t.Fatalf("%s's workers did not subscribe", m.Name)
		}
	}
	rejoined := make(chan struct{})
	go func() {
		for ev := range bob.C.Events() {
			if j, ok := ev.(client.JoinedEvent); ok && j.Rejoined && bytes.Equal(j.GroupID, id) {
				close(rejoined)
				return
			}
		}
	}()
	bob.Engine.Arm(id, mlsfault.MisrecordAuthenticator)
	if err := alice.Conv(id).UpdateKeys(w.Ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rejoined:
	case <-time.After(2 * time.Minute):
		t.Fatalf("bob not rejoined two minutes after the fork (fork state %v)", bob.ForkState(id))
	}
	if got := readdsOf(t, alice, id, key(bob)); len(got) != 1 {
		t.Fatalf("readds at %v", got)
	}
}

// COMP-208: a member whose epoch secrets diverged cannot verify the readd
// commit: without the opt-in repair the readd happens, its Welcome never
// installs (held below its anchor, or refused under JOIN-042) and the
// member stays forked, diverged from the group; the readd of section 7 repairs only a member whose log alone
// diverged.
func TestCOMP208_DivergedNeedsTheOptIn(t *testing.T) {
	t.Parallel()
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{Options: requester})
	id := group(t, alice, bob)
	fork(t, id, bob, mlsfault.RefuseWinner, alice)
	world.SyncAll(alice, bob)
	if got := readdsOf(t, alice, id, key(bob)); len(got) != 1 {
		t.Fatalf("readds at %v; want the one readd", got)
	}
	// bob cannot authenticate the readd commit, so his processing stops
	// below its anchor (COMP-240): the Welcome waits under JOIN-092 and
	// never installs.
	held, err := bob.C.HeldWelcomes(w.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := rejected(t, bob); !slices.Contains(got, "JOIN-042") && len(held) != 1 {
		t.Fatalf("bob rejected %v and holds %d Welcomes; want the readd's Welcome refused under JOIN-042 or held", got, len(held))
	}
	if st := bob.ForkState(id); st != ports.ForkForked {
		t.Fatalf("bob: %v, want still forked", st)
	}
	if a, b := alice.Info(id), bob.Info(id); bytes.Equal(a.EpochAuthenticator, b.EpochAuthenticator) {
		t.Fatal("bob holds the group's state")
	}
}

// drainEvents returns the events the members' clients queued so far.
func drainEvents(ms ...*world.Member) []client.Event {
	var out []client.Event
	for _, m := range ms {
		for {
			// The queue hands events over one at a time: wait a moment for
			// the next before deciding there is none.
			select {
			case ev := <-m.C.Events():
				out = append(out, ev)
				continue
			case <-time.After(100 * time.Millisecond):
			}
			break
		}
	}
	return out
}

// eventGroup returns the group an event names, nil for none.
func eventGroup(ev client.Event) []byte {
	switch e := ev.(type) {
	case client.JoinedEvent:
		return e.GroupID
	case client.MessageEvent:
		return e.Message.GroupID
	case client.MembershipEvent:
		return e.GroupID
	case client.MetadataEvent:
		return e.GroupID
	case client.ForkStateEvent:
		return e.GroupID
	case client.WelcomeEvent:
		return e.GroupID
	case client.CommitRejectedEvent:
		return e.GroupID
	case client.RecoveryEvent:
		return e.GroupID
	}
	return nil
}
