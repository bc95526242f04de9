package identity_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

// authorized returns an add of a new installation key to the inbox of rk,
// authorised by the installation key by.
func authorized(t *testing.T, rk, by ed25519Priv, created int64) (*identitypb.IdentityUpdate, ed25519Priv) {
	t.Helper()
	k := mustKey(t)
	req, err := identity.NewAddRequest(k, rk.Public().(ed25519Pub), created)
	if err != nil {
		t.Fatal(err)
	}
	u, err := identity.AuthorizeAdd(by, req.GetInboxId(), req)
	if err != nil {
		t.Fatal(err)
	}
	return u, k
}

// COMP-260: the fold applies an add authorised by an installation only
// while that installation is associated: at every reader, an add signed by
// an installation that was revoked before it, or that the inbox never
// associated, changes nothing, and neither does a later add it signed
// before its revocation but published after; an add it signed while
// associated stays. Format-1 updates (recorded) still verify and fold.
func TestCOMP260_FoldRefusesAddsByRevokedOrStrangers(t *testing.T) {
	rk := mustKey(t)
	first, _ := identity.NewAdd(rk, mustKey(t), 1)
	a := first.GetAddInstallation().GetInstallationKey()
	// b: added by a recovery-signed add; c: authorised by b while b is
	// associated; pre: signed by b while associated, published after b's
	// revocation; late: signed by b after it; stranger: by a key never
	// associated.
	bKey := mustKey(t)
	bAdd, _ := identity.NewAdd(rk, bKey, 2)
	c, cKey := authorized(t, rk, bKey, 3)
	pre, preKey := authorized(t, rk, bKey, 4)
	revokeB, _ := identity.NewRevoke(rk, bKey.Public().(ed25519Pub), 5)
	late, lateKey := authorized(t, rk, bKey, 6)
	stranger, strangerKey := authorized(t, rk, mustKey(t), 7)
	recs := []ports.IdentityUpdateRecord{rec(t, 10, first), rec(t, 20, bAdd), rec(t, 30, c), rec(t, 40, revokeB),
		rec(t, 50, pre), rec(t, 60, late), rec(t, 70, stranger)}
	for _, u := range []*identitypb.IdentityUpdate{c, pre, late, stranger} {
		if err := identity.VerifyUpdate(u); err != nil {
			t.Fatalf("an authorised add does not verify on its own: %v", err)
		}
	}
	for seq, want := range map[uint64][][]byte{
		30: {a, bKey.Public().(ed25519Pub), cKey.Public().(ed25519Pub)},
		40: {a, cKey.Public().(ed25519Pub)},
		70: {a, cKey.Public().(ed25519Pub)},
	} {
		if st := identity.Fold(first.GetInboxId(), recs, seq); !same(st.InstallationKeys, want) {
			t.Errorf("COMP-260: state at %d = %x, want %x", seq, st.InstallationKeys, want)
		}
	}
	for _, k := range []ed25519Priv{preKey, lateKey, strangerKey} {
		if st := identity.Fold(first.GetInboxId(), recs, 70); indexOf(st.InstallationKeys, k.Public().(ed25519Pub)) >= 0 {
			t.Errorf("COMP-260: an add authorised by a revoked or unknown installation was applied")
		}
	}
	if got := identity.AddedBy(first.GetInboxId(), recs, 70, bKey.Public().(ed25519Pub)); !same(got, [][]byte{cKey.Public().(ed25519Pub)}) {
		t.Errorf("COMP-263: AddedBy(b) = %x, want c only", got)
	}
}

func indexOf(keys [][]byte, k []byte) int {
	for i, x := range keys {
		if bytes.Equal(x, k) {
			return i
		}
	}
	return -1
}

// COMP-260: VerifyUpdate (which regroupd's admission runs) refuses an add
// that authorises itself, carries both authorisations, or whose authoriser
// signature does not verify; a revoke needs the recovery signature.
func TestCOMP260_VerifyUpdateChecksTheAuthorisation(t *testing.T) {
	rk, k := mustKey(t), mustKey(t)
	req, _ := identity.NewAddRequest(k, rk.Public().(ed25519Pub), 1)
	if err := identity.VerifyUpdate(req); !errors.Is(err, identity.ErrInvalidUpdate) {
		t.Fatalf("an unauthorised request verifies: %v", err)
	}
	if _, err := identity.AuthorizeAdd(k, req.GetInboxId(), req); !errors.Is(err, identity.ErrInvalidUpdate) {
		t.Fatalf("a self-authorised add = %v, want ErrInvalidUpdate", err)
	}
	good, _ := identity.AuthorizeAdd(mustKey(t), req.GetInboxId(), req)
	both, _ := identity.NewAdd(rk, k, 1)
	both.GetAddInstallation().AuthorizerKey = good.GetAddInstallation().GetAuthorizerKey()
	both.GetAddInstallation().AuthorizerSignature = good.GetAddInstallation().GetAuthorizerSignature()
	bad, _ := identity.AuthorizeAdd(mustKey(t), req.GetInboxId(), req)
	bad.GetAddInstallation().AuthorizerSignature[3] ^= 1
	swapped, _ := identity.AuthorizeAdd(mustKey(t), req.GetInboxId(), req)
	swapped.GetAddInstallation().AuthorizerKey = good.GetAddInstallation().GetAuthorizerKey()
	for name, u := range map[string]*identitypb.IdentityUpdate{"both": both, "bad signature": bad, "swapped authoriser": swapped} {
		if err := identity.VerifyUpdate(u); !errors.Is(err, identity.ErrInvalidUpdate) {
			t.Errorf("%s: VerifyUpdate = %v, want ErrInvalidUpdate", name, err)
		}
	}
	if err := identity.VerifyUpdate(good); err != nil {
		t.Fatalf("authorised add: %v", err)
	}
	if _, err := identity.AuthorizeAdd(mustKey(t), "another inbox", req); !errors.Is(err, identity.ErrInvalidUpdate) {
		t.Fatalf("authorising a request for another inbox = %v", err)
	}
}

func FuzzDecodeAddRequest(f *testing.F) {
	rk, k := mustKeyF(f), mustKeyF(f)
	req, _ := identity.NewAddRequest(k, rk.Public().(ed25519Pub), 1)
	b, _ := protoMarshal(req)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := identity.DecodeAddRequest(b)
		if err != nil {
			if !errors.Is(err, identity.ErrInvalidUpdate) {
				t.Fatalf("error outside ErrInvalidUpdate: %v", err)
			}
			return
		}
		if _, err := identity.AuthorizeAdd(k, u.GetInboxId(), u); err != nil && !errors.Is(err, identity.ErrInvalidUpdate) {
			t.Fatalf("authorising a decoded request: %v", err)
		}
	})
}
