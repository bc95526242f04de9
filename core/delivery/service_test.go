package delivery

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

var authed = ports.Caller{InstallationKey: make([]byte, 32)}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// COMP-050: the TBS is CommitLogEntryTBS{topic=1, nonce=2,
// ciphertext=3}, each non-default field once in ascending order — checked
// byte for byte against a hand-built encoding.
func TestCOMP050_PublishSignature_TBSEncoding(t *testing.T) {
	topic := append([]byte{4}, make([]byte, 32)...)
	nonce, ct := []byte{1, 2, 3}, []byte{9}
	got, err := PublishTBS(topic, nonce, ct)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte{0x0a, 33}, topic...)
	want = append(want, 0x12, 3, 1, 2, 3, 0x1a, 1, 9)
	if hex.EncodeToString(got) != hex.EncodeToString(want) {
		t.Fatalf("TBS = %x\nwant  %x", got, want)
	}
	// An empty field is omitted, as proto3 default fields are.
	got, _ = PublishTBS(topic, nil, ct)
	if want := append(append([]byte{0x0a, 33}, topic...), 0x1a, 1, 9); hex.EncodeToString(got) != hex.EncodeToString(want) {
		t.Fatalf("TBS with empty nonce = %x", got)
	}
}

// COMP-050 (API-230): the entry is admitted only when its
// Ed25519ctx signature verifies under the commit_log_id its topic names.
func TestCOMP050_PublishSignature_Admission(t *testing.T) {
	svc := New(newMemStore(), withClock(nil))
	_, priv, _ := ed25519.GenerateKey(nil)
	good := transporttest.SealedEntry(priv, []byte("123456789012"), []byte("ct"))
	if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{good}); err != nil {
		t.Fatalf("valid entry refused: %v", err)
	}
	bad := transporttest.SealedEntry(priv, []byte("123456789012"), []byte("ct"))
	bad.GetSealedCommitLogEntry().Signature[5] ^= 0x40
	_, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{bad})
	if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("tampered signature: %v", err)
	}
	short := transporttest.SealedEntry(priv, []byte("123456789012"), []byte("ct"))
	short.GetSealedCommitLogEntry().Signature = short.GetSealedCommitLogEntry().Signature[:63]
	if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{short}); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("63-byte signature: %v", err)
	}
}

// COMP-040 (TOPIC-001/TOPIC-002): identifier lengths per kind.
func TestCOMP040_Topics_IdentifierLength(t *testing.T) {
	for _, c := range []struct {
		kind ports.TopicKind
		n    int
		ok   bool
	}{
		{ports.TopicGroupMessages, 16, true}, {ports.TopicGroupMessages, 32, true}, {ports.TopicGroupMessages, 31, false},
		{ports.TopicWelcomes, 32, true}, {ports.TopicWelcomes, 16, false},
		{ports.TopicIdentityUpdates, 32, true}, {ports.TopicIdentityUpdates, 33, false},
		{ports.TopicKeyPackages, 32, true}, {ports.TopicKeyPackages, 0, false},
		{ports.TopicCommitLog, 32, true}, {ports.TopicCommitLog, 16, false},
		{ports.TopicGroupInfo, 16, true}, {ports.TopicGroupInfo, 32, true}, {ports.TopicGroupInfo, 31, false},
		{0x06, 32, false},
	} {
		_, _, err := ParseTopic(append([]byte{byte(c.kind)}, make([]byte, c.n)...))
		if (err == nil) != c.ok {
			t.Errorf("kind 0x%02x, %d bytes: err = %v, want ok=%v", byte(c.kind), c.n, err, c.ok)
		}
		if err != nil && !errors.Is(err, ports.ErrInvalidArgument) {
			t.Errorf("error %v does not wrap ErrInvalidArgument", err)
		}
	}
}

type refuseAll struct{ calls int }

func (r *refuseAll) ValidateKeyPackage(_ context.Context, key, kp []byte) error {
	r.calls++
	return errors.New("0xff03 extension does not decode")
}

func keyPackage(key []byte) *backendpb.ClientEnvelope {
	return &backendpb.ClientEnvelope{
		TargetTopic: append([]byte{byte(ports.TopicKeyPackages)}, key...),
		Payload:     &backendpb.ClientEnvelope_KeyPackage{KeyPackage: &apipb.KeyPackage{KeyPackageTlsSerialized: []byte{0, 1, 0, 3}}},
	}
}

// JOIN-090: the backend at admission rejects a key package its validator
// refuses, with the validator's reason; nil validator keeps structural checks.
func TestJOIN090_KeyPackageAdmission(t *testing.T) {
	v := &refuseAll{}
	svc := New(newMemStore(), withClock(&Options{KeyPackageValidator: v}))
	key := make([]byte, 32)
	_, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{keyPackage(key)})
	if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), "0xff03") || v.calls != 1 {
		t.Fatalf("refused key package: %v (validator calls %d)", err, v.calls)
	}
	plain := New(newMemStore(), withClock(nil))
	if _, err := plain.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{keyPackage(key)}); err != nil {
		t.Fatalf("structurally valid key package without validator: %v", err)
	}
	empty := keyPackage(key)
	empty.GetKeyPackage().KeyPackageTlsSerialized = nil
	if _, err := plain.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{empty}); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("empty key package: %v", err)
	}
	if _, err := plain.Query(ctx(t), authed, keyPackage(key).GetTargetTopic(), 0, 0); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("Query on a key-package topic: %v", err)
	}
	if e, err := plain.QueryNewest(ctx(t), ports.Caller{}, keyPackage(key).GetTargetTopic()); err != nil || e.GetSequenceId() != 1 {
		t.Fatalf("anonymous QueryNewest of key packages: %v, %v", e, err)
	}
}

// COMP-070: identity updates are admitted only on the topic of their inbox
// id, the SHA-256 of their recovery key.
func TestCOMP070_IdentityUpdateTopic(t *testing.T) {
	svc := New(newMemStore(), withClock(nil))
	rpk, rsk, _ := ed25519.GenerateKey(nil)
	sum := sha256.Sum256(rpk)
	upd := func(topicID []byte) *backendpb.ClientEnvelope {
		u, err := identity.NewRevoke(rsk, make([]byte, 32), 1)
		if err != nil {
			t.Fatal(err)
		}
		return &backendpb.ClientEnvelope{
			TargetTopic: append([]byte{byte(ports.TopicIdentityUpdates)}, topicID...),
			Payload:     &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: u},
		}
	}
	if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{upd(sum[:])}); err != nil {
		t.Fatalf("valid identity update: %v", err)
	}
	if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{upd(make([]byte, 32))}); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("identity update on another inbox's topic: %v", err)
	}
}

// OPS-001: commit-log envelopes never expire; other kinds follow Retention.
func TestOPS001_CommitLogNeverExpires(t *testing.T) {
	fc := &stepClock{now: time.Unix(1_700_000_000, 0)}
	store := newMemStore()
	svc := New(store, &Options{Clock: fc, Retention: map[ports.TopicKind]time.Duration{
		ports.TopicGroupMessages: time.Hour, ports.TopicCommitLog: time.Hour,
	}})
	_, priv, _ := ed25519.GenerateKey(nil)
	entry := transporttest.SealedEntry(priv, []byte("123456789012"), []byte("ct"))
	group := transporttest.RandomGroupTopic()
	ids, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{entry, transporttest.GroupMessage(group, []byte("m"))})
	if err != nil {
		t.Fatal(err)
	}
	fc.now = fc.now.Add(2 * time.Hour)
	n, err := svc.SweepExpired(ctx(t))
	if err != nil || n != 1 {
		t.Fatalf("sweep deleted %d (%v), want the group message only", n, err)
	}
	if got, _ := svc.Query(ctx(t), authed, entry.GetTargetTopic(), 0, 0); len(got) != 1 {
		t.Fatal("commit-log entry was swept")
	}
	if got, _ := svc.Query(ctx(t), authed, group, 0, 0); len(got) != 0 {
		t.Fatal("expired group message survived the sweep")
	}
	if h, _ := svc.HighestSequenceID(ctx(t), authed, group); h != ids[1] {
		t.Fatalf("highest id after sweep = %d, want %d (ids are never reused)", h, ids[1])
	}
}

// COMP-081: the auth signature is Ed25519ctx under AuthContext over the challenge.
func TestCOMP081_ChallengeSignature(t *testing.T) {
	svc := New(newMemStore(), withClock(nil))
	pub, priv, _ := ed25519.GenerateKey(nil)
	challenge := []byte("0123456789abcdef0123456789abcdef")
	sig, _ := priv.Sign(nil, challenge, &ed25519.Options{Context: ports.AuthContext})
	c, err := svc.Authenticate(ctx(t), challenge, pub, sig)
	if err != nil || string(c.InstallationKey) != string(pub) {
		t.Fatalf("Authenticate = %v, %v", c, err)
	}
	plain := ed25519.Sign(priv, challenge)
	if _, err := svc.Authenticate(ctx(t), challenge, pub, plain); !errors.Is(err, ports.ErrUnauthenticated) {
		t.Fatalf("signature without context accepted: %v", err)
	}
	if _, err := svc.Authenticate(ctx(t), []byte("other challenge!!"), pub, sig); !errors.Is(err, ports.ErrUnauthenticated) {
		t.Fatalf("signature over another challenge accepted: %v", err)
	}
}

// A subscription woken by commits delivers exactly the acknowledged ids of
// its topic, ascending, also when publishes race with it and other topics
// take ids in between (the FORK-030 reader property over COMP-041 ids).
func TestFORK030_SubscriptionDeliversAckedIDs(t *testing.T) {
	svc := New(newMemStore(), withClock(&Options{PollInterval: time.Hour}))
	topic, other := transporttest.RandomGroupTopic(), transporttest.RandomGroupTopic()
	sub, err := svc.Subscribe(ctx(t), authed, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const n = 300
	acked := make(chan uint64, n)
	go func() {
		defer close(acked)
		for i := 0; i < n; i++ {
			ids, err := svc.Publish(context.Background(), authed, []*backendpb.ClientEnvelope{
				transporttest.GroupMessage(other, []byte{1}), transporttest.GroupMessage(topic, []byte{1})})
			if err != nil {
				t.Errorf("Publish: %v", err)
				return
			}
			acked <- ids[1]
		}
	}()
	var last uint64
	for want := range acked {
		e, err := sub.Next(ctx(t))
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if e.GetSequenceId() != want {
			t.Fatalf("got id %d, want the next acknowledged id %d", e.GetSequenceId(), want)
		}
		if want <= last+1 {
			t.Fatalf("id %d follows %d with no id taken by the other topic between", want, last)
		}
		last = want
	}
	sub.Close()
	if _, err := sub.Next(ctx(t)); !errors.Is(err, ports.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

func TestPublish_NeedsAuthentication(t *testing.T) {
	svc := New(newMemStore(), withClock(nil))
	_, err := svc.Publish(ctx(t), ports.Caller{}, []*backendpb.ClientEnvelope{transporttest.GroupMessage(transporttest.RandomGroupTopic(), []byte("x"))})
	if !errors.Is(err, ports.ErrUnauthenticated) {
		t.Fatalf("anonymous publish: %v", err)
	}
}

// stepClock is a clock whose Now moves only when the test sets it.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time                         { return c.now }
func (c *stepClock) After(d time.Duration) <-chan time.Time { return make(chan time.Time) }

// API-201 paging: a page never exceeds MaxPageBytes (but holds at least one
// envelope), limit is capped at MaxPageSize, and paging still reads the
// whole topic in order.
func TestAPI201_PagesBoundedByBytesAndCount(t *testing.T) {
	svc := New(newMemStore(), withClock(&Options{MaxPageBytes: 3000, MaxPageSize: 5}))
	topic, other := transporttest.RandomGroupTopic(), transporttest.RandomGroupTopic()
	var want []uint64
	for i := 0; i < 12; i++ {
		ids, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{
			transporttest.GroupMessage(topic, make([]byte, 1000)), transporttest.GroupMessage(other, []byte{1})})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ids[0])
	}
	var after uint64
	var got []uint64
	for {
		page, err := svc.Query(ctx(t), authed, topic, after, 100)
		if err != nil {
			t.Fatalf("Query after %d: %v", after, err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 2 {
			t.Fatalf("page of %d 1000-byte envelopes exceeds a 3000-byte bound", len(page))
		}
		for _, e := range page {
			got = append(got, e.GetSequenceId())
			after = e.GetSequenceId()
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("paged ids %v, published %v", got, want)
	}
	big := New(newMemStore(), withClock(&Options{MaxPageBytes: 10, MaxPageSize: 5}))
	big.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, make([]byte, 100))})
	if page, _ := big.Query(ctx(t), authed, topic, 0, 0); len(page) != 1 {
		t.Fatalf("an envelope larger than MaxPageBytes must still be served alone, got %d", len(page))
	}
	count := New(newMemStore(), withClock(&Options{MaxPageSize: 5}))
	for i := 0; i < 8; i++ {
		count.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, []byte{1})})
	}
	if page, _ := count.Query(ctx(t), authed, topic, 0, 1000); len(page) != 5 {
		t.Fatalf("limit 1000 with MaxPageSize 5 returned %d", len(page))
	}
}

// The service refuses batches over MaxBatch and empty ones.
func TestPublish_BatchLimits(t *testing.T) {
	svc := New(newMemStore(), withClock(&Options{MaxBatch: 2}))
	topic := transporttest.RandomGroupTopic()
	m := transporttest.GroupMessage(topic, []byte{1})
	if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{m, m, m}); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("3 envelopes over a limit of 2: %v", err)
	}
	if _, err := svc.Publish(ctx(t), authed, nil); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("empty batch: %v", err)
	}
}

// An envelope whose payload is a field this version does not know is
// refused as unknown, not stored.
func TestPublish_UnknownPayload(t *testing.T) {
	svc := New(newMemStore(), withClock(nil))
	env := &backendpb.ClientEnvelope{TargetTopic: transporttest.RandomGroupTopic()}
	// Field 9, length-delimited, 1 byte: a payload from a later version.
	env.ProtoReflect().SetUnknown([]byte{0x4a, 1, 0})
	_, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{env})
	if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), "unknown payload") {
		t.Fatalf("unknown payload: %v", err)
	}
}

// withClock returns opts with a step clock when it has none.
func withClock(opts *Options) *Options {
	if opts == nil {
		opts = &Options{}
	}
	if opts.Clock == nil {
		opts.Clock = &stepClock{now: time.Unix(1_700_000_000, 0)}
	}
	return opts
}

// Core reads time only through ports.Clock: a service without one refuses
// to stamp envelopes rather than read the system time.
func TestPublish_NeedsAClock(t *testing.T) {
	svc := New(newMemStore(), nil)
	_, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{transporttest.GroupMessage(transporttest.RandomGroupTopic(), []byte("x"))})
	if !errors.Is(err, ports.ErrUnavailable) || !strings.Contains(err.Error(), "clock") {
		t.Fatalf("Publish without a clock: %v", err)
	}
}

// COMP-395: the GroupInfo topic (kind 0x05, named by the group id) takes
// a group_message payload holding an MLSMessage GroupInfo, refuses any
// other, and is read only over an authenticated connection, as the
// group's message topic is.
func TestCOMP395_GroupInfoTopicAdmission(t *testing.T) {
	svc := New(newMemStore(), withClock(nil))
	topic := append([]byte{byte(ports.TopicGroupInfo)}, make([]byte, 32)...)
	msg := append([]byte{0, 1, 0, wireGroupInfo}, "group info"...)
	gi := &backendpb.ClientEnvelope{TargetTopic: topic, Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: msg}}
	if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{gi}); err != nil {
		t.Fatalf("GroupInfo on its topic: %v", err)
	}
	if env, err := svc.QueryNewest(ctx(t), authed, topic); err != nil || string(env.GetEnvelope().GetGroupMessage()) != string(msg) {
		t.Fatalf("newest GroupInfo: %v, %v", env, err)
	}
	if _, err := svc.QueryNewest(ctx(t), ports.Caller{}, topic); !errors.Is(err, ports.ErrUnauthenticated) {
		t.Fatalf("anonymous read of a GroupInfo topic: %v", err)
	}
	kp := keyPackage(make([]byte, 32))
	kp.TargetTopic = topic
	if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{kp}); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("key package on a GroupInfo topic: %v", err)
	}
}
