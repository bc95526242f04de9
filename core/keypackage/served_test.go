package keypackage_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// forgetfulTransport is a delivery service restored from a backup: its
// key-package topics serve nothing while forget is set.
type forgetfulTransport struct {
	ports.Transport
	forget  bool
	queries int
}

func (f *forgetfulTransport) QueryNewest(ctx context.Context, topic []byte) (*backendpb.OriginatorEnvelope, error) {
	f.queries++
	if f.forget {
		return nil, fmt.Errorf("query newest: %w: topic is empty", ports.ErrNotFound)
	}
	return f.Transport.QueryNewest(ctx, topic)
}

// COMP-463: a manager whose current package the delivery service no
// longer serves (a restore deleted it) publishes a new one at its next
// check; it reads its topic at most once per tick interval.
func TestCOMP463_UnservedPackageReplaced(t *testing.T) {
	clk := clock.NewFake(t0)
	in := newInstallation(t, "sqlite", newService(t, clk), clk)
	ft := &forgetfulTransport{Transport: in.tr}
	opts := in.opts
	opts.Transport = ft
	mgr, err := keypackage.NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := mgr.Publish(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	mgr.Tick(testCtx(t))
	if cur, _ := mgr.Current(testCtx(t)); !bytes.Equal(cur.Ref, p1.Ref) {
		t.Fatal("rotated while the service serves the current package")
	}
	ft.forget = true
	before := ft.queries
	mgr.Tick(testCtx(t)) // within the interval: no read
	if ft.queries != before {
		t.Fatalf("read the topic %d times within one tick interval", ft.queries-before)
	}
	clk.Advance(time.Minute)
	if err := mgr.Tick(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	ft.forget = false
	cur, err := mgr.Current(testCtx(t))
	if err != nil || bytes.Equal(cur.Ref, p1.Ref) {
		t.Fatalf("current package %x, %v after the service lost it; want a new one", cur.Ref, err)
	}
	served, err := in.tr.QueryNewest(testCtx(t), append([]byte{byte(ports.TopicKeyPackages)}, in.id.PublicKey()...))
	if err != nil || served.GetSequenceId() != cur.PublishSequenceID {
		t.Fatalf("served %v, %v; want the new package at %d", served, err, cur.PublishSequenceID)
	}
}
