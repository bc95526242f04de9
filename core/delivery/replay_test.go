package delivery

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// COMP-333: an identity update whose exact bytes admission accepted
// lately is admitted without its signatures being checked again. The test
// plants in the set the digest of an update that would fail
// verification: it is admitted, which only the set can do; removing the
// set (admitOnce calling admit straight away) makes it refused. Bytes
// refused once are not remembered, a changed byte misses the set, and the
// set keeps at most admittedCap digests.
func TestCOMP333_ReplayedIdentityUpdateNotVerifiedAgain(t *testing.T) {
	svc := New(newMemStore(), withClock(nil))
	_, rsk, _ := ed25519.GenerateKey(nil)
	_, isk, _ := ed25519.GenerateKey(nil)
	u, err := identity.NewAdd(rsk, isk, 7)
	if err != nil {
		t.Fatal(err)
	}
	good := identityEnvelope(t, u.GetInboxId(), &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: u})
	if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{good, good, good}); err != nil {
		t.Fatalf("a valid update published three times in one batch: %v", err)
	}

	bad := proto.Clone(good).(*backendpb.ClientEnvelope)
	bad.GetIdentityUpdate().RecoverySignature[0] ^= 1
	if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{bad}); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("a bad signature: %v, want refused", err)
	}
	if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{bad}); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("a refused update was remembered as admitted: %v", err)
	}

	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(bad)
	if err != nil {
		t.Fatal(err)
	}
	svc.admitted.add(sha256.Sum256(raw)) // as if these bytes had been verified
	if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{bad}); err != nil {
		t.Fatalf("bytes in the admitted set were verified again: %v", err)
	}
	worse := proto.Clone(bad).(*backendpb.ClientEnvelope)
	worse.GetIdentityUpdate().RecoverySignature[1] ^= 1
	if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{worse}); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("bytes not in the set skipped verification: %v", err)
	}

	a := newAdmitted()
	digest := func(i int) [sha256.Size]byte { return sha256.Sum256([]byte{byte(i), byte(i >> 8)}) }
	for i := range admittedCap + 10 {
		a.add(digest(i))
	}
	if len(a.set) != admittedCap || a.has(digest(0)) || !a.has(digest(admittedCap+9)) {
		t.Fatalf("set of %d digests after %d adds, want the newest %d", len(a.set), admittedCap+10, admittedCap)
	}
}
