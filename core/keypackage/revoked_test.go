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
	if _, err := identity.Revoke(ctx, identity.Options{Store: in.store, Transport: in.tr, Clock: clk}, in.id.PublicKey()); err != nil {
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
