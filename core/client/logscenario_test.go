package client_test

import (
	"testing"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// The commit log's scenarios, on live groups through the client (the
// recorded-view versions stay in core/commitlog as unit tests).

// FORK-082: the fork state stays unknown while the newest local entry has
// no remote counterpart, and becomes not forked once the publisher has
// merged and published that commit.
func TestScenarioLiveUnknownWhileNewestLocalUnpublished(t *testing.T) {
	eachMode(t, func(t *testing.T, w *world.World) {
		alice, bob := newMember(w, "alice", nil), newMember(w, "bob", nil)
		g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
		if err != nil {
			t.Fatal(err)
		}
		id := g.ID()
		bob.Sync()
		if err := bob.Conv(id).SetConsent(w.Ctx, ports.ConsentAllowed); err != nil {
			t.Fatal(err)
		}
		// Bob (no publisher) commits; alice, the only publisher, has not
		// processed it yet.
		if err := bob.Conv(id).UpdateKeys(w.Ctx); err != nil {
			t.Fatal(err)
		}
		bob.Sync()
		if st, _ := bob.Conv(id).ForkState(w.Ctx); st.State != ports.ForkUnknown {
			t.Fatalf("bob before alice published his commit: %v, want unknown", st.State)
		}
		alice.Sync() // merges bob's commit and publishes its entry
		bob.Sync()
		if st, _ := bob.Conv(id).ForkState(w.Ctx); st.State != ports.ForkNotForked {
			t.Fatalf("bob after alice published: %v, want not forked", st.State)
		}
	})
}

// COMP-090, FORK-083: in a DM both members publish an entry for each
// commit; each reader accepts the first entry per commit and discards the
// other member's under the chain rule, and both read not forked.
func TestScenarioLiveDMBothMembersPublish(t *testing.T) {
	eachMode(t, func(t *testing.T, w *world.World) {
		alice, bob := newMember(w, "alice", nil), newMember(w, "bob", nil)
		dm, err := alice.C.CreateDM(w.Ctx, bob.C.InboxID())
		if err != nil {
			t.Fatal(err)
		}
		id := dm.ID()
		bob.Sync()
		if err := bob.Conv(id).SetConsent(w.Ctx, ports.ConsentAllowed); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			// The committer publishes first, so each member's entry comes
			// first on the topic for the commits it made.
			m, other := alice, bob
			if i%2 == 1 {
				m, other = bob, alice
			}
			if err := m.Conv(id).UpdateKeys(w.Ctx); err != nil {
				t.Fatal(err)
			}
			syncAll(m, other)
		}
		syncAll(alice, bob)
		authors := map[string]bool{}
		for _, m := range []*world.Member{alice, bob} {
			remote := mustRemote(t, m, id)
			seen := map[uint64]bool{}
			for _, e := range remote {
				if seen[e.CommitSequenceID] {
					t.Errorf("%s accepted two entries for commit %d", m.Name, e.CommitSequenceID)
				}
				seen[e.CommitSequenceID] = true
				authors[string(e.AuthorInstallationKey)] = true
			}
			if m.C.CommitLog().Counters()[commitlog.ReasonChain] == 0 {
				t.Errorf("%s discarded no duplicate under the chain rule: %v", m.Name, m.C.CommitLog().Counters())
			}
			if st, _ := m.Conv(id).ForkState(w.Ctx); st.State != ports.ForkNotForked {
				t.Errorf("%s: %v, want not forked", m.Name, st.State)
			}
		}
		if len(authors) != 2 {
			t.Errorf("accepted entries by %d authors; both DM members publish", len(authors))
		}
	})
}

// FORK-030: a conversation whose consent is not allowed is not read; once
// the app allows it, its log is read.
func TestFORK030_LogReadOnlyWhenAllowed(t *testing.T) {
	eachMode(t, func(t *testing.T, w *world.World) {
		alice, bob := newMember(w, "alice", nil), newMember(w, "bob", nil)
		g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
		if err != nil {
			t.Fatal(err)
		}
		id := g.ID()
		syncAll(alice, bob)
		if n := len(mustRemote(t, bob, id)); n != 0 {
			t.Fatalf("bob accepted %d entries of a conversation he never allowed", n)
		}
		if err := bob.Conv(id).SetConsent(w.Ctx, ports.ConsentAllowed); err != nil {
			t.Fatal(err)
		}
		bob.Sync()
		if n := len(mustRemote(t, bob, id)); n == 0 {
			t.Fatal("bob read nothing after allowing the conversation")
		}
	})
}

// FORK-004, FORK-072: with the commit log disabled (CONF-045) the client
// records, publishes and reads nothing and reports every fork state as
// unknown, while a member with the log on reads the same group normally.
func TestFORK004_NoLogNoEvidence(t *testing.T) {
	w := world.New(t, "embedded")
	alice := newMember(w, "alice", nil)
	bob := newMemberWith(w, "bob", nil, &client.Options{DisableCommitLog: true})
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	bob.Sync()
	if err := bob.Conv(g.ID()).SetConsent(w.Ctx, ports.ConsentAllowed); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := g.UpdateKeys(w.Ctx); err != nil {
			t.Fatal(err)
		}
		syncAll(alice, bob)
	}
	if st, _ := g.ForkState(w.Ctx); st.State != ports.ForkNotForked {
		t.Errorf("alice, log on: %v, want not forked", st.State)
	}
	bc := bob.Conv(g.ID())
	st, err := bc.ForkState(w.Ctx)
	if err != nil || st.State != ports.ForkUnknown {
		t.Errorf("bob, log off: %+v, %v; want unknown", st, err)
	}
	local, _ := bc.LocalEntries(w.Ctx)
	remote, _ := bc.RemoteEntries(w.Ctx)
	if len(local) != 0 || len(remote) != 0 {
		t.Errorf("bob, log off, holds %d local and %d remote entries", len(local), len(remote))
	}
	// FORK-072: the app reads alice's entries through the SDK.
	local, _ = g.LocalEntries(w.Ctx)
	remote, _ = g.RemoteEntries(w.Ctx)
	if len(local) < 3 || len(remote) < 3 {
		t.Errorf("alice exposes %d local and %d remote entries; want her three commits in both", len(local), len(remote))
	}
}
