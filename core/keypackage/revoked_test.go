package keypackage_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// countingTransport counts the publishes that reach the delivery service.
type countingTransport struct {
	lossyTransport
	sent atomic.Int32
}

func (c *countingTransport) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	c.sent.Add(1)
	return c.lossyTransport.Publish(ctx, envs)
}

// JOIN-001: a package built while the installation was associated, whose
// publish response was lost, is not republished once the installation is
// revoked: not by Publish, not by the rotation tick, not by Rotate.
func TestJOIN001_RevokedInstallationRepublishesNothing(t *testing.T) {
	clk := clock.NewFake(t0)
	in := newInstallation(t, "sqlite", newService(t, clk), clk)
	ctx := testCtx(t)
	if _, err := in.mgr.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	ct := &countingTransport{lossyTransport: lossyTransport{Transport: in.tr, fail: true}}
	in.opts.Transport = ct
	mgr, _ := keypackage.NewManager(in.opts)
	if _, err := mgr.Rotate(ctx); err == nil {
		t.Fatal("rotate with a lost response succeeded")
	}
	if _, err := identity.Revoke(ctx, identity.Options{Store: in.store, Transport: in.tr, Clock: clk}, in.id.RecoveryKey, in.id.PublicKey()); err != nil {
		t.Fatal(err)
	}
	ct.fail = false
	ct.sent.Store(0)
	clk.Advance(time.Hour)
	if _, err := mgr.Publish(ctx); !errors.Is(err, keypackage.ErrNotAssociated) {
		t.Fatalf("Publish of the pending package after revocation = %v, want ErrNotAssociated", err)
	}
	if err := mgr.Tick(ctx); !errors.Is(err, keypackage.ErrNotAssociated) {
		t.Fatalf("Tick after revocation = %v, want ErrNotAssociated", err)
	}
	clk.Advance(80 * 24 * time.Hour) // past the rotation point
	if err := mgr.Tick(ctx); !errors.Is(err, keypackage.ErrNotAssociated) {
		t.Fatalf("rotation tick after revocation = %v, want ErrNotAssociated", err)
	}
	if n := ct.sent.Load(); n != 0 {
		t.Fatalf("%d publishes reached the service after the revocation", n)
	}
}

// lyingIDs answers key-package publishes with the sequence ids it is
// given, in turn: a delivery service that lies about them.
type lyingIDs struct {
	ports.Transport
	ids []uint64
}

func (l *lyingIDs) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	if _, err := l.Transport.Publish(ctx, envs); err != nil {
		return nil, err
	}
	id := l.ids[0]
	l.ids = l.ids[1:]
	return []uint64{id}, nil
}

// JOIN-003, JOIN-074, COMP-256: the two guards of key destruction. The
// package with the highest confirmed sequence id is current and keeps its
// keys, and so does every package created after it, when a lying delivery
// service confirms later packages under lower ids: nothing is destroyed,
// however long after.
func TestJOIN003_DestructionGuardsAgainstLyingSequenceIDs(t *testing.T) {
	clk := clock.NewFake(t0)
	in := newInstallation(t, "sqlite", newService(t, clk), clk)
	ctx := testCtx(t)
	in.opts.Transport = &lyingIDs{Transport: in.tr, ids: []uint64{1000, 10, 20}}
	mgr, _ := keypackage.NewManager(in.opts)
	for i := 0; i < 3; i++ {
		if _, err := mgr.Rotate(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour)
	}
	cur, err := mgr.Current(ctx)
	if err != nil || cur.PublishSequenceID != 1000 {
		t.Fatalf("current %d (%v), want the package confirmed under 1000", cur.PublishSequenceID, err)
	}
	clk.Advance(10 * 24 * time.Hour)
	if n, err := mgr.DestroySuperseded(ctx); err != nil || n != 0 {
		t.Fatalf("destroyed %d packages (%v), want none", n, err)
	}
	for _, r := range in.records() {
		if !hasKeys(r) {
			t.Fatalf("package confirmed under %d lost its keys", r.PublishSequenceID)
		}
	}
}
