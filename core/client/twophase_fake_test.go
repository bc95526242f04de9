package client_test

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/internal/mlsframe"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// acceptanceFake stands in for a delivery service with two-phase commit
// acceptance, for unit tests of the client's rules: it decorates each
// member's transport over an ordinary delivery service, marks the
// commits published while it is on (and their GroupInfos) pending,
// records reports, and places acceptance notices on a group's topic
// where the test asks (each at a sequence id it reserves with a
// placeholder envelope, which the decorator serves as the notice).
type acceptanceFake struct {
	mu      sync.Mutex
	on      bool
	refuse  bool
	hideGI  bool
	pending map[string]uint64
	gi      map[uint64]bool // GroupInfo seq -> still pending
	commits map[uint64]bool // pending commit seqs
	hidden  map[uint64]bool // GroupInfos of discarded commits, deleted
	// views override, per member, what a notice's envelope reads as.
	views   map[string]map[uint64]*backendpb.AcceptanceNotice
	notices map[uint64]*backendpb.AcceptanceNotice
	reports []fakeReport
	lifts   []ports.Lift
	base    ports.Transport
	// published, when set, runs after a pending commit is stored.
	published func()
}

type fakeReport struct {
	who string
	r   ports.Report
}

func newAcceptanceFake() *acceptanceFake {
	return &acceptanceFake{pending: map[string]uint64{}, gi: map[uint64]bool{}, commits: map[uint64]bool{},
		notices: map[uint64]*backendpb.AcceptanceNotice{}, hidden: map[uint64]bool{}}
}

// config returns a world config whose transport goes through the fake.
func (f *acceptanceFake) config(who string) world.Config {
	return world.Config{Transport: func(tr ports.Transport) ports.Transport {
		f.mu.Lock()
		if f.base == nil {
			f.base = tr
		}
		f.mu.Unlock()
		return &fakeTransport{Transport: tr, f: f, who: who}
	}}
}

func (f *acceptanceFake) set(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on = on
}

// waitPending waits for a pending commit of the group and returns its
// sequence id.
func (f *acceptanceFake) waitPending(t *testing.T, id []byte) uint64 {
	t.Helper()
	for range 3000 { // 30 s: a commit under -race on a loaded machine
		f.mu.Lock()
		s := f.pending[string(id)]
		f.mu.Unlock()
		if s != 0 {
			return s
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no pending commit")
	return 0
}

// notice places an acceptance notice on the group's topic; a decision
// ends the group's pending commit.
func (f *acceptanceFake) notice(t *testing.T, id []byte, n *backendpb.AcceptanceNotice) uint64 {
	t.Helper()
	seqs, err := f.base.Publish(context.Background(), []*backendpb.ClientEnvelope{{TargetTopic: gtopic(id),
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: []byte("acceptance notice placeholder")}}})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notices[seqs[0]] = n
	switch n.GetOutcome() {
	case backendpb.AcceptanceNotice_CONFIRMED, backendpb.AcceptanceNotice_DROPPED,
		backendpb.AcceptanceNotice_EXPIRED, backendpb.AcceptanceNotice_SUPERSEDED:
		delete(f.pending, string(id))
		confirmed := n.GetOutcome() == backendpb.AcceptanceNotice_CONFIRMED
		for s, p := range f.gi {
			if p {
				f.gi[s] = false
				if !confirmed {
					delete(f.gi, s)
					f.hidden[s] = true
				}
			}
		}
	}
	return seqs[0]
}

func (f *acceptanceFake) reportsOn(seq uint64) map[string]ports.Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]ports.Report{}
	for _, r := range f.reports {
		if r.r.CommitSeq == seq {
			if _, ok := out[r.who]; !ok {
				out[r.who] = r.r
			}
		}
	}
	return out
}

func gtopic(id []byte) []byte { return append([]byte{byte(ports.TopicGroupMessages)}, id...) }

type fakeTransport struct {
	ports.Transport
	f   *acceptanceFake
	who string
}

// override makes who read the notice at seq as n (nil: not yet there).
func (f *acceptanceFake) override(who string, seq uint64, n *backendpb.AcceptanceNotice) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.views == nil {
		f.views = map[string]map[uint64]*backendpb.AcceptanceNotice{}
	}
	if f.views[who] == nil {
		f.views[who] = map[uint64]*backendpb.AcceptanceNotice{}
	}
	f.views[who][seq] = n
}

func (f *acceptanceFake) clearOverrides(who string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.views, who)
}

func (t *fakeTransport) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	f := t.f
	isCommit := false
	var group []byte
	if len(envs) > 0 && len(envs[0].GetTargetTopic()) > 0 && envs[0].GetTargetTopic()[0] == byte(ports.TopicGroupMessages) {
		group = envs[0].GetTargetTopic()[1:]
		wf, _, ct, ok := mlsframe.Peek(envs[0].GetGroupMessage())
		isCommit = ok && ct == mlsframe.ContentCommit && (wf == mlsframe.WirePublicMessage || wf == mlsframe.WirePrivateMessage)
	}
	f.mu.Lock()
	on, refuse, busy := f.on, f.refuse, f.pending[string(group)] != 0
	f.mu.Unlock()
	if isCommit && on && refuse && busy {
		return nil, ports.ErrCommitPending
	}
	seqs, err := t.Transport.Publish(ctx, envs)
	if err != nil || !isCommit || !on {
		return seqs, err
	}
	f.mu.Lock()
	f.pending[string(group)] = seqs[0]
	f.commits[seqs[0]] = true
	if len(seqs) > 1 {
		f.gi[seqs[1]] = true
	}
	published := f.published
	f.mu.Unlock()
	if published != nil {
		published()
	}
	return seqs, nil
}

func (t *fakeTransport) mark(envs []*backendpb.OriginatorEnvelope) []*backendpb.OriginatorEnvelope {
	f := t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*backendpb.OriginatorEnvelope
	for _, e := range envs {
		s := e.GetSequenceId()
		e = proto.Clone(e).(*backendpb.OriginatorEnvelope)
		if p, ok := f.gi[s]; ok {
			if f.hideGI && p {
				continue
			}
			e.Pending = p
		}
		if f.hidden[s] {
			continue
		}
		if f.commits[s] {
			e.Pending = true
		}
		if n, ok := f.notices[s]; ok {
			if v, over := f.views[t.who][s]; over {
				if v == nil {
					break // this member reads the topic as ending here
				}
				n = v
			}
			e.Envelope.Payload = &backendpb.ClientEnvelope_AcceptanceNotice{AcceptanceNotice: n}
		}
		out = append(out, e)
	}
	return out
}

func (t *fakeTransport) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	envs, err := t.Transport.Query(ctx, topic, after, limit)
	return t.mark(envs), err
}

func (t *fakeTransport) QueryNewest(ctx context.Context, topic []byte) (*backendpb.OriginatorEnvelope, error) {
	e, err := t.Transport.QueryNewest(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := t.mark([]*backendpb.OriginatorEnvelope{e})
	if len(out) == 0 {
		// The newest was a deleted one: the next older.
		all, err := t.Query(ctx, topic, 0, 1000)
		if err != nil || len(all) == 0 {
			return nil, ports.ErrNotFound
		}
		return all[len(all)-1], nil
	}
	return out[0], nil
}

func (t *fakeTransport) Report(_ context.Context, r ports.Report) error {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	r.GroupID = bytes.Clone(r.GroupID)
	t.f.reports = append(t.f.reports, fakeReport{who: t.who, r: r})
	return nil
}

func (t *fakeTransport) Lift(_ context.Context, l ports.Lift) error {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.f.lifts = append(t.f.lifts, l)
	return nil
}

var _ ports.Witness = (*fakeTransport)(nil)

func names(m map[string]ports.Report) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
