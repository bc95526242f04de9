package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// world is a set of clients on one delivery service, each with its own
// store. Its mode picks the deployment: "embedded" (the embedded
// injector: SQLite stores, an in-process delivery service on SQLite),
// "sqlite" (the networked injector: SQLite stores, a regroupd process on
// SQLite over gRPC) or "postgres" (PostgreSQL stores, a regroupd process
// on PostgreSQL).
type world struct {
	t    testing.TB
	ctx  context.Context
	mode string
	dir  string
	svc  *delivery.Service
	rd   *testenv.Regroupd
	dsn  string
}

// modes are the deployments every end-to-end case runs in.
var modes = []string{"embedded", "sqlite", "postgres"}

// eachMode runs fn as a subtest in every mode.
func eachMode(t *testing.T, fn func(t *testing.T, w *world)) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { fn(t, newWorld(t, mode)) })
	}
}

func newWorld(t testing.TB, mode string) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	w := &world{t: t, ctx: ctx, mode: mode, dir: t.TempDir()}
	switch mode {
	case "embedded":
		svc, cleanup, err := regroup.OpenEmbeddedService(ctx, filepath.Join(w.dir, "delivery.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cleanup)
		w.svc = svc
	case "sqlite":
		w.rd = testenv.StartRegroupd(t, "sqlite")
	case "postgres":
		w.dsn = testenv.PostgresDSN(t)
		w.rd = testenv.StartRegroupd(t, "postgres")
	}
	return w
}

// member is one installation in the world.
type member struct {
	w    *world
	name string
	c    *client.Client
	// close closes the client and everything its injector opened; it runs
	// once, by the test or at its end.
	close func()
}

// newMember makes an installation: of a new inbox, or of the inbox whose
// recovery key is given. The injector publishes its key package.
func (w *world) newMember(name string, recovery ed25519.PrivateKey) *member {
	w.t.Helper()
	return w.newMemberWith(name, recovery, nil)
}

// newMemberWith is newMember with client options.
func (w *world) newMemberWith(name string, recovery ed25519.PrivateKey, opts *client.Options) *member {
	w.t.Helper()
	id := regroup.IdentityConfig{RecoveryKey: recovery}
	var c *client.Client
	var cleanup func()
	var err error
	switch w.mode {
	case "embedded":
		c, cleanup, err = regroup.NewEmbedded(w.ctx, regroup.EmbeddedConfig{Dir: filepath.Join(w.dir, name), Service: w.svc,
			Identity: id, Options: opts})
	default:
		cfg := w.networked(name, id)
		cfg.Options = opts
		c, cleanup, err = regroup.NewNetworked(w.ctx, cfg)
	}
	if err != nil {
		w.t.Fatalf("%s: %v", name, err)
	}
	close := sync.OnceFunc(cleanup)
	w.t.Cleanup(close)
	return &member{w: w, name: name, c: c, close: close}
}

func (w *world) networked(name string, id regroup.IdentityConfig) regroup.NetworkedConfig {
	cfg := regroup.NetworkedConfig{Server: w.rd.Addr, Identity: id}
	if w.mode == "postgres" {
		cfg.PostgresDSN, cfg.PostgresSchema = w.dsn, testenv.FreshSchema(w.t, w.dsn)
	} else {
		cfg.SQLitePath = filepath.Join(w.dir, name, "client.db")
	}
	return cfg
}

func (m *member) sync() {
	m.w.t.Helper()
	if err := m.c.SyncAll(m.w.ctx); err != nil {
		m.w.t.Fatalf("%s: sync: %v", m.name, err)
	}
}

func (m *member) conv(id []byte) *client.Conversation {
	m.w.t.Helper()
	cv, err := m.c.Conversation(m.w.ctx, id)
	if err != nil {
		m.w.t.Fatalf("%s: conversation %x: %v", m.name, id, err)
	}
	return cv
}

func (m *member) info(id []byte) client.Info {
	m.w.t.Helper()
	info, err := m.conv(id).Info(m.w.ctx)
	if err != nil {
		m.w.t.Fatalf("%s: info: %v", m.name, err)
	}
	return info
}

// agree checks that every member holds the group at the same epoch and
// epoch authenticator.
func agree(t *testing.T, id []byte, ms ...*member) {
	t.Helper()
	first := ms[0].info(id)
	for _, m := range ms[1:] {
		got := m.info(id)
		if got.Epoch != first.Epoch || !bytes.Equal(got.EpochAuthenticator, first.EpochAuthenticator) {
			t.Fatalf("%s at epoch %d (%x), %s at epoch %d (%x)", ms[0].name, first.Epoch, first.EpochAuthenticator[:4],
				m.name, got.Epoch, got.EpochAuthenticator[:4])
		}
	}
}

func texts(t *testing.T, m *member, id []byte) []string {
	t.Helper()
	msgs, err := m.conv(id).Messages(m.w.ctx, 0, 0)
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

func testCreateAddSendReceive(t *testing.T, w *world) {
	alice, bob := w.newMember("alice", nil), w.newMember("bob", nil)
	g, err := alice.c.CreateGroup(w.ctx, client.GroupOptions{Name: "ops", Members: []string{bob.c.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	bob.sync()
	agree(t, g.ID(), alice, bob)
	if _, err := g.Send(w.ctx, []byte("hello bob")); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.conv(g.ID()).Send(w.ctx, []byte("hello alice")); err != nil {
		t.Fatal(err)
	}
	alice.sync()
	bob.sync()
	for _, m := range []*member{alice, bob} {
		if got := texts(t, m, g.ID()); len(got) != 2 || got[0] != "hello bob" || got[1] != "hello alice" {
			t.Errorf("%s holds %q", m.name, got)
		}
	}
}

// syncAll syncs every member until a pass changes nothing anyone holds:
// each member processes its Welcomes, its group topics and its commit
// logs.
func syncAll(ms ...*member) {
	for i := 0; i < 3; i++ {
		for _, m := range ms {
			m.sync()
		}
	}
}

// TestFiveInstallationsThreeInboxes runs a group of five installations of
// three inboxes through creation, adds, a removal, messages and a name
// change, checking after every step that every active member holds the
// same epoch and epoch authenticator.
func TestFiveInstallationsThreeInboxes(t *testing.T) { eachMode(t, testFiveInstallations) }

func testFiveInstallations(t *testing.T, w *world) {
	a1 := w.newMember("a1", nil)
	a2 := w.newMember("a2", a1.c.Identity().RecoveryKey)
	b1 := w.newMember("b1", nil)
	b2 := w.newMember("b2", b1.c.Identity().RecoveryKey)
	c1 := w.newMember("c1", nil)
	all := []*member{a1, a2, b1, b2, c1}

	g, err := a1.c.CreateGroup(w.ctx, client.GroupOptions{Name: "five", Members: []string{b1.c.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	syncAll(all...)
	agree(t, id, a1, a2, b1, b2)
	if ms, _ := g.Members(w.ctx); len(ms) != 4 {
		t.Fatalf("after create: %d members, want a1, a2, b1, b2", len(ms))
	}

	if err := b1.conv(id).AddMembers(w.ctx, c1.c.InboxID()); !errors.Is(err, client.ErrNotPermitted) {
		t.Fatalf("b1, a plain member, adding c1 = %v; want ErrNotPermitted", err)
	}
	// Roles belong to inboxes: a2 is of the creator's inbox, a super admin.
	if err := a2.conv(id).AddMembers(w.ctx, c1.c.InboxID()); err != nil {
		t.Fatal(err)
	}
	syncAll(all...)
	agree(t, id, all...)

	for i, m := range all {
		if _, err := m.conv(id).Send(w.ctx, []byte(fmt.Sprintf("message %d from %s", i, m.name))); err != nil {
			t.Fatalf("%s: send: %v", m.name, err)
		}
	}
	syncAll(all...)
	for _, m := range all {
		if got := texts(t, m, id); len(got) != len(all) {
			t.Errorf("%s holds %d messages: %q", m.name, len(got), got)
		}
	}

	if err := g.SetName(w.ctx, "renamed"); err != nil {
		t.Fatal(err)
	}
	syncAll(all...)
	agree(t, id, all...)
	for _, m := range all {
		if n := m.info(id).Name; n != "renamed" {
			t.Errorf("%s: name %q", m.name, n)
		}
	}

	if err := g.RemoveMembers(w.ctx, b1.c.InboxID()); err != nil {
		t.Fatal(err)
	}
	syncAll(all...)
	agree(t, id, a1, a2, c1)
	for _, m := range []*member{b1, b2} {
		if m.info(id).Active {
			t.Errorf("%s still active after its inbox was removed", m.name)
		}
	}
	if _, err := g.Send(w.ctx, []byte("while b was away")); err != nil {
		t.Fatal(err)
	}

	// Re-adding b: its installations replace their inactive state from the
	// new Welcome (JOIN-042) and keep the messages they held (JOIN-044).
	if err := g.AddMembers(w.ctx, b1.c.InboxID()); err != nil {
		t.Fatal(err)
	}
	syncAll(all...)
	agree(t, id, all...)
	for _, m := range []*member{b1, b2} {
		if !m.info(id).Active {
			t.Fatalf("%s not active after the re-add", m.name)
		}
		got := texts(t, m, id)
		if len(got) != len(all) {
			t.Errorf("%s holds %q after the re-add; want the %d messages it read before", m.name, got, len(all))
		}
	}
	if _, err := b2.conv(id).Send(w.ctx, []byte("b is back")); err != nil {
		t.Fatal(err)
	}
	syncAll(all...)
	agree(t, id, all...)
	for _, m := range all {
		if got := texts(t, m, id); got[len(got)-1] != "b is back" {
			t.Errorf("%s: last message %q", m.name, got[len(got)-1])
		}
	}
}

// handles is a member built from the providers by hand, so that a test
// can reach its engine and store beside its client.
type handles struct {
	*member
	engine *mls.Engine
	store  ports.Store
	tr     ports.Transport
}

func (w *world) newHandles(name string) *handles {
	return w.newHandlesWith(name, nil, nil)
}

// newHandlesWith is newHandles with a clock and a wrapper around the
// member's transport (each may be nil).
func (w *world) newHandlesWith(name string, clk ports.Clock, wrap func(ports.Transport) ports.Transport) *handles {
	w.t.Helper()
	ctx := w.ctx
	clk = regroup.ProvideClock(clk)
	var store ports.Store
	var cleanup func()
	var err error
	switch w.mode {
	case "postgres":
		store, cleanup, err = regroup.OpenPostgresStore(ctx, w.dsn, testenv.FreshSchema(w.t, w.dsn))
	default:
		store, cleanup, err = regroup.OpenSQLiteStore(ctx, filepath.Join(w.dir, name, "client.db"))
	}
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(cleanup)
	in, err := regroup.ProvideInstallation(ctx, store, clk, regroup.IdentityConfig{})
	if err != nil {
		w.t.Fatal(err)
	}
	eng, err := regroup.ProvideEngine(in)
	if err != nil {
		w.t.Fatal(err)
	}
	var tr ports.Transport
	if w.mode == "embedded" {
		tr = regroup.ProvideMemTransport(w.svc, in)
	} else {
		var closeTr func()
		if tr, closeTr, err = regroup.DialTransport(w.rd.Addr, nil, in); err != nil {
			w.t.Fatal(err)
		}
		w.t.Cleanup(closeTr)
	}
	if wrap != nil {
		tr = wrap(tr)
	}
	id, err := regroup.ProvideResolver(store, tr, clk)
	if err != nil {
		w.t.Fatal(err)
	}
	reg, err := regroup.ProvideAlgorithms()
	if err != nil {
		w.t.Fatal(err)
	}
	c, cleanup2, err := regroup.ProvideClient(ctx, regroup.ProvideDeps(store, eng, tr, id, clk, reg, in, nil), nil)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(cleanup2)
	return &handles{member: &member{w: w, name: name, c: c}, engine: eng, store: store, tr: tr}
}

// commitRaw builds a commit with the engine alone, bypassing the
// client's own permission checks, and publishes it on the group's topic.
func (h *handles) commitRaw(id []byte, opts func(v ports.GroupView) ports.CommitOptions) uint64 {
	h.w.t.Helper()
	var commit []byte
	err := h.store.Tx(h.w.ctx, func(tx ports.Tx) error {
		v, err := h.engine.Group(h.w.ctx, tx, id)
		if err != nil {
			return err
		}
		out, err := h.engine.Commit(h.w.ctx, tx, id, opts(v))
		commit = out.Commit
		return err
	})
	if err != nil {
		h.w.t.Fatalf("%s: raw commit: %v", h.name, err)
	}
	env := &backendpb.ClientEnvelope{TargetTopic: append([]byte{byte(ports.TopicGroupMessages)}, id...),
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: commit}}
	seqs, err := h.tr.Publish(h.w.ctx, []*backendpb.ClientEnvelope{env})
	if err != nil {
		h.w.t.Fatal(err)
	}
	return seqs[0]
}

// GMOD-021, COMP-180: a commit that breaks the group's permissions — a
// plain member renaming the group — is recorded as COMMIT_RESULT_INVALID
// by every member, the committer included, and nobody moves to its epoch.
func TestCOMP180_PermissionViolationInvalidForEveryone(t *testing.T) {
	eachMode(t, testPermissionViolation)
}

func testPermissionViolation(t *testing.T, w *world) {
	alice, bob := w.newMember("alice", nil), w.newMember("bob", nil)
	carol := w.newHandles("carol")
	g, err := alice.c.CreateGroup(w.ctx, client.GroupOptions{Name: "g", Members: []string{bob.c.InboxID(), carol.c.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	all := []*member{alice, bob, carol.member}
	syncAll(all...)
	agree(t, id, all...)
	before := alice.info(id).Epoch

	seq := carol.commitRaw(id, func(v ports.GroupView) ports.CommitOptions {
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
	agree(t, id, all...)
	for _, m := range all {
		info := m.info(id)
		if info.Epoch != before || info.Name != "g" {
			t.Errorf("%s moved to epoch %d, name %q", m.name, info.Epoch, info.Name)
		}
		entries, err := m.conv(id).LocalEntries(w.ctx)
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
			t.Errorf("%s has no COMMIT_RESULT_INVALID entry for commit %d: %+v", m.name, seq, entries)
		}
	}
	// The group goes on: a valid commit after the invalid one applies.
	if err := g.SetName(w.ctx, "still alice's"); err != nil {
		t.Fatal(err)
	}
	syncAll(all...)
	agree(t, id, all...)
}

// A DM: both members send and read, the dm id is the same on both sides
// (COMP-021), creating it again returns the same conversation, and both
// members publish the commit log (COMP-090), so each reads not forked.
func TestDM(t *testing.T) { eachMode(t, testDM) }

func testDM(t *testing.T, w *world) {
	alice, bob := w.newMember("alice", nil), w.newMember("bob", nil)
	dm, err := alice.c.CreateDM(w.ctx, bob.c.InboxID())
	if err != nil {
		t.Fatal(err)
	}
	again, err := alice.c.CreateDM(w.ctx, bob.c.InboxID())
	if err != nil || !bytes.Equal(again.ID(), dm.ID()) {
		t.Fatalf("CreateDM again = %x, %v; want %x", again.ID(), err, dm.ID())
	}
	bob.sync()
	bobDM, err := bob.c.DM(w.ctx, alice.c.InboxID())
	if err != nil {
		t.Fatalf("bob finds no DM with alice: %v", err)
	}
	if !bytes.Equal(bobDM.ID(), dm.ID()) || alice.info(dm.ID()).DMID != bob.info(dm.ID()).DMID {
		t.Fatal("the two sides hold different DMs")
	}
	// A joined conversation starts with unknown consent; bob allows it.
	if c := bob.info(dm.ID()).Consent; c != ports.ConsentUnknown {
		t.Errorf("joined DM consent = %v, want unknown", c)
	}
	if _, err := bobDM.Send(w.ctx, []byte("hi alice")); err != nil {
		t.Fatal(err)
	}
	if c := bob.info(dm.ID()).Consent; c != ports.ConsentAllowed {
		t.Errorf("consent after bob messaged = %v, want allowed", c)
	}
	if _, err := dm.Send(w.ctx, []byte("hi bob")); err != nil {
		t.Fatal(err)
	}
	syncAll(alice, bob)
	agree(t, dm.ID(), alice, bob)
	// Bob joined at the commit that added him and holds no local entry
	// yet: no shared commit, so unknown until a commit after his join.
	if st, _ := bobDM.ForkState(w.ctx); st.State != ports.ForkUnknown {
		t.Errorf("bob before any commit after his join: %v, want unknown", st.State)
	}
	if err := bobDM.UpdateKeys(w.ctx); err != nil {
		t.Fatal(err)
	}
	syncAll(alice, bob)
	agree(t, dm.ID(), alice, bob)
	for _, m := range []*member{alice, bob} {
		if got := texts(t, m, dm.ID()); len(got) != 2 {
			t.Errorf("%s holds %q", m.name, got)
		}
		st, err := m.conv(dm.ID()).ForkState(w.ctx)
		if err != nil || st.State != ports.ForkNotForked {
			t.Errorf("%s fork state = %+v, %v; want not forked", m.name, st, err)
		}
		if n := len(mustRemote(t, m, dm.ID())); n == 0 {
			t.Errorf("%s accepted no remote entry", m.name)
		}
	}
	if err := dm.SetName(w.ctx, "x"); !errors.Is(err, client.ErrNotPermitted) {
		t.Errorf("naming a DM = %v, want ErrNotPermitted", err)
	}
	if err := dm.RemoveMembers(w.ctx, bob.c.InboxID()); !errors.Is(err, client.ErrNotPermitted) {
		t.Errorf("removing the other DM member = %v, want ErrNotPermitted", err)
	}
	convs, err := bob.c.Conversations(w.ctx, nil)
	if err != nil || len(convs) != 1 {
		t.Errorf("bob lists %d conversations, %v", len(convs), err)
	}
}

func mustRemote(t *testing.T, m *member, id []byte) []ports.RemoteCommitLogEntry {
	t.Helper()
	r, err := m.conv(id).RemoteEntries(m.w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitFor reads m's events until ok accepts one, failing after a minute.
func waitFor(t *testing.T, m *member, what string, ok func(client.Event) bool) client.Event {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case ev, open := <-m.c.Events():
			if !open {
				t.Fatalf("%s: event stream closed waiting for %s", m.name, what)
			}
			if ok(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("%s: no %s within a minute", m.name, what)
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

func testWorkers(t *testing.T, w *world) {
	alice, bob := w.newMember("alice", nil), w.newMember("bob", nil)
	for _, m := range []*member{alice, bob} {
		if err := m.c.Start(w.ctx); err != nil {
			t.Fatal(err)
		}
	}
	g, err := alice.c.CreateGroup(w.ctx, client.GroupOptions{Members: []string{bob.c.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	joined := waitFor(t, bob, "joined event", func(ev client.Event) bool {
		j, ok := ev.(client.JoinedEvent)
		return ok && bytes.Equal(j.GroupID, g.ID())
	}).(client.JoinedEvent)
	if joined.AdderInbox != alice.c.InboxID() || !bytes.Equal(joined.AdderInstallation, alice.c.InstallationKey()) {
		t.Errorf("joined event names adder %s %x, want alice (JOIN-025)", joined.AdderInbox, joined.AdderInstallation)
	}
	if _, err := g.Send(w.ctx, []byte("before restart")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, bob, "message before restart", isMessage("before restart"))
	if w.rd != nil {
		w.rd.Restart()
	}
	// The publish retries until the restarted regroupd answers.
	var sendErr error
	for i := 0; i < 50; i++ {
		if _, sendErr = g.Send(w.ctx, []byte("after restart")); sendErr == nil {
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
