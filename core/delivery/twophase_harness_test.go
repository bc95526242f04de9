package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// The two-phase rule tests run real clients (core/client on the real MLS
// engine) in process against a delivery service with commit acceptance
// (the real public-group validator of adapters/mls) on a real store
// (adapters/deliverydb), on SQLite and, with REGROUP_POSTGRES_DSN, on
// PostgreSQL; the service's clock is fake, so every timer is driven by
// the test.

// storeModes are the databases the rules are proven on.
var storeModes = []string{"sqlite", "postgres"}

const testGrace = 10 * time.Second
const testExpiry = time.Hour

type twoPhase struct {
	*world.World
	t     *testing.T
	mode  string
	dir   string
	svc   *delivery.Service
	store *deliverydb.Store
	clk   *clock.Fake
	obs   *events
	// schema is the PostgreSQL schema, empty on SQLite.
	schema string
	// alice (a super admin of every group), bob and carol are the
	// members of each group the harness makes.
	alice, bob, carol *world.Member
}

// events counts what the service observed.
type events struct {
	refused  []string
	accepted map[string]int
	reports  map[string]int
}

func (e *events) Published([]string, time.Duration) {}
func (e *events) Refused(kind, reason string)       { e.refused = append(e.refused, reason) }
func (e *events) Delivered(time.Duration)           {}
func (e *events) Acceptance(ev string)              { e.accepted[ev]++ }
func (e *events) Reported(verdict, reason string)   { e.reports[verdict+"/"+reason]++ }
func (e *events) Confirmation(d time.Duration)      {}
func newEvents() *events                            { return &events{accepted: map[string]int{}, reports: map[string]int{}} }
func (p *twoPhase) count(ev string) int             { return p.obs.accepted[ev] }
func (p *twoPhase) topic(kind ports.TopicKind, id []byte) []byte {
	return append([]byte{byte(kind)}, id...)
}

func eachStore(t *testing.T, fn func(t *testing.T, mode string)) {
	for _, mode := range storeModes {
		t.Run(mode, func(t *testing.T) {
			if mode == "postgres" && os.Getenv("REGROUP_POSTGRES_DSN") == "" {
				t.Skip("REGROUP_POSTGRES_DSN unset: set it to prove two phases on PostgreSQL")
			}
			fn(t, mode)
		})
	}
}

func newTwoPhase(t *testing.T, mode string) *twoPhase {
	t.Helper()
	p := &twoPhase{t: t, mode: mode, dir: t.TempDir(), clk: clock.NewFake(time.Now()), obs: newEvents()}
	if mode == "postgres" {
		p.schema = deliverydb.FreshSchemaName()
	}
	p.store = p.openStore()
	t.Cleanup(func() {
		if p.schema != "" {
			_ = p.store.DropSchema(context.Background())
		}
		p.store.Close()
	})
	p.svc = p.newService(p.store)
	p.World = world.NewEmbeddedOn(t, p.svc, 4*time.Minute)
	p.alice, p.bob, p.carol = p.Member("alice", world.Config{}), p.Member("bob", world.Config{}), p.Member("carol", world.Config{})
	return p
}

// use makes the harness fail t, a subtest, with fresh event counts and
// fresh members: the clients repair by themselves a group a rule test
// left them stuck in (a resync that waits for witnesses on the fake
// clock), which must not reach the next rule's syncs.
func (p *twoPhase) use(t *testing.T, n int) {
	p.t, p.World.T = t, t
	*p.obs = *newEvents()
	if n > 0 {
		sfx := fmt.Sprint(n)
		p.alice, p.bob, p.carol = p.Member("alice"+sfx, world.Config{}), p.Member("bob"+sfx, world.Config{}), p.Member("carol"+sfx, world.Config{})
	}
}

func (p *twoPhase) openStore() *deliverydb.Store {
	p.t.Helper()
	var s *deliverydb.Store
	var err error
	if p.mode == "postgres" {
		s, err = deliverydb.OpenPostgres(context.Background(), os.Getenv("REGROUP_POSTGRES_DSN"), &deliverydb.Options{Schema: p.schema, MaxOpenConns: 4})
	} else {
		s, err = deliverydb.OpenSQLite(context.Background(), filepath.Join(p.dir, "delivery.db"), nil)
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

func (p *twoPhase) newService(store *deliverydb.Store) *delivery.Service {
	return delivery.New(store, &delivery.Options{Clock: p.clk, Observer: p.obs,
		PublicGroups: mls.NewPublicGroups(&mls.PublicOptions{CacheBytes: -1}),
		TwoPhase:     &delivery.TwoPhaseOptions{GracePeriod: testGrace, Expiry: testExpiry, OwnerJoinLimit: testOwnerJoinLimit}})
}

// group makes alice (the creator, a super admin) and bob and carol
// (members) and their registered group.
func (p *twoPhase) group() (alice, bob, carol *world.Member, id []byte) {
	p.t.Helper()
	alice, bob, carol = p.alice, p.bob, p.carol
	g, err := alice.C.CreateGroup(p.Ctx, client.GroupOptions{Name: "g", Members: []string{bob.C.InboxID(), carol.C.InboxID()}})
	if err != nil {
		p.t.Fatal(err)
	}
	id = g.ID()
	if _, err := p.store.PublicState(p.Ctx, id); errors.Is(err, ports.ErrNotFound) {
		p.publish(alice, id, p.groupInfo(alice, id))
	}
	world.SyncAll(alice, bob, carol)
	for _, m := range []*world.Member{alice, bob, carol} {
		if err := m.Conv(id).SetConsent(p.Ctx, ports.ConsentAllowed); err != nil {
			p.t.Fatal(err)
		}
	}
	return alice, bob, carol, id
}

func (p *twoPhase) groupInfo(m *world.Member, id []byte) []byte {
	var gi []byte
	m.Tx(func(tx ports.Tx) (err error) {
		gi, err = m.Engine.GroupInfo(p.Ctx, tx, id)
		return err
	})
	return gi
}

// commit builds the member's commit with an UpdatePath on its engine
// and clears it there: its bytes and the GroupInfo of the epoch it leads
// to.
func (p *twoPhase) commit(m *world.Member, id []byte, opts ports.CommitOptions) (commit, gi []byte) {
	p.t.Helper()
	opts.ForcePath = true
	m.Tx(func(tx ports.Tx) error {
		out, err := m.Engine.Commit(p.Ctx, tx, id, opts)
		if err != nil {
			return err
		}
		commit, gi = out.Commit, out.GroupInfo
		return m.Engine.ClearPending(p.Ctx, tx, id)
	})
	return commit, gi
}

// message encrypts an application message of the member's epoch; epoch,
// when not 0, is written over the epoch its framing names in the clear.
func (p *twoPhase) message(m *world.Member, id []byte, epoch uint64) []byte {
	p.t.Helper()
	var msg []byte
	m.Tx(func(tx ports.Tx) (err error) {
		msg, err = m.Engine.Encrypt(p.Ctx, tx, id, []byte("hello"), nil)
		return err
	})
	if epoch != 0 {
		at := 4 + 1 + len(id) // version, wire format, group_id<V> with a 1-byte length
		for i := 0; i < 8; i++ {
			msg[at+i] = byte(epoch >> (56 - 8*i))
		}
	}
	return msg
}

// publish publishes MLS messages of the group as m: GroupInfos on its
// GroupInfo topic, the others on its group topic.
func (p *twoPhase) publish(m *world.Member, id []byte, msgs ...[]byte) []uint64 {
	p.t.Helper()
	ids, err := p.tryPublish(m, id, msgs...)
	if err != nil {
		p.t.Fatalf("%s publishes: %v", m.Name, err)
	}
	return ids
}

func (p *twoPhase) tryPublish(m *world.Member, id []byte, msgs ...[]byte) ([]uint64, error) {
	var envs []*backendpb.ClientEnvelope
	for _, b := range msgs {
		kind := ports.TopicGroupMessages
		if len(b) >= 4 && b[3] == 4 {
			kind = ports.TopicGroupInfo
		}
		envs = append(envs, &backendpb.ClientEnvelope{TargetTopic: p.topic(kind, id), Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: b}})
	}
	return m.Transport.Publish(p.Ctx, envs)
}

func (p *twoPhase) witness(m *world.Member) ports.Witness {
	w, ok := m.Transport.(ports.Witness)
	if !ok {
		p.t.Fatalf("%s's transport %T is no witness", m.Name, m.Transport)
	}
	return w
}

func (p *twoPhase) report(m *world.Member, id []byte, seq uint64, v ports.Verdict, reason string) error {
	return p.witness(m).Report(p.Ctx, ports.Report{GroupID: id, CommitSeq: seq, Verdict: v, Reason: reason})
}

// topicEnvelopes reads the group topic after seq.
func (p *twoPhase) topicEnvelopes(m *world.Member, kind ports.TopicKind, id []byte, after uint64) []*backendpb.OriginatorEnvelope {
	p.t.Helper()
	es, err := m.Transport.Query(p.Ctx, p.topic(kind, id), after, 1000)
	if err != nil {
		p.t.Fatal(err)
	}
	return es
}

// notices returns the acceptance notices on the group topic after seq.
func (p *twoPhase) notices(m *world.Member, id []byte, after uint64) []*backendpb.AcceptanceNotice {
	var out []*backendpb.AcceptanceNotice
	for _, e := range p.topicEnvelopes(m, ports.TopicGroupMessages, id, after) {
		if n := e.GetEnvelope().GetAcceptanceNotice(); n != nil {
			out = append(out, n)
		}
	}
	return out
}

func outcomes(ns []*backendpb.AcceptanceNotice) []backendpb.AcceptanceNotice_Outcome {
	var out []backendpb.AcceptanceNotice_Outcome
	for _, n := range ns {
		out = append(out, n.GetOutcome())
	}
	return out
}

func (p *twoPhase) epoch(id []byte) uint64 {
	p.t.Helper()
	st, err := p.store.PublicState(p.Ctx, id)
	if err != nil {
		p.t.Fatal(err)
	}
	return st.Epoch
}

func (p *twoPhase) pending(id []byte) (ports.PendingCommit, bool) {
	p.t.Helper()
	pc, err := p.store.PendingCommit(p.Ctx, id)
	if errors.Is(err, ports.ErrNotFound) {
		return pc, false
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return pc, true
}

func (p *twoPhase) quarantined(id []byte) []string {
	p.t.Helper()
	q, err := p.store.Quarantined(p.Ctx, id)
	if err != nil {
		p.t.Fatal(err)
	}
	return q
}

// decide advances the service's clock by d and decides what is due.
func (p *twoPhase) decide(d time.Duration) {
	p.t.Helper()
	p.clk.Advance(d)
	if _, err := p.svc.DecideDue(p.Ctx); err != nil {
		p.t.Fatal(err)
	}
}

// stage publishes bob's commit, which pends; it returns the commit's
// sequence id.
func (p *twoPhase) stage(m *world.Member, id []byte) uint64 {
	p.t.Helper()
	c, gi := p.commit(m, id, ports.CommitOptions{})
	ids := p.publish(m, id, c, gi)
	if pc, ok := p.pending(id); !ok || pc.CommitSeq != ids[0] {
		p.t.Fatalf("%s's commit %d is not the pending one (%v, %v)", m.Name, ids[0], pc.CommitSeq, ok)
	}
	return ids[0]
}

// twoPhaseRules are the rule tests, each on a group of its own among the
// harness's members.
var twoPhaseRules = []struct {
	name string
	fn   func(t *testing.T, p *twoPhase)
}{
	{"ADR0030D1_SuperAdminAtOnceOthersPend", ruleADR0030D1_SuperAdminAtOnceOthersPend},
	{"ADR0030D2_WhilePending", ruleADR0030D2_WhilePending},
	{"ADR0030D2_SuperAdminSupersedes", ruleADR0030D2_SuperAdminSupersedes},
	{"ADR0030D3_Witnesses", ruleADR0030D3_Witnesses},
	{"ADR0030D4_ConfirmedAtGraceEnd", ruleADR0030D4_ConfirmedAtGraceEnd},
	{"ADR0030D4_RefusalDropsAndQuarantines", ruleADR0030D4_RefusalDropsAndQuarantines},
	{"ADR0030D4_Expires", ruleADR0030D4_Expires},
	{"ADR0030D6_StuckReports", ruleADR0030D6_StuckReports},
	{"ADR0030D5_RemovalEndsQuarantine", ruleADR0030D5_RemovalEndsQuarantine},
	{"ADR0030D2_PendingSurvivesRestart", ruleADR0030D2_PendingSurvivesRestart},
	{"ADR0030D4_ReplicasDecideOnce", ruleADR0030D4_ReplicasDecideOnce},
	{"ADR0030D3_ReportsKept30Days", ruleADR0030D3_ReportsKept30Days},
	{"ADR0030D4_NoGraceConfirmsOnFirstOK", ruleADR0030D4_NoGraceConfirmsOnFirstOK},
	{"COMP417_ClientNoticeRefused", ruleCOMP417_ClientNoticeRefused},
	{"ADR0030A2_BlockTheDevice", ruleADR0030A2_BlockTheDevice},
	{"ADR0030A3_OwnerJoinWaits", ruleADR0030A3_OwnerJoinWaits},
}

// ADR-0030 Decisions 1 to 6, COMP-410 to COMP-424: every rule test on
// SQLite and on PostgreSQL, each a subtest named by its rule on a fresh
// group; the members are made once per database (they are what costs).
func TestADR0030_TwoPhaseRules(t *testing.T) {
	eachStore(t, func(t *testing.T, mode string) {
		p := newTwoPhase(t, mode)
		for i, r := range twoPhaseRules {
			t.Run(r.name, func(t *testing.T) {
				p.use(t, i)
				r.fn(t, p)
			})
		}
	})
}
