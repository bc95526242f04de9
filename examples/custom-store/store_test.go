package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/storetest"
)

// testKey is the blob key of every test store.
var testKey = bytes.Repeat([]byte{7}, 32)

// harness runs the contract suite on the sealed store over the
// application's SQLite file, created when the store is first opened.
// Run makes a fresh harness for every case, so each case starts from an
// empty store; t.TempDir is removed when the case ends.
type harness struct {
	t    testing.TB
	path string
}

func newHarness(t testing.TB) *harness { return &harness{t: t} }

// Caps declares what the store can do: it survives a close and reopen,
// another process can open it and be killed, and two harnesses' stores
// are separate files.
func (h *harness) Caps() storetest.Caps {
	return storetest.Caps{Reopen: true, Crash: true, Parallel: true}
}

// Locator names the store so that another process (the suite's crash
// child) can open it; the file is created on first use.
func (h *harness) Locator() string {
	if h.path == "" {
		h.path = filepath.Join(h.t.TempDir(), "app.db")
	}
	return h.path
}

// Open opens the harness's store; after the suite closes it, the next
// Open sees the same data.
func (h *harness) Open(ctx context.Context) (ports.Store, error) {
	return h.OpenLocator(ctx, h.Locator())
}

// OpenLocator opens the store a Locator named; it runs in the crash child.
func (h *harness) OpenLocator(ctx context.Context, locator string) (ports.Store, error) {
	app, err := OpenAppDB(ctx, locator)
	if err != nil {
		return nil, err
	}
	s, err := NewSealedStore(app.Store, testKey)
	if err != nil {
		app.Store.Close()
		return nil, err
	}
	return s, nil
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness { return newHarness(t) })
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) storetest.Harness { return newHarness(b) })
}
