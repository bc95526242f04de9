package keypackage_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// senderWorld is an inbox of several installations on a delivery service,
// each publishing whatever package a test gives it.
type senderWorld struct {
	t        testing.TB
	svc      ports.DeliveryService
	recovery ed25519.PrivateKey
	inbox    string
	keys     []ed25519.PrivateKey
	seq      uint64
}

func newSenderWorld(t testing.TB, n int) *senderWorld {
	return newSenderWorldOn(t, newService(t, clock.NewFake(t0)), n)
}

// newSenderWorldOn is newSenderWorld on an existing delivery service.
func newSenderWorldOn(t testing.TB, svc ports.DeliveryService, n int) *senderWorld {
	w := &senderWorld{t: t, svc: svc}
	_, w.recovery, _ = ed25519.GenerateKey(nil)
	tr := memtransport.New(w.svc, nil)
	for i := 0; i < n; i++ {
		_, k, _ := ed25519.GenerateKey(nil)
		u, err := identity.NewAdd(w.recovery, k, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		w.inbox = u.GetInboxId()
		topic, _ := identity.Topic(w.inbox)
		ids, err := tr.Publish(testCtx(t), []*backendpb.ClientEnvelope{{TargetTopic: topic,
			Payload: &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: u}}})
		if err != nil {
			t.Fatal(err)
		}
		w.keys, w.seq = append(w.keys, k), ids[0]
	}
	return w
}

// publish publishes kp as installation i's package, as installation i.
func (w *senderWorld) publish(i int, kp []byte) {
	pub := w.keys[i].Public().(ed25519.PublicKey)
	tr := memtransport.New(w.svc, &memtransport.Options{InstallationKey: pub})
	_, err := tr.Publish(testCtx(w.t), []*backendpb.ClientEnvelope{{
		TargetTopic: append([]byte{byte(ports.TopicKeyPackages)}, pub...),
		Payload:     &backendpb.ClientEnvelope_KeyPackage{KeyPackage: &apipb.KeyPackage{KeyPackageTlsSerialized: kp}},
	}})
	if err != nil {
		w.t.Fatalf("publish package of installation %d: %v", i, err)
	}
}

func (w *senderWorld) state() ports.AssociationState {
	st := ports.AssociationState{InboxID: w.inbox, SequenceID: w.seq}
	for _, k := range w.keys {
		st.InstallationKeys = append(st.InstallationKeys, k.Public().(ed25519.PublicKey))
	}
	return st
}

func (w *senderWorld) craft(i int) craft {
	return craft{suite: 3, inbox: w.inbox, signer: w.keys[i], notBefore: t0.Add(-time.Hour), notAfter: t0.Add(time.Hour),
		exts: goodExtensions(w.t, ports.WrapperXWingMLKEM768Draft6)}
}

// JOIN-093 and JOIN-012: an inbox whose installations are one good, one
// expired, one with a last-resort mark carrying data and one that never
// published is added with the good one, and the other three are exactly
// the failed_installations of its GROUP_MEMBERSHIP entry.
func TestJOIN093_JOIN012_OneBadInstallation(t *testing.T) {
	w := newSenderWorld(t, 4)
	w.publish(0, w.craft(0).build(t))
	expired := w.craft(1)
	expired.notAfter = t0
	w.publish(1, expired.build(t))
	marked := w.craft(2)
	marked.exts[2] = lastResort([]byte("data"))
	w.publish(2, marked.build(t))
	st := w.state()
	got, err := validator(t).FetchInbox(testCtx(t), memtransport.New(w.svc, &memtransport.Options{Anonymous: true}), st, t0)
	if err != nil {
		t.Fatalf("JOIN-093: one bad installation failed the inbox: %v", err)
	}
	if len(got.Usable) != 1 || !bytes.Equal(got.Usable[0].InstallationKey, st.InstallationKeys[0]) || got.Usable[0].SequenceID == 0 {
		t.Fatalf("usable = %+v, want installation 0 alone", got.Usable)
	}
	want := map[string]error{
		string(st.InstallationKeys[1]): keypackage.ErrLifetime,
		string(st.InstallationKeys[2]): keypackage.ErrLastResortData,
		string(st.InstallationKeys[3]): ports.ErrNotFound,
	}
	for _, f := range got.Failed {
		if !errors.Is(f.Err, want[string(f.InstallationKey)]) {
			t.Errorf("failed installation %x: %v, want %v", f.InstallationKey, f.Err, want[string(f.InstallationKey)])
		}
	}
	raw, _ := proto.Marshal(got.MembershipEntry())
	var entry contentspb.GroupMembershipEntry
	if err := proto.Unmarshal(raw, &entry); err != nil {
		t.Fatal(err)
	}
	failed := entry.GetV1().GetFailedInstallations()
	if entry.GetV1().GetSequenceId() != w.seq || len(failed) != 3 {
		t.Fatalf("JOIN-012: entry = %v, want sequence id %d and 3 failed installations", &entry, w.seq)
	}
	for i, k := range failed {
		if !bytes.Equal(k, st.InstallationKeys[i+1]) {
			t.Errorf("JOIN-012: failed_installations[%d] = %x, want %x", i, k, st.InstallationKeys[i+1])
		}
	}
}

// JOIN-093: an inbox none of whose installations has a usable package
// cannot be added, and says so with ErrNoUsableInstallation.
func TestJOIN093_NoUsableInstallation(t *testing.T) {
	w := newSenderWorld(t, 2)
	other := w.craft(0)
	other.inbox = "another-inbox"
	w.publish(0, other.build(t))
	got, err := validator(t).FetchInbox(testCtx(t), memtransport.New(w.svc, nil), w.state(), t0)
	if !errors.Is(err, keypackage.ErrNoUsableInstallation) || len(got.Failed) != 2 || !errors.Is(got.Failed[0].Err, keypackage.ErrWrongInbox) {
		t.Fatalf("FetchInbox = %+v, %v; want ErrNoUsableInstallation with both failed", got, err)
	}
}

// gatedNewest makes the first n QueryNewest calls wait until all n are in
// flight at once, records the most ever in flight, and fails the reads of
// the topics in fail as an unreachable service does.
type gatedNewest struct {
	ports.Transport
	n                 int32
	started, inflight atomic.Int32
	most              atomic.Int32
	all               chan struct{}
	fail              map[string]bool
	t                 *testing.T
}

func (g *gatedNewest) QueryNewest(ctx context.Context, topic []byte) (*backendpb.OriginatorEnvelope, error) {
	in := g.inflight.Add(1)
	defer g.inflight.Add(-1)
	for m := g.most.Load(); in > m && !g.most.CompareAndSwap(m, in); m = g.most.Load() {
	}
	if k := g.started.Add(1); k <= g.n {
		if k == g.n {
			close(g.all)
		}
		select {
		case <-g.all:
		case <-time.After(30 * time.Second):
			g.t.Errorf("only %d of the first %d key-package fetches ever ran at once", g.inflight.Load(), g.n)
		}
	}
	if g.fail[string(topic)] {
		return nil, fmt.Errorf("%w: connection refused", ports.ErrUnavailable)
	}
	return g.Transport.QueryNewest(ctx, topic)
}

// COMP-131, JOIN-093, JOIN-012: FetchInboxes fetches and validates the
// installations of many inboxes Concurrency at a time, never more, and
// gives each inbox what the rules give it alone: the usable installations
// and the failed ones in the state's order, ErrNoUsableInstallation for an
// inbox with none, and a transport failure for the inbox it hit only —
// the same answers as one FetchInbox call per inbox.
func TestCOMP131_FetchInboxesConcurrently(t *testing.T) {
	svc := newService(t, clock.NewFake(t0))
	x, y, z, f := newSenderWorldOn(t, svc, 2), newSenderWorldOn(t, svc, 3), newSenderWorldOn(t, svc, 1), newSenderWorldOn(t, svc, 2)
	x.publish(0, x.craft(0).build(t))
	expired := x.craft(1)
	expired.notAfter = t0
	x.publish(1, expired.build(t))
	for i := range 3 {
		y.publish(i, y.craft(i).build(t))
	}
	for i := range 2 {
		f.publish(i, f.craft(i).build(t))
	}
	states := []ports.AssociationState{x.state(), y.state(), z.state(), f.state()}
	failTopic := append([]byte{byte(ports.TopicKeyPackages)}, states[3].InstallationKeys[1]...)
	const workers = 4
	g := &gatedNewest{Transport: memtransport.New(svc, nil), n: workers, all: make(chan struct{}),
		fail: map[string]bool{string(failTopic): true}, t: t}
	v := validator(t)
	v.Concurrency = workers
	got, errs := v.FetchInboxes(testCtx(t), g, states, t0)
	if m := g.most.Load(); m != workers {
		t.Errorf("at most %d fetches ran at once, want exactly Concurrency = %d", m, workers)
	}
	keys := func(vs []keypackage.Validated) [][]byte {
		var out [][]byte
		for _, v := range vs {
			out = append(out, v.InstallationKey)
		}
		return out
	}
	eq := func(a, b [][]byte) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if !bytes.Equal(a[i], b[i]) {
				return false
			}
		}
		return true
	}
	ik := func(i, k int) [][]byte { return [][]byte{states[i].InstallationKeys[k]} }
	sum := func(p keypackage.InboxPackages, err error) string {
		return fmt.Sprintf("usable %x, failed %x, error %v", keys(p.Usable), p.FailedInstallations(), err)
	}
	switch {
	case errs[0] != nil || !eq(keys(got[0].Usable), ik(0, 0)) || !eq(got[0].FailedInstallations(), ik(0, 1)) || !errors.Is(got[0].Failed[0].Err, keypackage.ErrLifetime):
		t.Errorf("JOIN-093: inbox with an expired installation: %s", sum(got[0], errs[0]))
	case errs[1] != nil || !eq(keys(got[1].Usable), states[1].InstallationKeys) || len(got[1].Failed) != 0:
		t.Errorf("inbox with three good installations: %s", sum(got[1], errs[1]))
	case !errors.Is(errs[2], keypackage.ErrNoUsableInstallation) || !eq(got[2].FailedInstallations(), ik(2, 0)) || !errors.Is(got[2].Failed[0].Err, ports.ErrNotFound):
		t.Errorf("inbox without a package: %s", sum(got[2], errs[2]))
	case !errors.Is(errs[3], ports.ErrUnavailable) || len(got[3].Usable) != 0:
		t.Errorf("inbox whose fetch failed: %s; want ErrUnavailable, nothing usable", sum(got[3], errs[3]))
	}
	for i, st := range states {
		one, err := v.FetchInbox(testCtx(t), g, st, t0)
		if (err == nil) != (errs[i] == nil) || !eq(keys(one.Usable), keys(got[i].Usable)) || !eq(one.FailedInstallations(), got[i].FailedInstallations()) {
			t.Errorf("inbox %d: FetchInboxes %s; FetchInbox %s", i, sum(got[i], errs[i]), sum(one, err))
		}
	}
}
