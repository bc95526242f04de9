package world

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"testing"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/delivery"
)

// NewEmbeddedWith is NewFor in the "embedded" mode with the in-process
// delivery service configured by o (quotas, say); o.Clock and
// o.KeyPackageValidator are set as the embedded service sets them when
// nil.
func NewEmbeddedWith(t testing.TB, d time.Duration, o delivery.Options) *World {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	w := &World{T: t, Ctx: ctx, Mode: "embedded", dir: t.TempDir()}
	st, err := deliverydb.OpenSQLite(ctx, filepath.Join(w.dir, "delivery.db"), &deliverydb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if o.Clock == nil {
		o.Clock = regroup.ProvideClock(nil)
	}
	if o.KeyPackageValidator == nil {
		reg, err := regroup.ProvideAlgorithms()
		if err != nil {
			t.Fatal(err)
		}
		parser, err := mls.New(mls.Options{SignaturePrivateKey: make([]byte, ed25519.SeedSize)})
		if err != nil {
			t.Fatal(err)
		}
		o.KeyPackageValidator = &delivery.KeyPackageAdmission{Parser: parser, Wrappers: reg}
	}
	w.svc = delivery.New(st, &o)
	return w
}
