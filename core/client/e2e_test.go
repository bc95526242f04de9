package client_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// The end-to-end cases run on internal/world: clients on one delivery
// service, in-process ("embedded") or a regroupd process on SQLite or
// PostgreSQL. newMember builds a member through the root package's
// injector of the mode, as an app does; world's own members (built from
// the providers) are used where a test needs the engine or the store.

func newMember(w *world.World, name string, recovery ed25519.PrivateKey) *world.Member {
	w.T.Helper()
	return newMemberWith(w, name, recovery, nil)
}

func newMemberWith(w *world.World, name string, recovery ed25519.PrivateKey, opts *client.Options) *world.Member {
	w.T.Helper()
	return w.Member(name, world.Config{RecoveryKey: recovery, Options: opts, Injector: true})
}

func eachMode(t *testing.T, fn func(t *testing.T, w *world.World)) { world.Each(t, world.Modes, fn) }

func texts(t *testing.T, m *world.Member, id []byte) []string {
	t.Helper()
	msgs, err := m.Conv(id).Messages(m.W.Ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, msg := range msgs {
		if msg.Kind == ports.MessageApplication {
			out = append(out, string(msg.Content))
		}
	}
	return out
}

func TestCreateAddSendReceive(t *testing.T) { eachMode(t, testCreateAddSendReceive) }

func testCreateAddSendReceive(t *testing.T, w *world.World) {
	alice, bob := newMember(w, "alice", nil), newMember(w, "bob", nil)
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "ops", Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	bob.Sync()
	world.Agree(t, g.ID(), alice, bob)
	if _, err := g.Send(w.Ctx, []byte("hello bob")); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Conv(g.ID()).Send(w.Ctx, []byte("hello alice")); err != nil {
		t.Fatal(err)
	}
	alice.Sync()
	bob.Sync()
	for _, m := range []*world.Member{alice, bob} {
		if got := texts(t, m, g.ID()); len(got) != 2 || got[0] != "hello bob" || got[1] != "hello alice" {
			t.Errorf("%s holds %q", m.Name, got)
		}
	}
}

// syncAll syncs every member three times over, so that what a member's
// pass publishes (a commit, a Welcome, a commit-log entry) reaches every
// other and is answered within the call.
func syncAll(ms ...*world.Member) {
	for i := 0; i < 3; i++ {
		world.Round(ms...)
	}
}

// TestFiveInstallationsThreeInboxes runs a group of five installations of
// three inboxes through creation, adds, a removal, messages and a name
// change, checking after every step that every active member holds the
// same epoch and epoch authenticator.
func TestFiveInstallationsThreeInboxes(t *testing.T) { eachMode(t, testFiveInstallations) }

func testFiveInstallations(t *testing.T, w *world.World) {
	a1 := newMember(w, "a1", nil)
	a2 := newMember(w, "a2", a1.C.Identity().RecoveryKey)
	b1 := newMember(w, "b1", nil)
	b2 := newMember(w, "b2", b1.C.Identity().RecoveryKey)
	c1 := newMember(w, "c1", nil)
	all := []*world.Member{a1, a2, b1, b2, c1}

	g, err := a1.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "five", Members: []string{b1.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	syncAll(all...)
	world.Agree(t, id, a1, a2, b1, b2)
	if ms, _ := g.Members(w.Ctx); len(ms) != 4 {
		t.Fatalf("after create: %d members, want a1, a2, b1, b2", len(ms))
	}

	if err := b1.Conv(id).AddMembers(w.Ctx, c1.C.InboxID()); !errors.Is(err, client.ErrNotPermitted) {
		t.Fatalf("b1, a plain member, adding c1 = %v; want ErrNotPermitted", err)
	}
	// Roles belong to inboxes: a2 is of the creator's inbox, a super admin.
	if err := a2.Conv(id).AddMembers(w.Ctx, c1.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	syncAll(all...)
	world.Agree(t, id, all...)

	for i, m := range all {
		if _, err := m.Conv(id).Send(w.Ctx, []byte(fmt.Sprintf("message %d from %s", i, m.Name))); err != nil {
			t.Fatalf("%s: send: %v", m.Name, err)
		}
	}
	syncAll(all...)
	for _, m := range all {
		if got := texts(t, m, id); len(got) != len(all) {
			t.Errorf("%s holds %d messages: %q", m.Name, len(got), got)
		}
	}

	if err := g.SetName(w.Ctx, "renamed"); err != nil {
		t.Fatal(err)
	}
	syncAll(all...)
	world.Agree(t, id, all...)
	for _, m := range all {
		if n := m.Info(id).Name; n != "renamed" {
			t.Errorf("%s: name %q", m.Name, n)
		}
	}

	if err := g.RemoveMembers(w.Ctx, b1.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	syncAll(all...)
	world.Agree(t, id, a1, a2, c1)
	for _, m := range []*world.Member{b1, b2} {
		if m.Info(id).Active {
			t.Errorf("%s still active after its inbox was removed", m.Name)
		}
	}
	if _, err := g.Send(w.Ctx, []byte("while b was away")); err != nil {
		t.Fatal(err)
	}

	// Re-adding b: its installations replace their inactive state from the
	// new Welcome (JOIN-042) and keep the messages they held (JOIN-044).
	if err := g.AddMembers(w.Ctx, b1.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	syncAll(all...)
	world.Agree(t, id, all...)
	for _, m := range []*world.Member{b1, b2} {
		if !m.Info(id).Active {
			t.Fatalf("%s not active after the re-add", m.Name)
		}
		got := texts(t, m, id)
		if len(got) != len(all) {
			t.Errorf("%s holds %q after the re-add; want the %d messages it read before", m.Name, got, len(all))
		}
	}
	if _, err := b2.Conv(id).Send(w.Ctx, []byte("b is back")); err != nil {
		t.Fatal(err)
	}
	syncAll(all...)
	world.Agree(t, id, all...)
	for _, m := range all {
		if got := texts(t, m, id); got[len(got)-1] != "b is back" {
			t.Errorf("%s: last message %q", m.Name, got[len(got)-1])
		}
	}
}

// commitRaw builds a commit with the engine alone, bypassing the
// client's own permission checks, and publishes it on the group's topic.
func commitRaw(h *world.Member, id []byte, opts func(v ports.GroupView) ports.CommitOptions) uint64 {
	h.W.T.Helper()
	var commit []byte
	h.Tx(func(tx ports.Tx) error {
		v, err := h.Engine.Group(h.W.Ctx, tx, id)
		if err != nil {
			return err
		}
		out, err := h.Engine.Commit(h.W.Ctx, tx, id, opts(v))
		commit = out.Commit
		return err
	})
	env := &backendpb.ClientEnvelope{TargetTopic: append([]byte{byte(ports.TopicGroupMessages)}, id...),
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: commit}}
	seqs, err := h.Transport.Publish(h.W.Ctx, []*backendpb.ClientEnvelope{env})
	if err != nil {
		h.W.T.Fatal(err)
	}
	return seqs[0]
}

// GMOD-021, COMP-180: a commit that breaks the group's permissions — a
// plain member renaming the group — is recorded as COMMIT_RESULT_INVALID
// by every member, the committer included, and nobody moves to its epoch.
func TestCOMP180_PermissionViolationInvalidForEveryone(t *testing.T) {
	eachMode(t, testPermissionViolation)
}

func testPermissionViolation(t *testing.T, w *world.World) {
	alice, bob := newMember(w, "alice", nil), newMember(w, "bob", nil)
	carol := w.Member("carol", world.Config{})
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g", Members: []string{bob.C.InboxID(), carol.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	all := []*world.Member{alice, bob, carol}
	syncAll(all...)
	world.Agree(t, id, all...)
	before := alice.Info(id).Epoch

	seq := commitRaw(carol, id, func(v ports.GroupView) ports.CommitOptions {
		d, err := metadata.FromExtensions(v.Extensions)
		if err != nil {
			t.Fatal(err)
		}
		ext, err := d.Set(metadata.ComponentName, []byte("carol's now")).Extension()
		if err != nil {
			t.Fatal(err)
		}
		return ports.CommitOptions{GroupContextExtensions: []ports.Extension{ext}}
	})
	syncAll(all...)
	world.Agree(t, id, all...)
	for _, m := range all {
		info := m.Info(id)
		if info.Epoch != before || info.Name != "g" {
			t.Errorf("%s moved to epoch %d, name %q", m.Name, info.Epoch, info.Name)
		}
		entries, err := m.Conv(id).LocalEntries(w.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range entries {
			if e.CommitSequenceID == seq {
				found = e.CommitResult == ports.CommitResultInvalid
			}
		}
		if !found {
			t.Errorf("%s has no COMMIT_RESULT_INVALID entry for commit %d: %+v", m.Name, seq, entries)
		}
	}
	// The group goes on: a valid commit after the invalid one applies.
	if err := g.SetName(w.Ctx, "still alice's"); err != nil {
		t.Fatal(err)
	}
	syncAll(all...)
	world.Agree(t, id, all...)
}

// A DM: both members send and read, the dm id is the same on both sides
// (COMP-021), creating it again returns the same conversation, and both
// members publish the commit log (COMP-090), so each reads not forked.
func TestDM(t *testing.T) { eachMode(t, testDM) }

func testDM(t *testing.T, w *world.World) {
	alice, bob := newMember(w, "alice", nil), newMember(w, "bob", nil)
	dm, err := alice.C.CreateDM(w.Ctx, bob.C.InboxID())
	if err != nil {
		t.Fatal(err)
	}
	again, err := alice.C.CreateDM(w.Ctx, bob.C.InboxID())
	if err != nil || !bytes.Equal(again.ID(), dm.ID()) {
		t.Fatalf("CreateDM again = %x, %v; want %x", again.ID(), err, dm.ID())
	}
	bob.Sync()
	bobDM, err := bob.C.DM(w.Ctx, alice.C.InboxID())
	if err != nil {
		t.Fatalf("bob finds no DM with alice: %v", err)
	}
	if !bytes.Equal(bobDM.ID(), dm.ID()) || alice.Info(dm.ID()).DMID != bob.Info(dm.ID()).DMID {
		t.Fatal("the two sides hold different DMs")
	}
	// A joined conversation starts with unknown consent; bob allows it.
	if c := bob.Info(dm.ID()).Consent; c != ports.ConsentUnknown {
		t.Errorf("joined DM consent = %v, want unknown", c)
	}
	if _, err := bobDM.Send(w.Ctx, []byte("hi alice")); err != nil {
		t.Fatal(err)
	}
	if c := bob.Info(dm.ID()).Consent; c != ports.ConsentAllowed {
		t.Errorf("consent after bob messaged = %v, want allowed", c)
	}
	if _, err := dm.Send(w.Ctx, []byte("hi bob")); err != nil {
		t.Fatal(err)
	}
	syncAll(alice, bob)
	world.Agree(t, dm.ID(), alice, bob)
	// Bob joined at the commit that added him and holds no local entry
	// yet: no shared commit, so unknown until a commit after his join.
	if st, _ := bobDM.ForkState(w.Ctx); st.State != ports.ForkUnknown {
		t.Errorf("bob before any commit after his join: %v, want unknown", st.State)
	}
	if err := bobDM.UpdateKeys(w.Ctx); err != nil {
		t.Fatal(err)
	}
	syncAll(alice, bob)
	world.Agree(t, dm.ID(), alice, bob)
	for _, m := range []*world.Member{alice, bob} {
		if got := texts(t, m, dm.ID()); len(got) != 2 {
			t.Errorf("%s holds %q", m.Name, got)
		}
		st, err := m.Conv(dm.ID()).ForkState(w.Ctx)
		if err != nil || st.State != ports.ForkNotForked {
			t.Errorf("%s fork state = %+v, %v; want not forked", m.Name, st, err)
		}
		if n := len(mustRemote(t, m, dm.ID())); n == 0 {
			t.Errorf("%s accepted no remote entry", m.Name)
		}
	}
	if err := dm.SetName(w.Ctx, "x"); !errors.Is(err, client.ErrNotPermitted) {
		t.Errorf("naming a DM = %v, want ErrNotPermitted", err)
	}
	if err := dm.RemoveMembers(w.Ctx, bob.C.InboxID()); !errors.Is(err, client.ErrNotPermitted) {
		t.Errorf("removing the other DM member = %v, want ErrNotPermitted", err)
	}
	convs, err := bob.C.Conversations(w.Ctx, nil)
	if err != nil || len(convs) != 1 {
		t.Errorf("bob lists %d conversations, %v", len(convs), err)
	}
}

func mustRemote(t *testing.T, m *world.Member, id []byte) []ports.RemoteCommitLogEntry {
	t.Helper()
	r, err := m.Conv(id).RemoteEntries(m.W.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitFor reads m's events until ok accepts one, failing after a minute.
func waitFor(t *testing.T, m *world.Member, what string, ok func(client.Event) bool) client.Event {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case ev, open := <-m.C.Events():
			if !open {
				t.Fatalf("%s: event stream closed waiting for %s", m.Name, what)
			}
			if ok(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("%s: no %s within a minute", m.Name, what)
		}
	}
}

func isMessage(text string) func(client.Event) bool {
	return func(ev client.Event) bool {
		m, ok := ev.(client.MessageEvent)
		return ok && string(m.Message.Content) == text && m.Message.SequenceID > 0
	}
}

// The workers run by themselves once the client starts: the joiner learns
// of the group and its messages from its subscription, without any
// explicit sync; a regroupd restarted mid-conversation is resubscribed
// from the stored cursors, and every message arrives once.
func TestWorkersDeliverAndSurviveRestart(t *testing.T) { eachMode(t, testWorkers) }

func testWorkers(t *testing.T, w *world.World) {
	alice, bob := newMember(w, "alice", nil), newMember(w, "bob", nil)
	for _, m := range []*world.Member{alice, bob} {
		if err := m.C.Start(w.Ctx); err != nil {
			t.Fatal(err)
		}
	}
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	joined := waitFor(t, bob, "joined event", func(ev client.Event) bool {
		j, ok := ev.(client.JoinedEvent)
		return ok && bytes.Equal(j.GroupID, g.ID())
	}).(client.JoinedEvent)
	if joined.AdderInbox != alice.C.InboxID() || !bytes.Equal(joined.AdderInstallation, alice.C.InstallationKey()) {
		t.Errorf("joined event names adder %s %x, want alice (JOIN-025)", joined.AdderInbox, joined.AdderInstallation)
	}
	if _, err := g.Send(w.Ctx, []byte("before restart")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, bob, "message before restart", isMessage("before restart"))
	if w.Regroupd != nil {
		w.Regroupd.Restart()
	}
	// The publish retries until the restarted regroupd answers.
	var sendErr error
	for i := 0; i < 50; i++ {
		if _, sendErr = g.Send(w.Ctx, []byte("after restart")); sendErr == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	waitFor(t, bob, "message after restart", isMessage("after restart"))
	if got := texts(t, bob, g.ID()); len(got) != 2 {
		t.Errorf("bob holds %q; want each message once", got)
	}
}
