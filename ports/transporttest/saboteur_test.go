package transporttest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// envSaboteur turns the test binary into the child of the saboteur tests;
// its value names what the child runs.
const envSaboteur = "REGROUP_TRANSPORTTEST_SABOTEUR_CHILD"

// saboteurs maps each saboteur (a decorator over memtransport that breaks
// exactly one promise) to the case that must fail on it. The saboteurs of
// the earlier cases live in cmd/regroupd/mutation_test.go.
var saboteurs = map[string][]string{
	"backlog-then-live-gap":         {"Subscribe_NoGapBetweenBacklogAndLive"},
	"query-results-shared":          {"Results_DoNotShareMemory"},
	"newest-shared":                 {"Results_DoNotShareMemory"},
	"subscription-fanout-shared":    {"Results_DoNotShareMemory"},
	"publish-keeps-caller-envelope": {"Results_DoNotShareMemory"},
	"invalid-as-unavailable": {"COMP040_COMP042_InvalidArgument_Reasons", "COMP050_PublishSignature_Admission",
		"InvalidArgument_BatchStoresNothing", "COMP143_CursorAboveInt64_InvalidArgument"},
	"reason-dropped":      {"COMP040_COMP042_InvalidArgument_Reasons", "COMP050_PublishSignature_Admission"},
	"batch-split":         {"InvalidArgument_BatchStoresNothing"},
	"batch-ids-reversed":  {"FORK021_ConcurrentPublishers_AckedIDsReadBack", "COMP144_CommitLogEntryStoredOnce"},
	"cursor-clamped":      {"COMP143_CursorAboveInt64_InvalidArgument"},
	"highest-batch-stale": {"API244_COMP279_HighestSequenceIDs_Batched"},
}

// harness serves every case from one in-process delivery service on a
// SQLite file; rule names the promise its transports break.
type harness struct {
	svc  *delivery.Service
	rule string
	st   *sabState
}

func newHarness(t *testing.T, rule string) *harness {
	store, err := deliverydb.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "delivery.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	svc := delivery.New(store, &delivery.Options{Clock: clock.System{}, MaxEnvelopeBytes: 64 << 10})
	return &harness{svc: svc, rule: rule, st: &sabState{byID: map[uint64]*backendpb.OriginatorEnvelope{}, pages: map[string][]*backendpb.OriginatorEnvelope{}, published: map[uint64]*backendpb.ClientEnvelope{}}}
}

func (h *harness) Caps() transporttest.Caps { return transporttest.Caps{MaxEnvelopeBytes: 64 << 10} }
func (h *harness) Bounce(t *testing.T)      { t.Fatal("an in-process service has no connection to break") }

func (h *harness) NewTransport(*testing.T) ports.Transport {
	return &saboteur{Transport: memtransport.New(h.svc, nil), rule: h.rule, st: h.st}
}

func (h *harness) NewAnonymousTransport(*testing.T) ports.Transport {
	return &saboteur{Transport: memtransport.New(h.svc, &memtransport.Options{Anonymous: true}), rule: h.rule, st: h.st}
}

// TestSuiteCatchesEverySaboteur runs, in one child process, each
// saboteur's case, and fails when one passes; the same cases pass on the
// unbroken transport there.
func TestSuiteCatchesEverySaboteur(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in a child process")
	}
	t.Parallel()
	out := runChild(t, "cases")
	for rule, cases := range saboteurs {
		for _, c := range cases {
			if !bytes.Contains(out, []byte("--- FAIL: TestSaboteurChild/"+rule+"/"+c+" ")) {
				t.Errorf("saboteur %s passed case %s", rule, c)
			}
			if !bytes.Contains(out, []byte("--- PASS: TestSaboteurChild/unbroken/"+c+" ")) {
				t.Errorf("case %s does not pass on the unbroken transport", c)
			}
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}
}

// TestSuiteRunsOnAfterAFailure runs the whole suite on a transport whose
// Query repeats an envelope, which fails a case while its publishers are
// running: every case must still run and report, and nothing may panic.
func TestSuiteRunsOnAfterAFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in a child process")
	}
	t.Parallel()
	out := runChild(t, "whole-suite")
	if bytes.Contains(out, []byte("panic:")) {
		t.Fatalf("the suite panicked after a failure:\n%s", out)
	}
	if !bytes.Contains(out, []byte("--- FAIL: TestSaboteurChild/query-repeats-last/COMP041_FORK030_ReaderFromCursorMissesNothing ")) {
		t.Errorf("the reader case did not fail on a Query that repeats an envelope")
	}
	for _, c := range transporttest.CaseNames() {
		if !bytes.Contains(out, []byte("TestSaboteurChild/query-repeats-last/"+c+" (")) {
			t.Errorf("case %s did not report after an earlier failure", c)
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}
}

func runChild(t *testing.T, mode string) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSaboteurChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envSaboteur+"="+mode)
	out, _ := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the child hung:\n%s", out)
	}
	return out
}

// TestSaboteurChild is the child of the two tests above.
func TestSaboteurChild(t *testing.T) {
	switch os.Getenv(envSaboteur) {
	case "cases":
		unbroken := map[string]bool{}
		for rule, cases := range saboteurs {
			t.Run(rule, func(t *testing.T) {
				h := newHarness(t, rule)
				for _, c := range cases {
					unbroken[c] = true
					transporttest.RunCase(t, c, func(*testing.T) transporttest.Harness { return h })
				}
			})
		}
		t.Run("unbroken", func(t *testing.T) {
			h := newHarness(t, "")
			for c := range unbroken {
				transporttest.RunCase(t, c, func(*testing.T) transporttest.Harness { return h })
			}
		})
	case "whole-suite":
		t.Run("query-repeats-last", func(t *testing.T) {
			h := newHarness(t, "query-repeats-last")
			transporttest.Run(t, func(*testing.T) transporttest.Harness { return h })
		})
	default:
		t.Skip("runs only as the child of the saboteur tests")
	}
}

// sabState is what saboteurs of one harness share between transports.
type sabState struct {
	mu        sync.Mutex
	byID      map[uint64]*backendpb.OriginatorEnvelope
	pages     map[string][]*backendpb.OriginatorEnvelope
	published map[uint64]*backendpb.ClientEnvelope
}

// shared returns the envelope already handed out under e's id, or records
// e as it: every caller then holds the same message.
func (s *sabState) shared(e *backendpb.OriginatorEnvelope) *backendpb.OriginatorEnvelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byID[e.GetSequenceId()]; ok {
		return old
	}
	s.byID[e.GetSequenceId()] = e
	return e
}

// saboteur breaks exactly one promise of the transport it wraps.
type saboteur struct {
	ports.Transport
	rule string
	st   *sabState
}

// classify applies the error saboteurs to err.
func (s *saboteur) classify(err error) error {
	if !errors.Is(err, ports.ErrInvalidArgument) {
		return err
	}
	switch s.rule {
	case "invalid-as-unavailable":
		return fmt.Errorf("%w: %s", ports.ErrUnavailable, strings.ReplaceAll(err.Error(), ports.ErrInvalidArgument.Error(), "refused"))
	case "reason-dropped":
		return fmt.Errorf("publish: %w", ports.ErrInvalidArgument)
	}
	return err
}

func (s *saboteur) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	if s.rule == "batch-split" {
		var ids []uint64
		for _, e := range envs {
			got, err := s.Transport.Publish(ctx, []*backendpb.ClientEnvelope{e})
			if err != nil {
				return nil, err
			}
			ids = append(ids, got...)
		}
		return ids, nil
	}
	ids, err := s.Transport.Publish(ctx, envs)
	err = s.classify(err)
	if s.rule == "batch-ids-reversed" {
		slices.Reverse(ids)
	}
	if s.rule == "publish-keeps-caller-envelope" && err == nil {
		s.st.mu.Lock()
		for i, id := range ids {
			s.st.published[id] = envs[i] // the caller's message, not a copy
		}
		s.st.mu.Unlock()
	}
	return ids, err
}

func (s *saboteur) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	if s.rule == "cursor-clamped" {
		after = min(after, math.MaxInt64)
	}
	key := string(topic) + "|" + string(rune(after)) + "|" + string(rune(limit))
	if s.rule == "query-results-shared" {
		s.st.mu.Lock()
		page, ok := s.st.pages[key]
		s.st.mu.Unlock()
		if ok {
			return page, nil
		}
	}
	page, err := s.Transport.Query(ctx, topic, after, limit)
	err = s.classify(err)
	switch {
	case err != nil:
	case s.rule == "query-results-shared":
		s.st.mu.Lock()
		s.st.pages[key] = page
		s.st.mu.Unlock()
	case s.rule == "publish-keeps-caller-envelope":
		s.st.mu.Lock()
		for _, e := range page {
			if env, ok := s.st.published[e.GetSequenceId()]; ok {
				e.Envelope = env
			}
		}
		s.st.mu.Unlock()
	case s.rule == "query-repeats-last" && len(page) > 0:
		page = append(page, page[len(page)-1])
	}
	return page, err
}

// HighestSequenceIDs passes the batched read on; "highest-batch-stale"
// answers 0 for every topic after the first, as a service that read only
// one would.
func (s *saboteur) HighestSequenceIDs(ctx context.Context, topics [][]byte) ([]uint64, error) {
	ids, err := s.Transport.(ports.HighestReader).HighestSequenceIDs(ctx, topics)
	if err == nil && s.rule == "highest-batch-stale" {
		for i := 1; i < len(ids); i++ {
			ids[i] = 0
		}
	}
	return ids, err
}

func (s *saboteur) QueryNewest(ctx context.Context, topic []byte) (*backendpb.OriginatorEnvelope, error) {
	e, err := s.Transport.QueryNewest(ctx, topic)
	if s.rule == "newest-shared" && err == nil {
		return s.st.shared(e), nil
	}
	return e, err
}

func (s *saboteur) Subscribe(ctx context.Context, cursors []ports.TopicCursor) (ports.Subscription, error) {
	if s.rule == "cursor-clamped" {
		for i := range cursors {
			cursors[i].After = min(cursors[i].After, math.MaxInt64)
		}
	}
	if s.rule != "backlog-then-live-gap" {
		sub, err := s.Transport.Subscribe(ctx, cursors)
		if err != nil || s.rule != "subscription-fanout-shared" {
			return sub, err
		}
		return &sharedSub{Subscription: sub, st: s.st}, nil
	}
	// Read the backlog, then go live from whatever is newest by the time
	// the live stream opens: what was published in between is lost.
	var backlog []*backendpb.OriginatorEnvelope
	live := make([]ports.TopicCursor, len(cursors))
	for i, c := range cursors {
		for after := c.After; ; {
			page, err := s.Transport.Query(ctx, c.Topic, after, 0)
			if err != nil {
				return nil, err
			}
			if len(page) == 0 {
				break
			}
			backlog = append(backlog, page...)
			after = page[len(page)-1].GetSequenceId()
		}
		time.Sleep(100 * time.Millisecond) // a slow round trip to the service
		hi, err := s.Transport.HighestSequenceID(ctx, c.Topic)
		if err != nil {
			return nil, err
		}
		live[i] = ports.TopicCursor{Topic: c.Topic, After: hi}
	}
	sub, err := s.Transport.Subscribe(ctx, live)
	if err != nil {
		return nil, err
	}
	return &gapSub{Subscription: sub, backlog: backlog}, nil
}

type gapSub struct {
	ports.Subscription
	backlog []*backendpb.OriginatorEnvelope
}

func (g *gapSub) Next(ctx context.Context) (*backendpb.OriginatorEnvelope, error) {
	if len(g.backlog) > 0 {
		e := g.backlog[0]
		g.backlog = g.backlog[1:]
		return e, nil
	}
	return g.Subscription.Next(ctx)
}

type sharedSub struct {
	ports.Subscription
	st *sabState
}

func (s *sharedSub) Next(ctx context.Context) (*backendpb.OriginatorEnvelope, error) {
	e, err := s.Subscription.Next(ctx)
	if err != nil {
		return nil, err
	}
	return s.st.shared(e), nil
}

// TestGuideListsEveryCaseAndSaboteur keeps docs/adapter-guide.md's table
// of the transport suite complete.
func TestGuideListsEveryCaseAndSaboteur(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "adapter-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range transporttest.CaseNames() {
		if !bytes.Contains(guide, []byte("`"+c+"`")) {
			t.Errorf("docs/adapter-guide.md does not list case %s", c)
		}
	}
	for rule := range saboteurs {
		if !bytes.Contains(guide, []byte("`"+rule+"`")) {
			t.Errorf("docs/adapter-guide.md does not list saboteur %s", rule)
		}
	}
}
