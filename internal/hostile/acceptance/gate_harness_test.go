package acceptance_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// The gate tests of two-phase commit acceptance (ADR-0030) run real
// clients, honest and hostile, against a regroupd process over gRPC with
// -accept-commits -two-phase and a short grace period, on SQLite and on
// PostgreSQL (REGROUP_POSTGRES_DSN).

// twoPhase are the regroupd flags of the gate tests; later flags given to
// newGate override them.
// raceGrace is the grace period of the gates where something must reach
// the service while a commit others accepted is still pending (a
// refusal, a super admin's superseding commit): 200 ms is too short for
// a loaded machine under the race detector.
const raceGrace = 2 * time.Second

var twoPhase = []string{"-accept-commits", "-two-phase", "-grace-period", "200ms", "-pending-expiry", "1h"}

type gate struct {
	*world.World
	t *testing.T
}

func eachDB(t *testing.T, fn func(t *testing.T, mode string)) {
	for _, mode := range world.Networked {
		t.Run(mode, func(t *testing.T) {
			if mode == "postgres" {
				testenv.PostgresDSN(t)
			}
			fn(t, mode)
		})
	}
}

func newGate(t *testing.T, mode string, flags ...string) *gate {
	r := testenv.StartRegroupdWith(t, mode, append(slices.Clone(twoPhase), flags...)...)
	return &gate{World: world.NewOn(t, mode, r, 2*time.Minute), t: t}
}

// group creates a group of the creator (its super admin) with members and
// viewers, registers it with the service (its GroupInfo) and syncs all.
func (g *gate) group(creator *world.Member, members, viewers []*world.Member) []byte {
	g.t.Helper()
	inboxes := func(ms []*world.Member) (out []string) {
		for _, m := range ms {
			out = append(out, m.C.InboxID())
		}
		return out
	}
	cv, err := creator.C.CreateGroup(g.Ctx, client.GroupOptions{Name: "gate", Members: inboxes(members), Viewers: inboxes(viewers)})
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := cv.PublishGroupInfo(g.Ctx); err != nil {
		g.t.Fatal(err)
	}
	all := append(append([]*world.Member{creator}, members...), viewers...)
	world.SyncAll(all...)
	return cv.ID()
}

// async runs fn in the background.
func async(fn func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	return done
}

// until syncs the members in rounds until done yields, and returns its
// error.
func (g *gate) until(done <-chan error, ms ...*world.Member) error {
	g.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		if time.Now().After(deadline) {
			g.t.Fatal("the call did not end")
		}
		for _, m := range ms {
			if err := m.C.SyncAll(g.Ctx); err != nil {
				g.t.Logf("%s: sync: %v", m.Name, err)
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// notice waits for the notice of outcome about commit seq (0: any) on the
// group's topic and returns it.
func (g *gate) notice(m *world.Member, id []byte, seq uint64, o backendpb.AcceptanceNotice_Outcome) *backendpb.AcceptanceNotice {
	g.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		es, err := m.Transport.Query(g.Ctx, append([]byte{byte(ports.TopicGroupMessages)}, id...), 0, 1000)
		if err != nil {
			g.t.Fatal(err)
		}
		for _, e := range es {
			if n := e.GetEnvelope().GetAcceptanceNotice(); n.GetOutcome() == o && (seq == 0 || n.GetCommitSequenceId() == seq) {
				return n
			}
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("no %v notice about commit %d", o, seq)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hasNotice(g *gate, m *world.Member, id []byte, seq uint64, o backendpb.AcceptanceNotice_Outcome) bool {
	es, err := m.Transport.Query(g.Ctx, append([]byte{byte(ports.TopicGroupMessages)}, id...), 0, 1000)
	if err != nil {
		g.t.Fatal(err)
	}
	for _, e := range es {
		if n := e.GetEnvelope().GetAcceptanceNotice(); n.GetOutcome() == o && n.GetCommitSequenceId() == seq {
			return true
		}
	}
	return false
}

func verdicts(n *backendpb.AcceptanceNotice) map[string]string {
	out := map[string]string{}
	for _, r := range n.GetReports() {
		out[string(r.GetInboxId())] = r.GetVerdict().String() + "/" + r.GetReason()
	}
	return out
}

// honest ends each gate: every honest member holds the group active at
// the same epoch and epoch authenticator, with the same members, the
// quarantine list quarantined, and does not read forked.
func (g *gate) honest(id []byte, quarantined []string, ms ...*world.Member) {
	g.t.Helper()
	world.SyncAll(ms...)
	world.Agree(g.t, id, ms...)
	slices.Sort(quarantined)
	var first []string
	for i, m := range ms {
		mem, err := m.Conv(id).Members(g.Ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		var ids []string
		for _, x := range mem {
			ids = append(ids, x.InboxID)
		}
		slices.Sort(ids)
		if i == 0 {
			first = ids
		} else if !slices.Equal(first, ids) {
			g.t.Fatalf("%s holds members %v, %s %v", ms[0].Name, first, m.Name, ids)
		}
		q, err := m.Conv(id).Quarantined(g.Ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		if !slices.Equal(q, quarantined) && !(len(q) == 0 && len(quarantined) == 0) {
			g.t.Fatalf("%s's quarantine list %v, want %v", m.Name, q, quarantined)
		}
		st, err := m.Conv(id).SyncCommitLog(g.Ctx)
		if err != nil {
			g.t.Fatal(err)
		}
		if st == ports.ForkForked {
			g.t.Fatalf("%s reads forked", m.Name)
		}
	}
}

func epoch(m *world.Member, id []byte) uint64 { return m.Info(id).Epoch }

func sameAuth(a, b *world.Member, id []byte) bool {
	return bytes.Equal(a.Info(id).EpochAuthenticator, b.Info(id).EpochAuthenticator)
}
