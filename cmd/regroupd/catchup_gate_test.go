package main

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Gate 11 (ADR-0030 Decision 9; COMP-490 to COMP-497): a regroupd with
// commit acceptance, backed up and restored as docs/operations.md says,
// catches up from the commits its members upload by themselves. After
// the backup bob (a member) and alice (the super admin) commit and
// everyone merges; carol then commits alone (nobody else reads it before
// the restore). After the restore carol commits, is refused for
// catch-up, and her client uploads its merged commits: bob's and
// alice's are taken (another inbox uploads them), carol's own is refused
// (its committer alone uploads it). Alice
// then commits for that epoch (a super admin's chain); carol commits
// again, her commit uploaded again is refused without stopping the
// group, and her client, on the other branch, resyncs by itself. Every member ends at the same epoch and
// authenticator, not forked, reading and sending, and no sequence id was
// handed out twice.
func TestGate11_CatchUpAfterRestore(t *testing.T) {
	for _, mode := range world.Networked {
		t.Run(mode, func(t *testing.T) {
			w := world.NewWithFlags(t, mode, 3*time.Minute, "-accept-commits", "-catch-up-window", "2m")
			kit := newBackupKit(t, mode, w.Regroupd)
			alice, bob, carol := w.Member("alice", world.Config{}), w.Member("bob", world.Config{}), w.Member("carol", world.Config{})
			all := []*world.Member{alice, bob, carol}
			g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID(), carol.C.InboxID()}})
			if err != nil {
				t.Fatal(err)
			}
			group := g.ID()
			ids := map[string]uint64{}
			send := func(m *world.Member, text string) {
				t.Helper()
				seq, err := m.Conv(group).Send(w.Ctx, []byte(text))
				if err != nil {
					t.Fatalf("%s sends %q: %v", m.Name, text, err)
				}
				ids[text] = seq
			}
			world.SyncAll(all...)
			send(alice, "one")
			world.SyncAll(all...)
			kit.backup()
			restored := alice.Info(group).Epoch

			// After the backup: bob's and alice's commits, merged by all,
			// then carol's, merged by carol alone.
			if err := bob.Conv(group).UpdateKeys(w.Ctx); err != nil {
				t.Fatal(err)
			}
			world.SyncAll(all...)
			if err := alice.Conv(group).SetName(w.Ctx, "after the backup"); err != nil {
				t.Fatal(err)
			}
			send(bob, "two")
			world.SyncAll(all...)
			world.Agree(t, group, all...)
			if err := carol.Conv(group).UpdateKeys(w.Ctx); err != nil {
				t.Fatal(err)
			}
			dropped := carol.Info(group).Epoch
			if dropped != restored+3 {
				t.Fatalf("carol at epoch %d after three commits since epoch %d", dropped, restored)
			}

			kit.putBack(true)
			// Carol reconnects first and commits: refused for catch-up,
			// her client uploads its merged commits by itself; bob's and
			// alice's are taken, her own is not, nor her new commit.
			waitServing(t, carol)
			if err := carol.Conv(group).UpdateKeys(w.Ctx); !errors.Is(err, ports.ErrCatchUp) {
				t.Fatalf("carol's commit after the restore: %v; want ErrCatchUp", err)
			}
			waitServing(t, alice)
			waitServing(t, bob)
			world.Round(alice, bob)
			world.Agree(t, group, alice, bob)
			if got := alice.Info(group).Epoch; got != restored+2 {
				t.Fatalf("alice at epoch %d after the catch-up; want %d (bob's and alice's commits taken back)", got, restored+2)
			}
			// A member's own commit during catch-up is not taken.
			if err := bob.Conv(group).UpdateKeys(w.Ctx); !errors.Is(err, ports.ErrCatchUp) {
				t.Fatalf("bob's own commit during catch-up: %v; want ErrCatchUp", err)
			}
			// The super admin's commit for that epoch: her chain decides.
			if err := alice.Conv(group).SetName(w.Ctx, "decided"); err != nil {
				t.Fatalf("the super admin's commit in catch-up: %v", err)
			}
			world.Round(alice, bob, carol)
			// Carol commits again: refused for catch-up, her client uploads
			// her chain again, her own commit is refused as of another
			// chain (the super admin's decided its epoch; the group is not
			// stopped), and her client resyncs onto that chain by itself
			// (COMP-522).
			if err := carol.Conv(group).UpdateKeys(w.Ctx); !errors.Is(err, ports.ErrCatchUp) {
				t.Fatalf("carol's commit on the branch that lost: %v; want ErrCatchUp", err)
			}
			world.SyncAll(all...)
			world.Agree(t, group, all...)
			send(alice, "three")
			send(carol, "four")
			world.SyncAll(all...)
			world.Agree(t, group, all...)
			for _, m := range all {
				if st := m.ForkState(group); st == ports.ForkForked {
					t.Errorf("%s: forked after the catch-up", m.Name)
				}
				if name := m.Info(group).Name; name != "decided" {
					t.Errorf("%s holds the name %q; want the super admin's %q", m.Name, name, "decided")
				}
				var got []string
				for _, msg := range heldMessages(t, m, group) {
					got = append(got, string(msg.Content))
				}
				slices.Sort(got)
				if want := []string{"four", "one", "three", "two"}; !slices.Equal(got, want) && !(m == carol && slices.Equal(got, []string{"four", "three"})) {
					t.Errorf("%s holds %q; want %q", m.Name, got, want)
				}
			}
			if ids["three"] <= max(ids["one"], ids["two"]) || ids["four"] <= max(ids["one"], ids["two"]) {
				t.Errorf("ids %v: an id after the restore not above every id before it", ids)
			}
		})
	}
}

// COMP-494 (amendment rule 4) over gRPC after a documented restore: bob,
// a super admin who had not read alice's commit made after the backup,
// commits for the restored epoch (taken: his installation, a super
// admin's). Carol, no super admin, uploads alice's commit for that epoch:
// refused, the group goes on (a super admin's chain decided). Alice, a
// super admin too, uploads it: two super admins' chains conflict, the
// group's catch-up stops with an AcceptanceNotice STOPPED on its topic
// and every later commit is refused.
func TestCOMP494_SuperAdminsConflictingUploadsStopCatchUp(t *testing.T) {
	for _, mode := range world.Networked {
		t.Run(mode, func(t *testing.T) {
			w := world.NewWithFlags(t, mode, 3*time.Minute, "-accept-commits", "-catch-up-window", "2m")
			kit := newBackupKit(t, mode, w.Regroupd)
			alice, bob, carol := w.Member("alice", world.Config{}), w.Member("bob", world.Config{}), w.Member("carol", world.Config{})
			all := []*world.Member{alice, bob, carol}
			g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID(), carol.C.InboxID()}})
			if err != nil {
				t.Fatal(err)
			}
			group := g.ID()
			world.SyncAll(all...)
			if err := alice.Conv(group).SetSuperAdmins(w.Ctx, alice.C.InboxID(), bob.C.InboxID()); err != nil {
				t.Fatal(err)
			}
			world.SyncAll(all...)
			kit.backup()
			restored := alice.Info(group).Epoch
			if err := alice.Conv(group).SetName(w.Ctx, "alice's"); err != nil {
				t.Fatal(err)
			}
			world.Round(alice, carol) // bob does not read it
			kit.putBack(true)
			waitServing(t, bob)
			if err := bob.Conv(group).SetName(w.Ctx, "bob's"); err != nil {
				t.Fatalf("bob's commit for the restored epoch %d: %v", restored, err)
			}
			// Carol commits: refused for catch-up, her client uploads
			// alice's commit, which is refused too (of another chain: her
			// client resyncs onto bob's, COMP-522).
			waitServing(t, carol)
			if err := carol.Conv(group).UpdateKeys(w.Ctx); !errors.Is(err, ports.ErrCatchUp) {
				t.Fatalf("carol's commit after the restore: %v; want ErrCatchUp", err)
			}
			es, err := carol.Transport.Query(w.Ctx, topicOf(ports.TopicGroupMessages, group), 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				if e.GetEnvelope().GetAcceptanceNotice().GetOutcome() == backendpb.AcceptanceNotice_STOPPED {
					t.Fatal("catch-up stopped on an upload by an installation that is no super admin's")
				}
			}
			// Alice's client uploads her chain: two super admins' chains.
			// (Her upload comes first: a new commit of hers would be for
			// the epoch of carol's resync, another conflict.)
			waitServing(t, alice)
			if n, err := alice.C.UploadMerged(w.Ctx, group); err != nil || n != 0 {
				t.Fatalf("alice's upload of her chain: %d taken, %v; want none", n, err)
			}
			stopped := false
			for i := 0; i < 100 && !stopped; i++ {
				es, err := bob.Transport.Query(w.Ctx, topicOf(ports.TopicGroupMessages, group), 0, 1000)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range es {
					if n := e.GetEnvelope().GetAcceptanceNotice(); n.GetOutcome() == backendpb.AcceptanceNotice_STOPPED && n.GetEpoch() == restored {
						stopped = true
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !stopped {
				t.Fatal("no STOPPED notice on the group topic after two super admins' conflicting uploads")
			}
			for _, m := range []*world.Member{alice, bob} {
				if err := m.Conv(group).UpdateKeys(w.Ctx); !errors.Is(err, ports.ErrCatchUp) {
					t.Errorf("%s commits in the stopped group: %v; want ErrCatchUp", m.Name, err)
				}
			}
		})
	}
}
