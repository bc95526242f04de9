package identity

import (
	"crypto/ed25519"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"

	"github.com/regroup-mls/regroup/proto/identitypb"
)

// badUpdates returns updates each broken in one way, with the check
// VerifyUpdate names: a corrupted signature of each role, signatures
// made without the Ed25519ctx context (pure Ed25519: valid signatures of
// the right keys over the right bytes, in another scheme), an
// installation key of small order with a signature crypto/ed25519
// accepts (COMP-320 refuses the key), and a malformed update.
func badUpdates(t testing.TB) []*identitypb.IdentityUpdate {
	key := func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	add := func() (*identitypb.IdentityUpdate, ed25519.PrivateKey, ed25519.PrivateKey) {
		rk, ik := key(), key()
		u, err := NewAdd(rk, ik, 1)
		if err != nil {
			t.Fatal(err)
		}
		return u, rk, ik
	}
	flip := func(b []byte) { b[5] ^= 1 }
	var out []*identitypb.IdentityUpdate

	u, _, _ := add() // recovery signature corrupted
	flip(u.RecoverySignature)
	out = append(out, u)

	u, _, _ = add() // installation signature corrupted
	flip(u.GetAddInstallation().InstallationSignature)
	out = append(out, u)

	u, rk, ik := add() // both signatures pure Ed25519, without the context
	tbs, _ := TBS(u)
	u.RecoverySignature, u.GetAddInstallation().InstallationSignature = ed25519.Sign(rk, tbs), ed25519.Sign(ik, tbs)
	out = append(out, u)

	// An installation key of small order (the identity point) with R = the
	// identity and S = 0: crypto/ed25519 accepts that signature over any
	// message, edkey refuses the key.
	rk = key()
	id := make([]byte, 32)
	id[0] = 1
	rpub := rk.Public().(ed25519.PublicKey)
	u = &identitypb.IdentityUpdate{InboxId: InboxID(rpub), RecoveryPublicKey: rpub, CreatedNs: 1,
		Action: &identitypb.IdentityUpdate_AddInstallation{AddInstallation: &identitypb.AddInstallation{
			InstallationKey: id, InstallationSignature: append(append([]byte{}, id...), make([]byte, 32)...)}}}
	tbs, _ = TBS(u)
	u.RecoverySignature, _ = sign(rk, tbs)
	if err := ed25519.VerifyWithOptions(id, tbs, u.GetAddInstallation().GetInstallationSignature(), &ed25519.Options{Context: UpdateContext}); err != nil {
		t.Fatalf("test setup: crypto/ed25519 should accept the small-order key's signature: %v", err)
	}
	out = append(out, u)

	// An add authorised by an installation, its authorizer signature
	// corrupted.
	rk, by, nk := key(), key(), key()
	req, err := NewAddRequest(nk, rk.Public().(ed25519.PublicKey), 2)
	if err != nil {
		t.Fatal(err)
	}
	if u, err = AuthorizeAdd(by, req.GetInboxId(), req); err != nil {
		t.Fatal(err)
	}
	flip(u.GetAddInstallation().AuthorizerSignature)
	out = append(out, u)

	rv, err := NewRevoke(key(), key().Public().(ed25519.PublicKey), 3) // a revoke, corrupted
	if err != nil {
		t.Fatal(err)
	}
	flip(rv.RecoverySignature)
	out = append(out, rv)

	u, _, _ = add() // a signature of the wrong length
	u.RecoverySignature = u.RecoverySignature[:63]
	out = append(out, u)

	u, _, _ = add() // malformed: no action
	u.Action = nil
	return append(out, u, nil)
}

// COMP-580: verifyUpdates answers each update exactly as VerifyUpdate
// does, error text included, in sets large enough for a batch (honest
// adds among them) and small ones: a bad update in a batch is found and
// named as VerifyUpdate alone names it, and the honest ones pass.
func TestCOMP580_BatchVerificationAnswersAsVerifyUpdate(t *testing.T) {
	bad := badUpdates(t)
	var honest []*identitypb.IdentityUpdate
	for i := 0; i < 140; i++ { // 280 signatures: past ed25519batch.MinBatch
		_, rk, _ := ed25519.GenerateKey(nil)
		_, ik, _ := ed25519.GenerateKey(nil)
		u, err := NewAdd(rk, ik, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		honest = append(honest, u)
	}
	sets := [][]*identitypb.IdentityUpdate{append(append([]*identitypb.IdentityUpdate{}, honest...), bad...), bad, honest}
	for i := range bad { // each bad update alone among honest ones
		sets = append(sets, append(append([]*identitypb.IdentityUpdate{}, honest[:70]...), append([]*identitypb.IdentityUpdate{bad[i]}, honest[70:]...)...))
	}
	for n, set := range sets {
		got := verifyUpdates(set)
		for i, u := range set {
			want := VerifyUpdate(u)
			if fmt.Sprint(got[i]) != fmt.Sprint(want) {
				t.Fatalf("set %d, update %d: batch %v, VerifyUpdate %v", n, i, got[i], want)
			}
		}
	}
	for i, u := range bad {
		if VerifyUpdate(u) == nil {
			t.Fatalf("bad update %d verifies", i)
		}
	}
}

// COMP-580: held updates read from the cache are verified in one batch
// across inboxes; a record that does not verify (any of badUpdates) is
// never held as valid, and the valid ones are.
func TestCOMP580_AddAllHoldsOnlyValidUpdates(t *testing.T) {
	bad := badUpdates(t)
	var hs []*held
	var through []uint64
	var records [][]ports.IdentityUpdateRecord
	valid := map[int]bool{}
	for i := 0; i < 140; i++ {
		var u *identitypb.IdentityUpdate
		if i%10 == 3 && i/10 < len(bad) && bad[i/10] != nil {
			u = bad[i/10]
		} else {
			_, rk, _ := ed25519.GenerateKey(nil)
			_, ik, _ := ed25519.GenerateKey(nil)
			u, _ = NewAdd(rk, ik, 1)
			valid[i] = true
		}
		b, err := proto.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, newHeld(u.GetInboxId()))
		through = append(through, 7)
		records = append(records, []ports.IdentityUpdateRecord{{InboxID: u.GetInboxId(), SequenceID: 7, Update: b}})
	}
	addAll(hs, records, through, nil)
	for i, h := range hs {
		if h.validAt(7) != valid[i] {
			t.Fatalf("inbox %d: held as valid %v, want %v", i, h.validAt(7), valid[i])
		}
	}
}
