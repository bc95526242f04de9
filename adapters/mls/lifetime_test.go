package mls_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// TestCOMP315_MemberAndServiceAgreeOnAddedLifetimes: a member's engine
// refuses a commit adding a key package outside its lifetime, widened by
// the same skew as the delivery service's validator, read from the
// engine's clock; the validator on the same clock gives the same verdict
// on every commit (RFC 9420 §7.3, COMP-315). ProcessAt judges at the
// service's time instead (COMP-316).
func TestCOMP315_MemberAndServiceAgreeOnAddedLifetimes(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Second)
	clk := clock.NewFake(t0)
	a := newInstallation(t, "inbox-a")
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	sig, _, _ := s.GenerateSignatureKey()
	be, err := mls.New(mls.Options{SignaturePrivateKey: sig, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	b := &installation{engine: be, tx: blobTx{blobs: &memBlobs{m: map[string][]byte{}}}, sig: sig, inbox: "inbox-b"}
	gid := []byte("lifetime-group")
	if _, err := a.engine.CreateGroup(ctx, a.tx, gid, a.keyPackage(t), nil); err != nil {
		t.Fatal(err)
	}
	kpb := b.keyPackage(t)
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: [][]byte{kpb.KeyPackage}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.engine.MergePending(ctx, a.tx, gid); err != nil {
		t.Fatal(err)
	}
	staged, err := b.engine.StageWelcome(ctx, b.tx, out.Welcome, ports.KeyPackageRecord{Ref: kpb.Ref, KeyPackage: kpb.KeyPackage,
		InitPrivateKey: kpb.InitPrivateKey, EncryptionPrivateKey: kpb.EncryptionPrivateKey})
	if err != nil {
		t.Fatal(err)
	}
	vb, err := b.engine.InstallWelcome(ctx, b.tx, staged.Handle)
	if err != nil {
		t.Fatal(err)
	}
	gi, err := a.engine.GroupInfo(ctx, a.tx, gid)
	if err != nil {
		t.Fatal(err)
	}
	pub := mls.NewPublicGroups(&mls.PublicOptions{Clock: clk})
	st, err := pub.Open(ctx, gi)
	if err != nil {
		t.Fatal(err)
	}

	c := newInstallation(t, "inbox-c")
	cred, _ := proto.Marshal(&contentspb.MlsCredential{InboxId: c.inbox})
	skew := mls.DefaultLifetimeSkew
	for _, tc := range []struct {
		name         string
		from, to     time.Time
		advance      time.Duration
		wantAccepted bool
	}{
		{"valid", t0.Add(-time.Minute), t0.Add(time.Hour), 0, true},
		{"expired", t0.Add(-3 * skew), t0.Add(-skew - time.Minute), 0, false},
		{"not yet valid", t0.Add(skew + time.Minute), t0.Add(3 * skew), 0, false},
		{"expired within the skew", t0.Add(-3 * skew), t0.Add(-skew + time.Minute), 0, true},
		{"not yet valid within the skew", t0.Add(skew - time.Minute), t0.Add(3 * skew), 0, true},
		// last: the fake clock only moves forward
		{"expired on the engine's clock", t0.Add(-time.Minute), t0.Add(time.Hour), 3 * skew, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kp, err := c.engine.CreateKeyPackage(ctx, ports.KeyPackageOptions{Credential: cred, SignaturePrivateKey: c.sig,
				NotBefore: tc.from, NotAfter: tc.to})
			if err != nil {
				t.Fatal(err)
			}
			out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.engine.ClearPending(ctx, a.tx, gid); err != nil {
				t.Fatal(err)
			}
			clk.Advance(tc.advance)
			_, perr := b.engine.ProcessAt(ctx, b.tx, gid, out.Commit, clk.Now())
			_, serr := pub.Apply(ctx, st.State, out.Commit)
			if tc.wantAccepted {
				if perr != nil || serr != nil {
					t.Fatalf("refused: member %v, service %v", perr, serr)
				}
				return
			}
			if !errors.Is(perr, ports.ErrInvalid) {
				t.Fatalf("member processed the commit: %v", perr)
			}
			if ports.RefusalReason(serr) != ports.RefusedLeafNode {
				t.Fatalf("service: %v, want a refusal as leaf node", serr)
			}
			if v, err := b.engine.Group(ctx, b.tx, gid); err != nil || v.Epoch != vb.Epoch {
				t.Fatalf("refused commit changed the group: %+v %v", v, err)
			}
		})
	}

	// COMP-316: the clock has moved three skews past t0; a commit the
	// service accepted at t0 is refused when judged at the engine's clock,
	// followed when judged at the service's time, and followed by Process,
	// which knows no receipt time and leaves lifetimes to the service.
	kp, err := c.engine.CreateKeyPackage(ctx, ports.KeyPackageOptions{Credential: cred, SignaturePrivateKey: c.sig,
		NotBefore: t0.Add(-time.Minute), NotAfter: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	late, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.engine.ProcessAt(ctx, b.tx, gid, late.Commit, clk.Now()); !errors.Is(err, ports.ErrInvalid) {
		t.Fatalf("late commit at the engine's clock: %v", err)
	}
	if p, err := b.engine.ProcessAt(ctx, b.tx, gid, late.Commit, t0); err != nil || p.Kind != ports.ProcessedCommit {
		t.Fatalf("late commit at the service's time: %+v %v", p, err)
	}
	if p, err := b.engine.Process(ctx, b.tx, gid, late.Commit); err != nil || p.Kind != ports.ProcessedCommit {
		t.Fatalf("late commit without a receipt time: %+v %v", p, err)
	}
}
