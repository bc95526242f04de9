package identity_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

type answer struct {
	st  ports.AssociationState
	err error
}

// waitWaiting polls (generous deadline) until the resolver waits on the
// fake clock.
func waitWaiting(t *testing.T, w *world) {
	deadline := time.Now().Add(20 * time.Second)
	for w.clock.Waiters() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the resolver never waited on the clock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// JOIN-051 and JOIN-059: for a sequence id it does not hold, the resolver
// fetches and keeps fetching for its retry window; an update that arrives
// inside the window is found, and the window's end without one is
// ErrNotFound, not before.
func TestJOIN051_JOIN059_RetryWindow(t *testing.T) {
	w := newWorld(t, "sqlite")
	tr := memtransport.New(w.svc, nil)
	r := w.resolver(t, tr, 5*time.Second)
	rk := mustKey(t)
	u, _ := identity.NewAdd(rk, mustKey(t), 1)
	next := publish(t, tr, u) + 1 // the shared counter's next id
	ch := make(chan answer, 1)
	go func() {
		st, err := r.AssociationState(context.Background(), u.GetInboxId(), next)
		ch <- answer{st, err}
	}()
	waitWaiting(t, w)
	u2, _ := identity.NewAdd(rk, mustKey(t), 2)
	if got := publish(t, tr, u2); got != next {
		t.Fatalf("test setup: update got %d, want %d", got, next)
	}
	w.clock.Advance(time.Second)
	a := <-ch
	if a.err != nil || len(a.st.InstallationKeys) != 2 || a.st.SequenceID != next {
		t.Fatalf("JOIN-051: state once the update arrived = %+v, %v", a.st, a.err)
	}
	go func() {
		st, err := r.AssociationState(context.Background(), u.GetInboxId(), next+50)
		ch <- answer{st, err}
	}()
	for i := 0; i < 4; i++ {
		waitWaiting(t, w)
		w.clock.Advance(time.Second)
	}
	waitWaiting(t, w) // 4 of 5 seconds passed: still fetching
	select {
	case a := <-ch:
		t.Fatalf("JOIN-059: answered %v before the retry window ended", a.err)
	default:
	}
	w.clock.Advance(time.Second)
	if a := <-ch; !errors.Is(a.err, ports.ErrNotFound) {
		t.Fatalf("JOIN-059: after the window = %v, want ErrNotFound", a.err)
	}
}

// failing fails every read as an unreachable service does.
type failing struct{ ports.Transport }

func (failing) Query(context.Context, []byte, uint64, int) ([]*backendpb.OriginatorEnvelope, error) {
	return nil, fmt.Errorf("%w: connection refused", ports.ErrUnavailable)
}

// JOIN-051: the resolver never answers from partial state — a fetch that
// keeps failing ends in ErrUnavailable, not in an answer or ErrNotFound.
func TestJOIN051_FetchFailureIsUnavailable(t *testing.T) {
	w := newWorld(t, "sqlite")
	r := w.resolver(t, failing{}, 2*time.Second)
	inbox := identity.InboxID(mustKey(t).Public().(ed25519Pub))
	ch := make(chan answer, 1)
	go func() { st, err := r.AssociationState(context.Background(), inbox, 3); ch <- answer{st, err} }()
	for i := 0; i < 2; i++ {
		waitWaiting(t, w)
		w.clock.Advance(time.Second)
	}
	if a := <-ch; !errors.Is(a.err, ports.ErrUnavailable) {
		t.Fatalf("fetch failing throughout the window = %v, want ErrUnavailable", a.err)
	}
}

// COMP-071: readers ignore an update whose signature fails — here one a
// hostile service serves — and fold only the valid ones; a state named at
// the forged update's sequence id does not exist.
func TestCOMP071_ReadersIgnoreBadSignatures(t *testing.T) {
	rk := mustKey(t)
	good, _ := identity.NewAdd(rk, mustKey(t), 1)
	forged, _ := identity.NewAdd(rk, mustKey(t), 2)
	forged.GetAddInstallation().InstallationSignature[0] ^= 1
	revokeUnsigned, _ := identity.NewRevoke(rk, good.GetAddInstallation().GetInstallationKey(), 3)
	revokeUnsigned.RecoverySignature = nil
	recs := []ports.IdentityUpdateRecord{rec(t, 10, good), rec(t, 20, forged), rec(t, 30, revokeUnsigned)}
	st := identity.Fold(good.GetInboxId(), recs, 30)
	if len(st.InstallationKeys) != 1 || string(st.InstallationKeys[0]) != string(good.GetAddInstallation().GetInstallationKey()) {
		t.Fatalf("fold = %x, want only the validly added installation", st.InstallationKeys)
	}
	if err := identity.VerifyUpdate(forged); !errors.Is(err, identity.ErrInvalidUpdate) {
		t.Fatalf("VerifyUpdate(forged) = %v", err)
	}
}

func rec(t *testing.T, seq uint64, u *identitypb.IdentityUpdate) ports.IdentityUpdateRecord {
	b, err := protoMarshal(u)
	if err != nil {
		t.Fatal(err)
	}
	return ports.IdentityUpdateRecord{InboxID: u.GetInboxId(), SequenceID: seq, Update: b}
}

func FuzzDecodeUpdate(f *testing.F) {
	rk, ik := mustKeyF(f), mustKeyF(f)
	u, _ := identity.NewAdd(rk, ik, 1)
	b, _ := protoMarshal(u)
	f.Add(b)
	req, _ := identity.NewAddRequest(mustKeyF(f), rk.Public().(ed25519Pub), 2)
	if a, err := identity.AuthorizeAdd(ik, req.GetInboxId(), req); err == nil {
		b, _ = protoMarshal(a)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := identity.DecodeUpdate(b)
		if err != nil && !errors.Is(err, identity.ErrInvalidUpdate) {
			t.Fatalf("error outside ErrInvalidUpdate: %v", err)
		}
		identity.Fold("x", []ports.IdentityUpdateRecord{{InboxID: "x", SequenceID: 1, Update: b}}, 1)
		// Folded as its own inbox's first update (its signatures verified
		// by the batch path, COMP-580), it associates its key exactly when
		// DecodeUpdate accepts it as an add the recovery key authorised.
		var p identitypb.IdentityUpdate
		if protoUnmarshal(b, &p) != nil || p.GetInboxId() == "" {
			return
		}
		st := identity.Fold(p.GetInboxId(), []ports.IdentityUpdateRecord{{InboxID: p.GetInboxId(), SequenceID: 1, Update: b}}, 1)
		add := u.GetAddInstallation()
		if want := err == nil && add != nil && len(add.GetAuthorizerKey()) == 0; (len(st.InstallationKeys) == 1) != want {
			t.Fatalf("fold holds %d keys; DecodeUpdate: %v", len(st.InstallationKeys), err)
		}
	})
}

// placing serves, besides what the service holds, envelopes placed at ids
// the delivery service chose.
type placing struct {
	ports.Transport
	placed []*backendpb.OriginatorEnvelope
}

func (p *placing) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	envs, err := p.Transport.Query(ctx, topic, after, limit)
	if err != nil {
		return nil, err
	}
	for _, e := range p.placed {
		if e.GetSequenceId() > after && string(e.GetEnvelope().GetTargetTopic()) == string(topic) {
			envs = append(envs, e)
		}
	}
	return envs, nil
}

// COMP-249: junk an operator places on an inbox's identity topic near
// 2^63−1 — bytes that are no update, and a forged update of the inbox —
// is never held: a revocation published after it, with a lower id, is
// fetched and folded, and a lookup at the revocation's id answers, not
// JOIN-059's ErrNotFound.
func TestCOMP249_JunkAtAnExtremeIDHidesNoUpdate(t *testing.T) {
	w := newWorld(t, "sqlite")
	inner := memtransport.New(w.svc, nil)
	rk := mustKey(t)
	add, _ := identity.NewAdd(rk, mustKey(t), 1)
	publish(t, inner, add)
	topic, _ := identity.Topic(add.GetInboxId())
	forged, _ := identity.NewAdd(rk, mustKey(t), 2)
	forged.GetAddInstallation().InstallationSignature[0] ^= 1
	tr := &placing{Transport: inner, placed: []*backendpb.OriginatorEnvelope{
		{SequenceId: 1<<63 - 2, Envelope: &backendpb.ClientEnvelope{TargetTopic: topic}},
		{SequenceId: 1<<63 - 1, Envelope: &backendpb.ClientEnvelope{TargetTopic: topic,
			Payload: &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: forged}}},
	}}
	r := w.resolver(t, tr, time.Second)
	ctx := context.Background()
	if err := r.Sync(ctx, add.GetInboxId()); err != nil {
		t.Fatal(err)
	}
	revoke, _ := identity.NewRevoke(rk, add.GetAddInstallation().GetInstallationKey(), 3)
	at := publish(t, inner, revoke)
	st, err := r.AssociationState(ctx, add.GetInboxId(), at)
	if err != nil {
		t.Fatalf("the state at the revocation's id %d after the junk: %v", at, err)
	}
	if len(st.InstallationKeys) != 0 {
		t.Fatalf("the revocation after the junk was not folded: %x", st.InstallationKeys)
	}
}

// COMP-274: the newest id a delivery service reports for an identity
// topic is not trusted. Lied upward, far past the topic's end, the
// resolver answers at once (its clock never moves) with the state at the
// highest verified update, whose id is that update's; lied downward, with
// the state at the last verified update below it; junk placed at the
// reported id is no update. Nothing verified at or below it is
// ErrNotFound.
func TestCOMP274_ReportedNewestIDIsOnlyABound(t *testing.T) {
	w := newWorld(t, "sqlite")
	inner := memtransport.New(w.svc, nil)
	rk := mustKey(t)
	add, _ := identity.NewAdd(rk, mustKey(t), 1)
	first := publish(t, inner, add)
	add2, _ := identity.NewAdd(rk, mustKey(t), 2)
	second := publish(t, inner, add2)
	topic, _ := identity.Topic(add.GetInboxId())
	junkAt := second + 1000
	tr := &placing{Transport: inner, placed: []*backendpb.OriginatorEnvelope{
		{SequenceId: junkAt, Envelope: &backendpb.ClientEnvelope{TargetTopic: topic}},
	}}
	r := w.resolver(t, tr, time.Hour) // a wait would never end: the clock does not move
	ctx := context.Background()
	inbox := add.GetInboxId()
	for _, tc := range []struct {
		name     string
		reported uint64
		want     uint64
		keys     int
	}{
		{"lied upward past the junk", 1 << 62, second, 2},
		{"at the junk", junkAt, second, 2},
		{"honest", second, second, 2},
		{"lied downward", second - 1, first, 1},
	} {
		st, err := r.NewestUpTo(ctx, inbox, tc.reported)
		if err != nil || st.SequenceID != tc.want || len(st.InstallationKeys) != tc.keys {
			t.Errorf("%s (%d): state at %d with %d keys, %v; want %d with %d", tc.name, tc.reported, st.SequenceID, len(st.InstallationKeys), err, tc.want, tc.keys)
		}
	}
	if _, err := r.NewestUpTo(ctx, inbox, first-1); !errors.Is(err, ports.ErrNotFound) {
		t.Errorf("below every update: %v, want ErrNotFound", err)
	}
	if w.clock.Waiters() != 0 {
		t.Error("the resolver waited on the clock")
	}
}
