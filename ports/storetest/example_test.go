package storetest_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/storetest"
)

// harness gives the suite a fresh SQLite store per case, created on first
// use in the case's temporary directory.
type harness struct {
	t    testing.TB
	path string
}

func newHarness(t testing.TB) *harness { return &harness{t: t} }

// Caps: the file survives a reopen, and a child process can open it from
// Locator and be killed in a transaction.
func (h *harness) Caps() storetest.Caps { return storetest.Caps{Reopen: true, Crash: true} }

func (h *harness) Locator() string {
	if h.path == "" {
		h.path = filepath.Join(h.t.TempDir(), "store.db")
	}
	return h.path
}

func (h *harness) Open(ctx context.Context) (ports.Store, error) {
	return h.OpenLocator(ctx, h.Locator())
}

func (h *harness) OpenLocator(ctx context.Context, locator string) (ports.Store, error) {
	return sqlite.Open(ctx, locator, nil)
}

// A store's test file declares one top-level test that calls Run; the
// crash cases re-execute the test binary with -test.run naming it. In a
// _test.go file that test is
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Harness { return newHarness(t) })
//	}
//
// docs/adapter-guide.md and examples/custom-store walk through a harness.
func ExampleRun() {
	testStore := func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Harness { return newHarness(t) })
	}
	_ = testStore
}
