package main

import (
	"context"
	"github.com/regroup-mls/regroup/adapters/clock"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

const envBreak = "REGROUP_TRANSPORTTEST_BREAK"

// mutants maps a broken rule to the suite case that must catch it.
var mutants = map[string]string{
	"ids-from-zero":        "COMP041_SequenceIDs_IncreaseAndReadBack",
	"per-topic-counters":   "API289_LaterPublishHigherOnAnyTopic",
	"query-reversed":       "API201_QueryReturnsPrefixInOrder",
	"query-drops-one":      "Query_Paging",
	"newest-is-oldest":     "QueryNewest",
	"highest-off-by-one":   "API244_HighestSequenceID",
	"subscribe-skips":      "Subscribe_ResumeNoGapAcrossReconnect",
	"subscribe-duplicates": "Subscribe_BacklogThenNew",
	"ignores-deadline":     "CtxDeadlineHonoured",
	"anonymous-is-trusted": "COMP081_CapabilityTopicsNeedNoIdentity",
}

// The transport suite fails against a transport with one rule broken:
// one child test process runs, for each mutant, the case that must catch
// it, and every one of those cases must fail.
func TestTransportSuiteCatchesBrokenTransports(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenTransport$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envBreak+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed every broken transport:\n%s", out)
	}
	for rule, tc := range mutants {
		if !strings.Contains(string(out), "--- FAIL: TestBrokenTransport/"+rule+"/"+tc) {
			t.Errorf("case %s did not fail on a transport with %q broken", tc, rule)
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}
}

// TestBrokenTransport runs, per mutant, the suite case that must catch it;
// only TestTransportSuiteCatchesBrokenTransports starts it.
func TestBrokenTransport(t *testing.T) {
	if os.Getenv(envBreak) == "" {
		t.Skip("runs only as the child of TestTransportSuiteCatchesBrokenTransports")
	}
	store, _ := openTestStore(t, "sqlite")
	t.Cleanup(func() { store.Close() })
	svc := delivery.New(store, &delivery.Options{Clock: clock.System{}, MaxEnvelopeBytes: testLimit})
	// A service whose store numbers each topic from 1, as deliverydb did
	// before COMP-041: every id it hands out is otherwise valid.
	perTopic := delivery.New(newPerTopicStore(), &delivery.Options{Clock: clock.System{}, MaxEnvelopeBytes: testLimit})
	for rule, tc := range mutants {
		t.Run(rule, func(t *testing.T) {
			h := &mutantHarness{memHarness{svc: svc}, rule}
			if rule == "per-topic-counters" {
				h.svc = perTopic
			}
			transporttest.RunCase(t, tc, func(*testing.T) transporttest.Harness { return h })
		})
	}
}

type mutantHarness struct {
	memHarness
	rule string
}

func (h *mutantHarness) NewTransport(t *testing.T) ports.Transport {
	return &mutant{Transport: h.memHarness.NewTransport(t), rule: h.rule}
}

func (h *mutantHarness) NewAnonymousTransport(t *testing.T) ports.Transport {
	if h.rule == "anonymous-is-trusted" {
		return &mutant{Transport: h.memHarness.NewTransport(t), rule: h.rule}
	}
	return &mutant{Transport: h.memHarness.NewAnonymousTransport(t), rule: h.rule}
}

// mutant breaks exactly one rule of the transport it wraps.
type mutant struct {
	ports.Transport
	rule string
}

func (m *mutant) ctx(ctx context.Context) context.Context {
	if m.rule == "ignores-deadline" {
		return context.Background()
	}
	return ctx
}

func (m *mutant) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	ids, err := m.Transport.Publish(m.ctx(ctx), envs)
	if m.rule == "ids-from-zero" {
		for i := range ids {
			ids[i]--
		}
	}
	return ids, err
}

func (m *mutant) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	page, err := m.Transport.Query(m.ctx(ctx), topic, after, limit)
	switch {
	case m.rule == "query-reversed":
		for i, j := 0, len(page)-1; i < j; i, j = i+1, j-1 {
			page[i], page[j] = page[j], page[i]
		}
	case m.rule == "query-drops-one" && len(page) > 1:
		page = append(page[:1], page[2:]...)
	}
	return page, err
}

func (m *mutant) QueryNewest(ctx context.Context, topic []byte) (*backendpb.OriginatorEnvelope, error) {
	if m.rule == "newest-is-oldest" {
		page, err := m.Transport.Query(ctx, topic, 0, 1)
		if err == nil && len(page) == 1 {
			return page[0], nil
		}
	}
	return m.Transport.QueryNewest(m.ctx(ctx), topic)
}

func (m *mutant) HighestSequenceID(ctx context.Context, topic []byte) (uint64, error) {
	n, err := m.Transport.HighestSequenceID(m.ctx(ctx), topic)
	if m.rule == "highest-off-by-one" && n > 0 {
		n--
	}
	return n, err
}

func (m *mutant) Subscribe(ctx context.Context, cursors []ports.TopicCursor) (ports.Subscription, error) {
	s, err := m.Transport.Subscribe(m.ctx(ctx), cursors)
	if err != nil {
		return nil, err
	}
	return &mutantSub{Subscription: s, rule: m.rule}, nil
}

type mutantSub struct {
	ports.Subscription
	rule string
	n    int
	last *backendpb.OriginatorEnvelope
}

func (s *mutantSub) Next(ctx context.Context) (*backendpb.OriginatorEnvelope, error) {
	s.n++
	if s.rule == "subscribe-duplicates" && s.n == 2 && s.last != nil {
		return s.last, nil
	}
	if s.rule == "subscribe-skips" && s.n == 1 {
		if _, err := s.Subscription.Next(ctx); err != nil {
			return nil, err
		}
	}
	e, err := s.Subscription.Next(ctx)
	s.last = e
	return e, err
}
