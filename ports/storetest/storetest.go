// Package storetest is the contract suite of [ports.Store]. An adapter
// author implements a [Harness] and calls [Run] from one test function:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Harness { return newHarness(t) })
//	}
//
// Each case is named after the rule it checks ("JOIN-045/...",
// "PROC-008/...", "Store/..." for a promise of the port itself); a case
// that needs a capability the harness does not declare in [Caps] is
// skipped with the reason, never passed silently. A Tx without
// [ports.MessageTx] fails the message cases unless the harness declares
// [Caps.WithoutMessages], because the client SDK refuses such a store.
//
// The suite writes its times in zones far from UTC and its values at the
// sizes regroup stores, so a store that passes only in a UTC process or
// with small values fails here. Beside the suite, saboteur_test.go keeps a
// decorator per promise that breaks exactly that promise, and a test that
// fails when any of them passes; docs/adapter-guide.md lists promise, case
// and saboteur.
//
// # The crash cases
//
// With [Caps.Crash], the suite re-executes the running test binary as a
// child process (selecting the same top-level test with -test.run and
// marking the child through environment variables). In the child, [Run]
// does not run cases: it opens the store named by [Harness.Locator]
// through [Harness.OpenLocator], writes inside a transaction, reports that
// it is ready, and is killed with SIGKILL by the parent, which then reopens
// the store and checks that each transaction left all its writes or none.
// Run must therefore be called from a top-level test function, and code in
// that function before Run must not depend on being the parent.
//
// # Benchmarks
//
// [Bench] runs the storage benchmarks on a harness; a harness that also
// implements [RawInserter] gets each figure printed next to the raw insert
// cost of the same database, measured in the same run.
package storetest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// Caps declares what the store under test can do. A case needing a
// capability the harness lacks is skipped with the reason.
type Caps struct {
	// Reopen reports that a store opened by [Harness.Open] after the previous
	// one was closed holds that store's data.
	Reopen bool
	// Crash reports that [Harness.Locator] and [Harness.OpenLocator] let
	// another process open the same store, and that a process killed with
	// SIGKILL leaves the store openable.
	Crash bool
	// Parallel reports that stores of different harnesses are independent,
	// so the cases may run in parallel with each other (t.Parallel).
	Parallel bool
	// WithoutMessages declares a store whose Tx does not implement
	// [ports.MessageTx]. The message cases are then skipped, and the reason
	// says what that costs: the client SDK refuses such a store
	// (client.New fails with ErrConfig), so it can serve only code that uses
	// the other repositories. Without this declaration a Tx that lacks
	// MessageTx fails the message cases.
	WithoutMessages bool
}

// Harness gives the suite access to one store under test. [Run] creates a
// fresh harness for every case, so each starts from an empty store; the
// harness releases what it holds through t.Cleanup.
type Harness interface {
	// Caps declares the store's capabilities.
	Caps() Caps
	// Open opens the harness's store. The suite closes every store it
	// opens before opening the next one on the same harness.
	Open(ctx context.Context) (ports.Store, error)
	// Locator returns a string naming the store (a file path, a DSN with a
	// schema) that [Harness.OpenLocator] in another process accepts. It is
	// used only with [Caps.Crash].
	Locator() string
	// OpenLocator opens the store named by locator. It runs in the child
	// process of the crash cases, on a harness made by the same newHarness.
	OpenLocator(ctx context.Context, locator string) (ports.Store, error)
}

// Environment variables that turn the test binary into a crash child.
const (
	envLocator = "REGROUP_STORETEST_CRASH_LOCATOR"
	envMode    = "REGROUP_STORETEST_CRASH_MODE"
	envReady   = "REGROUP_STORETEST_CRASH_READY"
)

type testCase struct {
	name string
	run  func(t *testing.T, h Harness)
}

// Run runs every case of the contract against stores made by newHarness.
// In a crash child (see the package documentation) it runs the child's
// part instead and never returns.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	if loc := os.Getenv(envLocator); loc != "" {
		crashChild(t, newHarness(t), loc)
		return
	}
	for _, c := range allCases() {
		runOne(t, c, newHarness)
	}
}

// RunCase runs the one case named name (as [Run] names its subtests), for
// example against a deliberately broken store to show that the case
// catches it. It fails when there is no such case.
func RunCase(t *testing.T, name string, newHarness func(t *testing.T) Harness) {
	if loc := os.Getenv(envLocator); loc != "" {
		crashChild(t, newHarness(t), loc)
		return
	}
	for _, c := range allCases() {
		if c.name == name {
			runOne(t, c, newHarness)
			return
		}
	}
	t.Fatalf("storetest has no case %q", name)
}

// CaseNames returns the name of every case [Run] runs, in order.
func CaseNames() []string {
	var names []string
	for _, c := range allCases() {
		names = append(names, c.name)
	}
	return names
}

func allCases() []testCase {
	var cases []testCase
	cases = append(cases, txCases...)
	cases = append(cases, logCases...)
	cases = append(cases, comparisonCases...)
	cases = append(cases, joinCases...)
	cases = append(cases, identityBatchCases...)
	cases = append(cases, persistCases...)
	cases = append(cases, messageCases...)
	cases = append(cases, contractCases...)
	cases = append(cases, valueCases...)
	cases = append(cases, crashCases...)
	return cases
}

func runOne(t *testing.T, c testCase, newHarness func(t *testing.T) Harness) {
	t.Run(c.name, func(t *testing.T) {
		h := newHarness(t)
		if h.Caps().Parallel {
			t.Parallel()
		}
		c.run(t, h)
	})
}

// ctxFor returns a context that ends when the test does, bounded to a
// minute so a hung store fails the case instead of the whole binary.
func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// open opens h's store and closes it when the test ends.
func open(t testing.TB, h Harness) ports.Store {
	t.Helper()
	s, err := h.Open(ctxFor(t))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { closeStore(t, s) })
	return s
}

func closeStore(t testing.TB, s ports.Store) {
	if err := s.Close(); err != nil && !errors.Is(err, ports.ErrClosed) {
		t.Errorf("close store: %v", err)
	}
}

// reopen closes s and opens the store again, skipping without Caps.Reopen.
func reopen(t *testing.T, h Harness, s ports.Store) ports.Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("close store: %v", err)
	}
	return open(t, h)
}

// reopenIfAble reopens s when the harness declares Caps.Reopen and
// returns s unchanged otherwise, for cases whose main check needs no
// restart.
func reopenIfAble(t *testing.T, h Harness, s ports.Store) ports.Store {
	t.Helper()
	if !h.Caps().Reopen {
		return s
	}
	return reopen(t, h, s)
}

func needReopen(t *testing.T, h Harness) {
	if !h.Caps().Reopen {
		t.Skip("harness does not declare Caps.Reopen: the store cannot be closed and opened again")
	}
}

// must runs fn in one transaction and fails the test on an error.
func must(t testing.TB, s ports.Store, fn func(ctx context.Context, tx ports.Tx) error) {
	t.Helper()
	ctx := ctxFor(t)
	if err := s.Tx(ctx, func(tx ports.Tx) error { return fn(ctx, tx) }); err != nil {
		t.Fatalf("tx: %v", err)
	}
}

// topTest returns the name of the top-level test that called Run.
func topTest(t *testing.T) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return name
}

// gid returns a 16-byte group id for n.
func gid(n int) []byte {
	id := []byte("group-id-0000000")
	for i := len(id) - 1; n > 0 && i >= 9; i-- {
		id[i] = byte('0' + n%10)
		n /= 10
	}
	return id
}

// at returns a fixed instant n seconds after a base, at microsecond
// precision, the finest every supported database keeps.
func at(n int) time.Time {
	return time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC).Add(time.Duration(n) * time.Second)
}
