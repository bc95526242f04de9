package storetest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/storetest"
)

// envSaboteur turns the test binary into the child of
// TestSuiteCatchesEverySaboteur.
const envSaboteur = "REGROUP_STORETEST_SABOTEUR_CHILD"

// saboteurs maps each saboteur (a decorator over the SQLite store that
// breaks exactly one promise of the port, see saboteur_repos_test.go) to
// the cases that must fail on it. docs/adapter-guide.md lists the same
// table, promise by promise.
var saboteurs = []struct {
	rule  string
	cases []string
}{
	// Transactions.
	{"ignores-cancel", []string{"PROC-008/CancelledContextAborts"}},
	{"swallows-panic", []string{"PROC-008/PanicLeavesNothingAndRepanics"}},
	{"tx-after-close", []string{"Store/ClosedRefusesTx"}},
	{"identical-insert-ok", []string{"Store/ErrorClasses"}},
	// Values belong to nobody else.
	{"blob-put-keeps-caller-buffer", []string{"Store/NoAliasingOfCallerOrStoreMemory"}},
	{"blob-get-shares-buffer", []string{"Store/NoAliasingOfCallerOrStoreMemory"}},
	{"group-insert-keeps-caller-struct", []string{"Store/NoAliasingOfCallerOrStoreMemory"}},
	// Counters outlive the process.
	{"seq-counter-in-memory", []string{"FORK-021/SeqSurvivesReopen"}},
	{"message-id-in-memory", []string{"JOIN-044/MessageIDSurvivesReopen"}},
	// Paging and order.
	{"local-short-page-dropped", []string{"Store/PagingReachesShortLastPage"}},
	{"accepted-short-page-dropped", []string{"Store/PagingReachesShortLastPage"}},
	{"message-short-page-dropped", []string{"Store/PagingReachesShortLastPage"}},
	{"groups-by-created", []string{"Store/ListOrdersOnDataThatSortsOtherwise"}},
	{"groups-signed-bytes", []string{"Store/ListOrdersOnDataThatSortsOtherwise"}},
	{"keypackages-by-ref", []string{"Store/ListOrdersOnDataThatSortsOtherwise"}},
	{"welcomes-by-first-seen", []string{"Store/ListOrdersOnDataThatSortsOtherwise"}},
	{"welcomes-seq-as-text", []string{"Store/ListOrdersOnDataThatSortsOtherwise"}},
	{"readds-by-key-first", []string{"Store/ListOrdersOnDataThatSortsOtherwise"}},
	{"identity-seq-as-text", []string{"Store/ListOrdersOnDataThatSortsOtherwise"}},
	{"messages-in-storage-order", []string{"JOIN-044/MessagesKeptInOrderOncePerPosition"}},
	// Not found is ErrNotFound everywhere.
	{"update-absent-unwrapped", []string{"Store/ErrNotFoundOnEveryPath"}},
	{"destroy-absent-ok", []string{"Store/ErrNotFoundOnEveryPath"}},
	{"blob-get-by-prefix", []string{"Store/ErrNotFoundOnEveryPath"}},
	{"set-sequence-absent-ok", []string{"Store/ErrNotFoundOnEveryPath", "JOIN-044/SentMessageConfirmedByPayloadHash"}},
	// Update.
	{"update-keeps-fn-writes", []string{"Store/UpdateAbortsOnFnErrorAndKeepsTheKey"}},
	{"update-moves-id", []string{"Store/UpdateAbortsOnFnErrorAndKeepsTheKey"}},
	// Exact keys.
	{"keys-like-wildcards", []string{"Store/KeyAndPrefixMatchesAreExact"}},
	{"delete-by-prefix", []string{"Store/KeyAndPrefixMatchesAreExact"}},
	{"identity-inbox-prefix", []string{"Store/KeyAndPrefixMatchesAreExact"}},
	{"boundary-key-as-utf8", []string{"Store/KeyAndPrefixMatchesAreExact"}},
	// Sizes, zones, emptiness.
	{"welcome-envelope-64k", []string{"Store/LargeValuesOnEveryPath"}},
	{"identity-update-64k", []string{"Store/LargeValuesOnEveryPath"}},
	{"super-admins-capped", []string{"Store/LargeValuesOnEveryPath"}},
	{"times-wall-clock", []string{"Store/TimesKeepTheirInstantInAnyZone"}},
	{"empty-blob-is-absent", []string{"Store/EmptyValuesAreValues"}},
	// Optional interfaces.
	{"identity-batch-list-sorted", []string{"COMP-585/IdentityCacheListManyAsList"}},
	{"identity-batch-put-all-inserted", []string{"COMP-585/IdentityCachePutManyAsPutInTurn"}},
	{"no-message-tx", []string{"JOIN-044/MessagesKeptInOrderOncePerPosition", "JOIN-044/SentMessageConfirmedByPayloadHash"}},
	// Rules the earlier cases hold.
	{"read-position-overwrites", []string{"FORK-083/ReadPositionNeverMovesBack"}},
	{"floor-zero-is-absent", []string{"FORK-088/FloorAbsentDiffersFromZero"}},
	{"boundary-overwrites", []string{"FORK-089/BoundaryTakesMaximum"}},
	{"publish-progress-first-wins", []string{"FORK-085/PublishProgressReplaced"}},
	{"local-bycommit-any-membership", []string{"FORK-082/LocalEntryByCommit"}},
	{"accepted-bycommit-highest", []string{"FORK-082/AcceptedEntryByCommit"}},
	{"comparison-first-wins", []string{"FORK-082/ComparisonAbsentThenReplaced"}},
	{"rewind-miscounts", []string{"COMP-100/RewindWithdrawsAboveBound"}},
	{"bywrapper-first-record", []string{"JOIN-076/KeyPackageByWrapperPublicKey"}},
	{"upsert-from-zero", []string{"FORK-064/ReaddStatusUpsert"}},
	{"groups-filter-ignores-active", []string{"PROC-005/GroupsListedAndFiltered"}},
	{"welcome-count-off", []string{"JOIN-018/HeldWelcomesInSequenceOrder"}},
	{"mark-not-written", []string{"PROC-008/CommitKeepsEveryWrite", "JOIN-045/ProcessedEnvelopeAtMostOnce"}},
	{"accepted-insert-replaces", []string{"FORK-077/AcceptedEntryStoredOnce"}},
	{"accepted-seq-as-text", []string{"FORK-083/AcceptedEntriesOrderedByEnvelopeSeq"}},
	{"identity-through-exclusive", []string{"JOIN-051/IdentityUpdatesOnceInOrder"}},
	{"blob-truncated-64k", []string{"Store/OneMiBBlob"}},
	{"keys-case-folded-order", []string{"Store/BlobKeysByPrefixInByteOrder"}},
	{"blob-prefix-counts-characters", []string{"COMP-573/BlobPrefixIsTheValuesFirstBytes"}},
}

// sabHarness runs the suite on a SQLite file wrapped in one saboteur.
type sabHarness struct {
	t    testing.TB
	rule string
	path string
	st   *sabState
}

func (h *sabHarness) Caps() storetest.Caps {
	return storetest.Caps{Reopen: true, Parallel: true}
}

func (h *sabHarness) Locator() string {
	if h.path == "" {
		h.path = filepath.Join(h.t.TempDir(), "store.db")
		if template != "" {
			if b, err := os.ReadFile(template); err == nil {
				_ = os.WriteFile(h.path, b, 0o600) // else Open creates and migrates it
			}
		}
	}
	return h.path
}

// template is a migrated, empty store that each case starts from, so
// that a case does not pay for the migrations; "" outside TestMain.
var template string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "storetest-template-")
	if err == nil {
		path := filepath.Join(dir, "template.db")
		if s, err := sqlite.Open(context.Background(), path, nil); err == nil && s.Close() == nil {
			if _, err := os.Stat(path + "-wal"); os.IsNotExist(err) {
				template = path
			}
		}
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

func (h *sabHarness) Open(ctx context.Context) (ports.Store, error) {
	return h.OpenLocator(ctx, h.Locator())
}

func (h *sabHarness) OpenLocator(ctx context.Context, loc string) (ports.Store, error) {
	s, err := sqlite.Open(ctx, loc, nil)
	if err != nil || h.rule == "" {
		return s, err
	}
	if h.st == nil {
		h.st = newSabState()
	}
	h.st.resetMemory() // what a process keeps in memory is gone after a reopen
	return &sabStore{Store: s, rule: h.rule, st: h.st}, nil
}

// TestSuiteCatchesEverySaboteur runs, in one child process, the cases each
// saboteur must fail, and fails when any of them passes. The unbroken
// store is the SQLite adapter itself, whose TestStore runs the same cases
// and must pass them, so a failure here is the saboteur's doing.
func TestSuiteCatchesEverySaboteur(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in a child process")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSaboteurChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envSaboteur+"=1")
	out, _ := cmd.CombinedOutput()
	if bytes.Contains(out, []byte("panic:")) {
		t.Fatalf("the child panicked:\n%s", out)
	}
	for _, s := range saboteurs {
		for _, c := range s.cases {
			if !bytes.Contains(out, []byte("--- FAIL: TestSaboteurChild/"+s.rule+"/"+c+" ")) {
				t.Errorf("saboteur %s passed case %s", s.rule, c)
			}
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}
}

// TestSaboteurChild is the child of TestSuiteCatchesEverySaboteur.
func TestSaboteurChild(t *testing.T) {
	if os.Getenv(envSaboteur) == "" {
		t.Skip("runs only as the child of TestSuiteCatchesEverySaboteur")
	}
	for _, s := range saboteurs {
		t.Run(s.rule, func(t *testing.T) {
			for _, c := range s.cases {
				storetest.RunCase(t, c, func(t *testing.T) storetest.Harness { return &sabHarness{t: t, rule: s.rule} })
			}
		})
	}
}

// forgetful is a store that loses everything when closed, as an in-memory
// test double does, declaring neither Reopen nor Crash.
type forgetful struct{ sabHarness }

func (h *forgetful) Caps() storetest.Caps { return storetest.Caps{Parallel: true} }

func (h *forgetful) Open(ctx context.Context) (ports.Store, error) {
	h.path = "" // every open starts from an empty file
	return h.sabHarness.Open(ctx)
}

// TestSuiteRunsWithoutReopenOrCrash: a store that keeps nothing across a
// close passes every case that does not need Caps.Reopen or Caps.Crash,
// and those are skipped with the reason, as docs/adapter-guide.md says.
func TestSuiteRunsWithoutReopenOrCrash(t *testing.T) {
	t.Parallel()
	t.Run("suite", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Harness { return &forgetful{sabHarness{t: t}} })
	})
}

// TestGuideListsEveryCaseAndSaboteur keeps docs/adapter-guide.md's table
// promise → case → saboteur complete.
func TestGuideListsEveryCaseAndSaboteur(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "adapter-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range storetest.CaseNames() {
		if !bytes.Contains(guide, []byte("`"+c+"`")) {
			t.Errorf("docs/adapter-guide.md does not list case %s", c)
		}
	}
	for _, s := range saboteurs {
		if !bytes.Contains(guide, []byte("`"+s.rule+"`")) {
			t.Errorf("docs/adapter-guide.md does not list saboteur %s", s.rule)
		}
	}
}
