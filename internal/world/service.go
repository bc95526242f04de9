package world

import (
	"context"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/delivery"
)

// NewEmbeddedOn is an "embedded" world on a delivery service the test
// built (another store, commit acceptance, a fake clock), with d for
// everything the test does. The test closes what the service uses.
func NewEmbeddedOn(t testing.TB, svc *delivery.Service, d time.Duration) *World {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return &World{T: t, Ctx: ctx, Mode: "embedded", dir: t.TempDir(), svc: svc}
}
