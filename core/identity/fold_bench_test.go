package identity_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

// BenchmarkFold folds an inbox of 50 installations: "recovery" added each
// with the recovery key (the reference), "authorised" each approved by
// the one before it (COMP-260), which the fold checks is associated.
func BenchmarkFold(b *testing.B) {
	const n = 50
	rk := mustKeyB(b)
	first := mustKeyB(b)
	u0, _ := identity.NewAdd(rk, first, 0)
	for _, mode := range []string{"recovery", "authorised"} {
		recs := []ports.IdentityUpdateRecord{recB(b, 1, u0)}
		by := first
		for i := 1; i < n; i++ {
			k := mustKeyB(b)
			var u *identitypb.IdentityUpdate
			if mode == "recovery" {
				u, _ = identity.NewAdd(rk, k, int64(i))
			} else {
				req, _ := identity.NewAddRequest(k, rk.Public().(ed25519Pub), int64(i))
				u, _ = identity.AuthorizeAdd(by, req.GetInboxId(), req)
			}
			recs = append(recs, recB(b, uint64(i+1), u))
			by = k
		}
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				if st := identity.Fold(u0.GetInboxId(), recs, n); len(st.InstallationKeys) != n {
					b.Fatalf("%d installations", len(st.InstallationKeys))
				}
			}
		})
	}
}

func mustKeyB(b *testing.B) ed25519Priv {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	return k
}

func recB(b *testing.B, seq uint64, u *identitypb.IdentityUpdate) ports.IdentityUpdateRecord {
	bs, err := protoMarshal(u)
	if err != nil {
		b.Fatal(err)
	}
	return ports.IdentityUpdateRecord{InboxID: u.GetInboxId(), SequenceID: seq, Update: bs}
}
