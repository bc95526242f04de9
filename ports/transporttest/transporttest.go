// Package transporttest is the contract suite of [ports.Transport]: an
// adapter author implements [Harness] and calls [Run] from a test in the
// adapter's package. Each case is named after the rule it checks
// (companion definitions: topics, sequence ids, publish signature; API-201
// prefix reads; API-244 highest sequence id; API-286 to API-289 sequence
// ids; the FORK-021 and FORK-030 ordering the commit log relies on).
//
// # Sequence ids
//
// A service's sequence ids come from one counter shared by all its topics
// (COMP-041), so the cases never expect a topic to be numbered 1, 2, 3:
// they expect a topic's ids to strictly increase, a later publish to get a
// higher id than an earlier visible one on any topic (API-289, which
// FORK-077, JOIN-037 and JOIN-050 rely on when they compare ids of
// different topics), and every reader (query from a cursor, subscription)
// to end with exactly the acknowledged ids of its topic in ascending
// order: nothing missed, nothing twice.
//
// # Writing a harness
//
// A harness hands out transports to one running service; cases publish on
// fresh random topics, so one service may serve every case:
//
//	func TestMyTransport(t *testing.T) {
//		h := startMyServiceHarness(t) // Caps, NewTransport, NewAnonymousTransport, Bounce
//		transporttest.Run(t, func(*testing.T) transporttest.Harness { return h })
//	}
//
// Declare Caps.Bounce only when Bounce really restarts the service under
// open transports; the restart case is skipped, with the reason, otherwise.
// [RunCase] runs a single case, for example against a deliberately broken
// transport to show that the case catches it.
package transporttest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Caps declares what the service under test can do; a case that needs a
// missing capability is skipped with the reason.
type Caps struct {
	// MaxEnvelopeBytes is the service's envelope size limit; 0 skips the
	// size case.
	MaxEnvelopeBytes int
	// Bounce reports that [Harness.Bounce] is implemented.
	Bounce bool
}

// Harness connects the suite to a delivery service. Run asks newHarness
// for one per case; every case works on fresh random topics, so a
// factory may hand several cases the same harness and service. A harness
// releases what it holds through the t.Cleanup of the test it was made
// for.
type Harness interface {
	// Caps declares the harness's capabilities.
	Caps() Caps
	// NewTransport returns a transport authenticated as a fresh
	// installation.
	NewTransport(t *testing.T) ports.Transport
	// NewAnonymousTransport returns a transport that proves no identity.
	NewAnonymousTransport(t *testing.T) ports.Transport
	// Bounce breaks every connection to the service and brings it back on
	// the same data (a restart), while transports stay open.
	Bounce(t *testing.T)
}

// Run runs every case, each on a harness from newHarness.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, newHarness(t))
		})
	}
}

// RunCase runs the one case named name (as Run names its subtests), and
// fails when there is no such case.
func RunCase(t *testing.T, name string, newHarness func(t *testing.T) Harness) {
	for _, c := range cases() {
		if c.name == name {
			t.Run(c.name, func(t *testing.T) { c.fn(t, newHarness(t)) })
			return
		}
	}
	t.Fatalf("transporttest has no case %q", name)
}

// CaseNames returns the name of every case [Run] runs, in order.
func CaseNames() []string {
	var names []string
	for _, c := range cases() {
		names = append(names, c.name)
	}
	return names
}

type testCase struct {
	name string
	fn   func(t *testing.T, h Harness)
}

func cases() []testCase {
	return []testCase{
		{"COMP041_SequenceIDs_IncreaseAndReadBack", testIDsIncrease},
		{"API289_LaterPublishHigherOnAnyTopic", testLaterPublishHigher},
		{"API201_QueryReturnsPrefixInOrder", testPrefixInOrder},
		{"Query_Paging", testPaging},
		{"QueryNewest", testNewest},
		{"API244_HighestSequenceID", testHighest},
		{"API244_COMP279_HighestSequenceIDs_Batched", testHighestBatched},
		{"Subscribe_BacklogThenNew", testSubscribeBacklog},
		{"Subscribe_ResumeNoGapAcrossReconnect", testSubscribeResume},
		{"Subscribe_NoGapAcrossServerRestart", testSubscribeBounce},
		{"Subscribe_NoGapBetweenBacklogAndLive", testSubscribeBacklogToLive},
		{"Results_DoNotShareMemory", testResultsDoNotShareMemory},
		{"COMP050_PublishSignature_Admission", testPublishSignature},
		{"COMP040_COMP042_InvalidArgument_Reasons", testInvalidArgument},
		{"InvalidArgument_BatchStoresNothing", testBatchAtomic},
		{"FORK021_ConcurrentPublishers_AckedIDsReadBack", testConcurrentPublishers},
		{"COMP041_FORK030_ReaderFromCursorMissesNothing", testReaderFromCursor},
		{"COMP081_CapabilityTopicsNeedNoIdentity", testAnonymous},
		{"CtxDeadlineHonoured", testDeadline},
		{"COMP143_CursorAboveInt64_InvalidArgument", testCursorAboveInt64},
		{"COMP144_CommitLogEntryStoredOnce", testCommitLogStoredOnce},
	}
}

// Topic returns kind || id.
func Topic(kind ports.TopicKind, id []byte) []byte {
	return append([]byte{byte(kind)}, id...)
}

// RandomGroupTopic returns a group-message topic with a random 32-byte
// group id.
func RandomGroupTopic() []byte { return Topic(ports.TopicGroupMessages, random(32)) }

// GroupMessage returns a group-message envelope carrying payload.
func GroupMessage(topic, payload []byte) *backendpb.ClientEnvelope {
	return &backendpb.ClientEnvelope{
		TargetTopic: topic,
		Payload:     &backendpb.ClientEnvelope_GroupMessage{GroupMessage: payload},
	}
}

// Welcome returns a welcome envelope for the 32-byte installation key.
func Welcome(installationKey, data []byte) *backendpb.ClientEnvelope {
	return &backendpb.ClientEnvelope{
		TargetTopic: Topic(ports.TopicWelcomes, installationKey),
		Payload: &backendpb.ClientEnvelope_WelcomeMessage{WelcomeMessage: &apipb.WelcomeMessage{
			Version: &apipb.WelcomeMessage_V1_{V1: &apipb.WelcomeMessage_V1{
				InstallationKey: installationKey, Data: data, HpkePublicKey: random(32),
			}},
		}},
	}
}

// SealedEntry returns a commit-log envelope on the topic of priv's public
// key, signed under priv as the companion publish signature defines:
// Ed25519ctx with context [ports.PublishContext] over the deterministic
// encoding of CommitLogEntryTBS{topic, nonce, ciphertext}.
func SealedEntry(priv ed25519.PrivateKey, nonce, ciphertext []byte) *backendpb.ClientEnvelope {
	id := []byte(priv.Public().(ed25519.PublicKey))
	topic := Topic(ports.TopicCommitLog, id)
	tbs, err := proto.MarshalOptions{Deterministic: true}.Marshal(&backendpb.CommitLogEntryTBS{
		Topic: topic, Nonce: nonce, Ciphertext: ciphertext,
	})
	if err != nil {
		panic(err) // three bytes fields always marshal
	}
	sig, err := priv.Sign(nil, tbs, &ed25519.Options{Context: ports.PublishContext})
	if err != nil {
		panic(err)
	}
	return &backendpb.ClientEnvelope{
		TargetTopic: topic,
		Payload: &backendpb.ClientEnvelope_SealedCommitLogEntry{SealedCommitLogEntry: &backendpb.SealedCommitLogEntry{
			CommitLogId: id, Nonce: nonce, Ciphertext: ciphertext, Signature: sig,
		}},
	}
}

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func publish(t *testing.T, ctx context.Context, tr ports.Transport, envs ...*backendpb.ClientEnvelope) []uint64 {
	t.Helper()
	ids, err := tr.Publish(ctx, envs)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if len(ids) != len(envs) {
		t.Fatalf("Publish returned %d ids for %d envelopes", len(ids), len(envs))
	}
	return ids
}

func queryAll(t *testing.T, ctx context.Context, tr ports.Transport, topic []byte) []*backendpb.OriginatorEnvelope {
	t.Helper()
	var all []*backendpb.OriginatorEnvelope
	var after uint64
	for {
		page, err := tr.Query(ctx, topic, after, 0)
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		after = page[len(page)-1].GetSequenceId()
	}
}

// checkIDs fails unless envs carry exactly the ids want, in that order.
func checkIDs(t *testing.T, what string, envs []*backendpb.OriginatorEnvelope, want []uint64) {
	t.Helper()
	if got := ids(envs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: read ids %v, want %v", what, got, want)
	}
}

// ascending returns a sorted copy of list.
func ascending(list []uint64) []uint64 {
	out := append([]uint64(nil), list...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func ids(envs []*backendpb.OriginatorEnvelope) []uint64 {
	out := make([]uint64, len(envs))
	for i, e := range envs {
		out[i] = e.GetSequenceId()
	}
	return out
}
