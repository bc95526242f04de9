package commitlog_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// The live scenarios run the commit log on groups of the real MLS engine
// (adapters/mls): every epoch authenticator an entry carries comes from the
// engine's key schedule, every commit travels through the delivery service
// on the group's message topic, and each member follows that topic in
// order, as a client does.

// liveMember is one installation: its own SQLite store, engine and log.
type liveMember struct {
	w       *world
	name    string
	inbox   string
	seed    []byte
	path    string
	store   *sqlite.Store
	eng     ports.MLS
	log     *commitlog.Log
	tr      ports.Transport
	events  []commitlog.ForkEvent
	kp      ports.KeyPackageBundle
	pending []byte // this member's commit awaiting its turn on the topic
	// preferOwn makes the member behave like a client with the bug that
	// forks groups: while its own commit is pending it refuses every other
	// commit and merges its own when that arrives, even though it lost.
	preferOwn bool
}

func (w *world) newLiveMember(name string) *liveMember {
	w.t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	_, _ = rand.Read(seed)
	m := &liveMember{w: w, name: name, inbox: "inbox-" + name, seed: seed, path: filepath.Join(w.t.TempDir(), name+".db")}
	m.open()
	cred, err := proto.Marshal(&contentspb.MlsCredential{InboxId: m.inbox})
	if err != nil {
		w.t.Fatal(err)
	}
	now := w.clock.Now()
	m.kp, err = m.eng.CreateKeyPackage(w.ctx, ports.KeyPackageOptions{Credential: cred, SignaturePrivateKey: seed,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour),
		CapabilityExtensions: []uint16{metadata.ExtensionAppDataDictionary}})
	if err != nil {
		w.t.Fatalf("%s: key package: %v", name, err)
	}
	return m
}

// open opens the member's store, engine and log, as a process start does.
func (m *liveMember) open() {
	t := m.w.t
	st, err := sqlite.Open(m.w.ctx, m.path, &sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := mls.New(mls.Options{SignaturePrivateKey: m.seed})
	if err != nil {
		t.Fatal(err)
	}
	priv := ed25519.NewKeyFromSeed(m.seed)
	m.store, m.eng = st, eng
	m.tr = memtransport.New(m.w.svc, &memtransport.Options{InstallationKey: priv.Public().(ed25519.PublicKey)})
	m.log, err = commitlog.New(commitlog.Options{Enabled: true, Store: st, Transport: m.tr, Clock: m.w.clock,
		Views: eng, InstallationKey: priv, OnForked: func(e commitlog.ForkEvent) { m.events = append(m.events, e) }})
	if err != nil {
		t.Fatal(err)
	}
}

func (m *liveMember) restart() {
	if err := m.store.Close(); err != nil {
		m.w.t.Fatal(err)
	}
	m.open()
}

func (m *liveMember) tx(step string, fn func(ctx context.Context, tx ports.Tx) error) {
	m.w.t.Helper()
	if err := m.store.Tx(m.w.ctx, func(tx ports.Tx) error { return fn(m.w.ctx, tx) }); err != nil {
		m.w.t.Fatalf("%s: %s: %v", m.name, step, err)
	}
}

func (m *liveMember) gid() []byte { return m.w.g.keys.GroupID }

// install records the group and starts a membership at anchor, in the
// transaction that installed the engine state.
func (m *liveMember) install(ctx context.Context, tx ports.Tx, view ports.GroupView, anchor uint64) error {
	g := ports.Group{ID: m.gid(), ConversationType: ports.ConversationGroup, Consent: ports.ConsentAllowed,
		Active: true, Cursor: anchor, GroupRoot: m.w.g.root}
	if err := tx.Groups().Insert(ctx, g); err != nil {
		return err
	}
	return m.log.BeginMembership(ctx, tx, m.gid(), view, anchor)
}

// create creates the group, with admins as its super admins.
func (m *liveMember) create(admins ...string) {
	m.w.t.Helper()
	m.w.g.admins = admins
	m.tx("create", func(ctx context.Context, tx ports.Tx) error {
		v, err := m.eng.CreateGroup(ctx, tx, m.gid(), m.kp, m.w.g.extensions())
		if err != nil {
			return err
		}
		return m.install(ctx, tx, v, 0)
	})
}

// commit builds a commit, leaves it pending and publishes it on the
// group's message topic; it returns the Welcome, if any.
func (m *liveMember) commit(opts ports.CommitOptions) []byte {
	m.w.t.Helper()
	var out ports.CommitOutput
	m.tx("commit", func(ctx context.Context, tx ports.Tx) (err error) {
		out, err = m.eng.Commit(ctx, tx, m.gid(), opts)
		return err
	})
	topic := append([]byte{byte(ports.TopicGroupMessages)}, m.gid()...)
	env := &backendpb.ClientEnvelope{TargetTopic: topic, Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: out.Commit}}
	if _, err := m.tr.Publish(m.w.ctx, []*backendpb.ClientEnvelope{env}); err != nil {
		m.w.t.Fatalf("%s: publish commit: %v", m.name, err)
	}
	m.pending = out.Commit
	return out.Welcome
}

// join installs a Welcome whose commit has sequence id anchor.
func (m *liveMember) join(welcome []byte, anchor uint64) {
	m.w.t.Helper()
	rec := ports.KeyPackageRecord{Ref: m.kp.Ref, KeyPackage: m.kp.KeyPackage, InitPrivateKey: m.kp.InitPrivateKey, EncryptionPrivateKey: m.kp.EncryptionPrivateKey}
	m.tx("join", func(ctx context.Context, tx ports.Tx) error {
		st, err := m.eng.StageWelcome(ctx, tx, welcome, rec)
		if err != nil {
			return err
		}
		v, err := m.eng.InstallWelcome(ctx, tx, st.Handle)
		if err != nil {
			return err
		}
		return m.install(ctx, tx, v, anchor)
	})
}

// follow processes every envelope of the group's message topic after the
// stored cursor, in order, and records each commit's outcome in the same
// transaction that changes the engine state and the cursor (FORK-001,
// FORK-002). It returns the sequence ids it processed.
func (m *liveMember) follow() []uint64 {
	m.w.t.Helper()
	var cursor uint64
	m.tx("cursor", func(ctx context.Context, tx ports.Tx) error {
		g, err := tx.Groups().Get(ctx, m.gid())
		cursor = g.Cursor
		return err
	})
	topic := append([]byte{byte(ports.TopicGroupMessages)}, m.gid()...)
	envs, err := m.tr.Query(m.w.ctx, topic, cursor, 100)
	if err != nil {
		m.w.t.Fatalf("%s: query: %v", m.name, err)
	}
	var seqs []uint64
	for _, env := range envs {
		seq, msg := env.GetSequenceId(), env.GetEnvelope().GetGroupMessage()
		m.tx(fmt.Sprintf("process %d", seq), func(ctx context.Context, tx ports.Tx) error {
			before, err := m.eng.Group(ctx, tx, m.gid())
			if err != nil {
				return err
			}
			after, failure, err := m.apply(ctx, tx, msg)
			if err != nil {
				return err
			}
			if failure != nil {
				_, err = m.log.RecordFailure(ctx, tx, commitlog.Failure{GroupID: m.gid(), CommitSequenceID: seq, View: before, Err: failure})
			} else {
				_, err = m.log.RecordMerge(ctx, tx, commitlog.Merge{GroupID: m.gid(), CommitSequenceID: seq, Before: before, After: after, RoleEvidence: true})
			}
			if err != nil {
				return err
			}
			return tx.Groups().Update(ctx, m.gid(), func(g *ports.Group) error {
				g.Cursor, g.Active = seq, after.Active || failure != nil
				return nil
			})
		})
		seqs = append(seqs, seq)
	}
	return seqs
}

// apply merges msg, a commit, and returns the merged state, or returns in
// rejected the terminal failure to record instead; err is a local failure.
func (m *liveMember) apply(ctx context.Context, tx ports.Tx, msg []byte) (merged ports.GroupView, rejected, err error) {
	if m.pending != nil && bytes.Equal(msg, m.pending) {
		m.pending = nil
		v, err := m.eng.MergePending(ctx, tx, m.gid())
		return v, nil, err
	}
	if m.pending != nil && m.preferOwn {
		return ports.GroupView{}, fmt.Errorf("%w: conflicts with this installation's pending commit", ports.ErrInvalid), nil
	}
	p, err := m.eng.Process(ctx, tx, m.gid(), msg)
	switch {
	case errors.Is(err, ports.ErrWrongEpoch) || errors.Is(err, ports.ErrInvalid) || errors.Is(err, ports.ErrUndecryptable):
		return ports.GroupView{}, err, nil
	case err != nil:
		return ports.GroupView{}, nil, err
	case p.Kind != ports.ProcessedCommit:
		return ports.GroupView{}, nil, fmt.Errorf("expected a commit, got kind %d", p.Kind)
	}
	if m.pending != nil {
		// Another commit won this epoch: the pending one will arrive for an
		// older epoch, and the engine will reject it.
		if err := m.eng.ClearPending(ctx, tx, m.gid()); err != nil {
			return ports.GroupView{}, nil, err
		}
		m.pending = nil
	}
	v, err := m.eng.MergeStaged(ctx, tx, m.gid())
	return v, nil, err
}

func (m *liveMember) read() commitlog.ReadReport {
	m.w.t.Helper()
	rep, err := m.log.Read(m.w.ctx, m.gid())
	if err != nil {
		m.w.t.Fatalf("%s: read: %v", m.name, err)
	}
	return rep
}

func (m *liveMember) publish() commitlog.PublishReport {
	m.w.t.Helper()
	rep, err := m.log.Publish(m.w.ctx, m.gid())
	if err != nil {
		m.w.t.Fatalf("%s: publish: %v", m.name, err)
	}
	return rep
}

func (m *liveMember) wantFork(want ports.ForkState) {
	m.w.t.Helper()
	got, err := m.log.ForkState(m.w.ctx, m.gid())
	if err != nil {
		m.w.t.Fatal(err)
	}
	if got != want {
		m.w.t.Fatalf("%s: fork state %v, want %v (discarded: %v)", m.name, got, want, m.log.Counters())
	}
}

// liveGroup has a create the group with itself as super admin and add b
// and c in one commit; everyone follows the topic.
func liveGroup(t *testing.T) (*world, *liveMember, *liveMember, *liveMember) {
	w := newWorld(t, ports.ConversationGroup)
	a, b, c := w.newLiveMember("a"), w.newLiveMember("b"), w.newLiveMember("c")
	a.create(a.inbox)
	welcome := a.commit(ports.CommitOptions{Add: [][]byte{b.kp.KeyPackage, c.kp.KeyPackage}})
	added := a.follow()
	if len(added) != 1 {
		t.Fatalf("a processed %v, want its add commit", added)
	}
	b.join(welcome, added[0])
	c.join(welcome, added[0])
	return w, a, b, c
}

// Live, no fork (FORK-001, FORK-030, FORK-083): commits by every member,
// including a race one of them loses, leave every member not forked once
// the super admin has published, and the engine's epoch authenticators are
// what the entries compare.
func TestLiveScenarioNoFork(t *testing.T) {
	t.Parallel()
	_, a, b, c := liveGroup(t)
	all := []*liveMember{a, b, c}
	for _, committer := range []*liveMember{b, c, a} {
		committer.commit(ports.CommitOptions{ForcePath: true})
		for _, m := range all {
			m.follow()
		}
	}
	// b and c race for one epoch; c's commit arrives second and loses.
	b.commit(ports.CommitOptions{ForcePath: true})
	c.commit(ports.CommitOptions{ForcePath: true})
	for _, m := range all {
		m.follow()
	}
	if rep := a.publish(); rep.Published != 6 {
		t.Fatalf("a published %d entries, want 6 (the add, three commits, the race's winner and loser)", rep.Published)
	}
	for _, m := range all {
		rep := m.read()
		if rep.Accepted != 6 {
			t.Fatalf("%s accepted %d entries, want 6 (%v)", m.name, rep.Accepted, m.log.Counters())
		}
		m.wantFork(ports.ForkNotForked)
		if len(m.events) != 0 {
			t.Fatalf("%s: fork event without a fork", m.name)
		}
	}
	loser, err := c.log.LocalEntries(c.w.ctx, c.gid())
	if err != nil {
		t.Fatal(err)
	}
	if last := loser[len(loser)-1]; last.CommitResult != ports.CommitResultWrongEpoch {
		t.Fatalf("c recorded its losing commit as %v, want a WrongEpoch rejection", last.CommitResult)
	}
}

// Live fork (FORK-041, FORK-083, COMP-095): b merges its own commit after
// losing a race, so its engine state leaves the group's. The super admin's
// log shows the commit b applied as rejected: b reads forked, with one
// event naming that commit and both real authenticators, c stays not
// forked, and b's fork state survives a restart.
func TestLiveScenarioForkedMemberDetectsIt(t *testing.T) {
	t.Parallel()
	_, a, b, c := liveGroup(t)
	all := []*liveMember{a, b, c}
	b.preferOwn = true
	c.commit(ports.CommitOptions{ForcePath: true})
	b.commit(ports.CommitOptions{ForcePath: true})
	for _, m := range all {
		m.follow()
	}
	var aView, bView ports.GroupView
	a.tx("view", func(ctx context.Context, tx ports.Tx) (err error) { aView, err = a.eng.Group(ctx, tx, a.gid()); return })
	b.tx("view", func(ctx context.Context, tx ports.Tx) (err error) { bView, err = b.eng.Group(ctx, tx, b.gid()); return })
	if aView.Epoch != bView.Epoch || bytes.Equal(aView.EpochAuthenticator, bView.EpochAuthenticator) {
		t.Fatalf("b did not fork: epochs %d and %d, authenticators equal: %v", aView.Epoch, bView.Epoch, bytes.Equal(aView.EpochAuthenticator, bView.EpochAuthenticator))
	}
	a.publish()
	if rep := b.read(); rep.ForkState != ports.ForkForked {
		t.Fatalf("b: %+v, discarded %v", rep, b.log.Counters())
	}
	if len(b.events) != 1 || !bytes.Equal(b.events[0].Local, bView.EpochAuthenticator) || !bytes.Equal(b.events[0].Remote, aView.EpochAuthenticator) {
		t.Fatalf("b's fork events %+v, want one with its own and the group's authenticator", b.events)
	}
	c.read()
	c.wantFork(ports.ForkNotForked)
	a.read()
	a.wantFork(ports.ForkNotForked)
	b.restart()
	b.wantFork(ports.ForkForked)
	// Sticky: more entries that agree do not clear it (FORK-041).
	a.commit(ports.CommitOptions{ForcePath: true})
	a.follow()
	a.publish()
	b.read()
	b.wantFork(ports.ForkForked)
}
