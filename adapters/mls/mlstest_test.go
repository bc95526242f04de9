package mls_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlstest"
)

// pastEpochs is how many past epochs the engines under the contract suite
// keep for late application messages.
const pastEpochs = 2

// suiteHarness runs the contract suite on mls.New engines whose state
// lives in SQLite files under the case's temporary directory, one file
// per installation.
type suiteHarness struct{ dir string }

func (h *suiteHarness) Caps() mlstest.Caps {
	return mlstest.Caps{Reopen: true, BoundedPastEpochs: true, PastEpochs: pastEpochs, RejectsUnknownVersion: true, Parallel: true}
}

func (h *suiteHarness) MakeEngine(t *testing.T, sigKey []byte) (ports.MLS, error) {
	return mls.New(mls.Options{SignaturePrivateKey: sigKey, PastEpochs: pastEpochs})
}

func (h *suiteHarness) OpenStore(ctx context.Context, t *testing.T, name string) (ports.Store, error) {
	return sqlite.Open(ctx, filepath.Join(h.dir, name+".db"), &sqlite.Options{})
}

// TestContract runs ports/mlstest on the engine over real SQLite stores.
func TestContract(t *testing.T) {
	mlstest.Run(t, func(t *testing.T) mlstest.Harness { return &suiteHarness{dir: t.TempDir()} })
}

// publicHarness adds the engine's public validator to suiteHarness.
type publicHarness struct{ suiteHarness }

func (h *publicHarness) MakePublic(t *testing.T) (ports.PublicGroups, error) {
	return mls.NewPublicGroups(nil), nil
}

// TestPublicContract runs the contract of ports.PublicGroups on
// mls.NewPublicGroups, following groups of engines over real SQLite
// stores.
func TestPublicContract(t *testing.T) {
	mlstest.RunPublic(t, func(t *testing.T) mlstest.PublicHarness {
		return &publicHarness{suiteHarness{dir: t.TempDir()}}
	})
}
