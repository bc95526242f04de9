package sqlite_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/storetest"
)

// envBreak selects the rule brokenStore breaks in TestBrokenStore.
const envBreak = "REGROUP_SQLITE_BREAK"

// TestSuiteCatchesBrokenStores runs contract cases, in a child process,
// against the SQLite store with one rule deliberately broken, and checks
// that the case named after that rule fails: the suite's cases are not
// vacuous.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in child processes")
	}
	for _, m := range []struct{ breaks, kase string }{
		{"commit-on-error", "PROC-008/ErrorLeavesNothing"},
		{"forget-on-reopen", "PROC-008/PersistsAcrossReopen"},
		{"mark-always-first", "JOIN-045/ProcessedEnvelopeAtMostOnce"},
		{"welcome-put-replaces", "JOIN-045/HeldWelcomeKeptOnce"},
		{"deadline-unchecked", "JOIN-063/DeadlineNeverMovesLater"},
		{"destroy-keeps-wrapper-key", "JOIN-019/DestroyErasesAllThreePrivateKeys"},
		{"append-duplicates", "FORK-001/LocalEntryAtMostOncePerOutcome"},
		{"list-unordered", "FORK-021/LocalLogOrderedBySeq"},
		{"autocommit-each-write", "PROC-008/SIGKILLDuringOpenTxLeavesNothing"},
	} {
		t.Run(m.breaks, func(t *testing.T) {
			t.Parallel()
			parts := strings.Split(m.kase, "/")
			run := "^TestBrokenStore$"
			for _, p := range parts {
				run += "/^" + regexp.QuoteMeta(p) + "$"
			}
			cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), envBreak+"="+m.breaks)
			out, err := cmd.CombinedOutput()
			if err == nil || !bytes.Contains(out, []byte("--- FAIL: TestBrokenStore/"+m.kase)) {
				t.Errorf("with %s broken, case %s did not fail (err %v):\n%s", m.breaks, m.kase, err, out)
			}
		})
	}
}

// TestBrokenStore is the child of TestSuiteCatchesBrokenStores.
func TestBrokenStore(t *testing.T) {
	rule := os.Getenv(envBreak)
	if rule == "" {
		t.Skip("only runs as the child of TestSuiteCatchesBrokenStores")
	}
	storetest.Run(t, func(t *testing.T) storetest.Harness { return &brokenHarness{harness: newHarness(t), rule: rule} })
}

type brokenHarness struct {
	*harness
	rule  string
	opens int
}

func (h *brokenHarness) Open(ctx context.Context) (ports.Store, error) {
	h.opens++
	if h.rule == "forget-on-reopen" && h.opens > 1 {
		h.path = "" // a new, empty file
	}
	s, err := h.harness.Open(ctx)
	return brokenStore{s, h.rule}, err
}

// OpenLocator opens the crash child's store; with autocommit-each-write it
// commits every write on its own, as a store without transactions would.
func (h *brokenHarness) OpenLocator(ctx context.Context, loc string) (ports.Store, error) {
	s, err := h.harness.OpenLocator(ctx, loc)
	if h.rule == "autocommit-each-write" {
		return autocommitStore{s}, err
	}
	return brokenStore{s, h.rule}, err
}

type brokenStore struct {
	ports.Store
	rule string
}

func (s brokenStore) Tx(ctx context.Context, fn func(tx ports.Tx) error) error {
	return s.Store.Tx(ctx, func(tx ports.Tx) error {
		err := fn(brokenTx{tx, s.rule})
		if s.rule == "commit-on-error" {
			return nil
		}
		return err
	})
}

type brokenTx struct {
	ports.Tx
	rule string
}

func (t brokenTx) ProcessedEnvelopes() ports.ProcessedEnvelopes {
	return alwaysFirst{t.Tx.ProcessedEnvelopes(), t.rule}
}

func (t brokenTx) HeldWelcomes() ports.HeldWelcomes {
	return looseWelcomes{t.Tx.HeldWelcomes(), t.rule}
}

func (t brokenTx) KeyPackages() ports.KeyPackages { return leakyKeys{t.Tx.KeyPackages(), t.rule} }

func (t brokenTx) LocalCommitLog() ports.LocalCommitLog {
	return sloppyLog{t.Tx.LocalCommitLog(), t.rule}
}

type alwaysFirst struct {
	ports.ProcessedEnvelopes
	rule string
}

func (a alwaysFirst) Mark(ctx context.Context, topic []byte, seq uint64) (bool, error) {
	first, err := a.ProcessedEnvelopes.Mark(ctx, topic, seq)
	return first || a.rule == "mark-always-first", err
}

type looseWelcomes struct {
	ports.HeldWelcomes
	rule string
}

func (w looseWelcomes) Put(ctx context.Context, h ports.HeldWelcome) (bool, error) {
	if w.rule == "welcome-put-replaces" {
		if err := w.Delete(ctx, h.SequenceID); err != nil {
			return false, err
		}
	}
	return w.HeldWelcomes.Put(ctx, h)
}

func (w looseWelcomes) Update(ctx context.Context, seq uint64, fn func(*ports.HeldWelcome) error) error {
	if w.rule != "deadline-unchecked" {
		return w.HeldWelcomes.Update(ctx, seq, fn)
	}
	h, err := w.Get(ctx, seq)
	if err != nil {
		return err
	}
	if err := fn(&h); err != nil {
		return err
	}
	if err := w.Delete(ctx, seq); err != nil {
		return err
	}
	_, err = w.HeldWelcomes.Put(ctx, h)
	return err
}

type leakyKeys struct {
	ports.KeyPackages
	rule string
}

func (k leakyKeys) Destroy(ctx context.Context, ref []byte, at time.Time) error {
	before, err := k.Get(ctx, ref)
	if err != nil {
		return err
	}
	if err := k.KeyPackages.Destroy(ctx, ref, at); err != nil || k.rule != "destroy-keeps-wrapper-key" {
		return err
	}
	return k.Update(ctx, ref, func(r *ports.KeyPackageRecord) error { r.WrapperPrivateKey = before.WrapperPrivateKey; return nil })
}

type sloppyLog struct {
	ports.LocalCommitLog
	rule string
}

func (l sloppyLog) Append(ctx context.Context, e ports.LocalCommitLogEntry) (ports.LocalCommitLogEntry, bool, error) {
	stored, inserted, err := l.LocalCommitLog.Append(ctx, e)
	if err == nil && !inserted && l.rule == "append-duplicates" {
		e.Membership += 1000 // records the same outcome again under another key
		return l.LocalCommitLog.Append(ctx, e)
	}
	return stored, inserted, err
}

func (l sloppyLog) List(ctx context.Context, g []byte, after uint64, limit int) ([]ports.LocalCommitLogEntry, error) {
	es, err := l.LocalCommitLog.List(ctx, g, after, limit)
	if l.rule == "list-unordered" && len(es) > 1 {
		slices.Reverse(es)
	}
	return es, err
}

// autocommitStore runs fn outside any transaction and each write in one of
// its own. It implements the repositories the crash child uses.
type autocommitStore struct{ ports.Store }

func (s autocommitStore) Tx(ctx context.Context, fn func(tx ports.Tx) error) error {
	return fn(autoTx{s: s.Store})
}

type autoTx struct {
	ports.Tx // nil: only the methods below are used
	s        ports.Store
}

func (t autoTx) Blobs() ports.Blobs                   { return autoBlobs{s: t.s} }
func (t autoTx) LocalCommitLog() ports.LocalCommitLog { return autoLog{s: t.s} }
func (t autoTx) Groups() ports.Groups                 { return autoGroups{s: t.s} }

type autoBlobs struct {
	ports.Blobs
	s ports.Store
}

func (b autoBlobs) Put(ctx context.Context, ns, key string, v []byte) error {
	return b.s.Tx(ctx, func(tx ports.Tx) error { return tx.Blobs().Put(ctx, ns, key, v) })
}

type autoLog struct {
	ports.LocalCommitLog
	s ports.Store
}

func (l autoLog) Append(ctx context.Context, e ports.LocalCommitLogEntry) (out ports.LocalCommitLogEntry, ins bool, err error) {
	err = l.s.Tx(ctx, func(tx ports.Tx) error {
		out, ins, err = tx.LocalCommitLog().Append(ctx, e)
		return err
	})
	return out, ins, err
}

type autoGroups struct {
	ports.Groups
	s ports.Store
}

func (g autoGroups) Update(ctx context.Context, id []byte, fn func(*ports.Group) error) error {
	return g.s.Tx(ctx, func(tx ports.Tx) error { return tx.Groups().Update(ctx, id, fn) })
}
