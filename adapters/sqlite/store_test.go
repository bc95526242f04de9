package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/storetest"
)

// harness runs the contract suite on a SQLite file in a temporary
// directory, created when the store is first opened.
type harness struct {
	t    testing.TB
	path string
	raw  int // rows RawInsert has written
}

func newHarness(t testing.TB) *harness { return &harness{t: t} }

func (h *harness) Caps() storetest.Caps {
	return storetest.Caps{Reopen: true, Crash: true, Parallel: true}
}

func (h *harness) Locator() string {
	if h.path == "" {
		h.path = filepath.Join(h.t.TempDir(), "regroup.db")
	}
	return h.path
}

func (h *harness) Open(ctx context.Context) (ports.Store, error) {
	return sqlite.Open(ctx, h.Locator(), nil)
}

func (h *harness) OpenLocator(ctx context.Context, locator string) (ports.Store, error) {
	return sqlite.Open(ctx, locator, nil)
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness { return newHarness(t) })
}
