package keypackage_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
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
	t        *testing.T
	svc      ports.DeliveryService
	recovery ed25519.PrivateKey
	inbox    string
	keys     []ed25519.PrivateKey
	seq      uint64
}

func newSenderWorld(t *testing.T, n int) *senderWorld {
	w := &senderWorld{t: t, svc: newService(t, clock.NewFake(t0))}
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
