package identity

import (
	"crypto/ed25519"
	"testing"

	"github.com/regroup-mls/regroup/proto/identitypb"
)

// BenchmarkVerifyUpdates verifies the adds of 500 inboxes (1,000
// signatures, a Welcome of 1,000 members): "batch" with verifyUpdates
// (COMP-580), "one-by-one" with VerifyUpdate each (the reference).
func BenchmarkVerifyUpdates(b *testing.B) {
	us := make([]*identitypb.IdentityUpdate, 500)
	for i := range us {
		_, rk, _ := ed25519.GenerateKey(nil)
		_, ik, _ := ed25519.GenerateKey(nil)
		var err error
		if us[i], err = NewAdd(rk, ik, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("batch", func(b *testing.B) {
		for b.Loop() {
			for _, err := range verifyUpdates(us) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("one-by-one", func(b *testing.B) {
		for b.Loop() {
			for _, u := range us {
				if err := VerifyUpdate(u); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
