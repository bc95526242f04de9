package mlstest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlstest"
)

// pastEpochs is the bound every harness here declares.
const pastEpochs = 2

// TestBrokenTarget is the child of TestSuiteCatchesBrokenEngines: the
// suite on engines and stores that break the rule envBreak names.
func TestBrokenTarget(t *testing.T) {
	rule := os.Getenv(envBreak)
	if rule == "" {
		t.Skip("only runs as the child of TestSuiteCatchesBrokenEngines")
	}
	mlstest.Run(t, func(t *testing.T) mlstest.Harness {
		return &brokenHarness{dir: t.TempDir(), rule: rule, opens: map[string]int{}, engines: map[string]int{}}
	})
}

// brokenHarness serves real engines over SQLite stores, wrapped to break
// one rule.
type brokenHarness struct {
	dir   string
	rule  string
	opens map[string]int
	// engines counts the engines made per signature key.
	engines map[string]int
}

func (h *brokenHarness) Caps() mlstest.Caps {
	return mlstest.Caps{Reopen: true, BoundedPastEpochs: true, PastEpochs: pastEpochs, RejectsUnknownVersion: true, Parallel: true}
}

func (h *brokenHarness) MakeEngine(t *testing.T, sigKey []byte) (ports.MLS, error) {
	n := pastEpochs
	switch h.rule {
	case "keep-more-epochs":
		n++
	case "keep-fewer-epochs":
		n--
	}
	h.engines[string(sigKey)]++
	if h.rule == "forget-past-epochs-on-reopen" && h.engines[string(sigKey)] > 1 {
		n = 0 // as if past-epoch keys were held in memory only
	}
	e, err := mls.New(mls.Options{SignaturePrivateKey: sigKey, PastEpochs: n})
	b := brokenEngine{Engine: e, rule: h.rule, sig: sigKey}
	if h.rule == "replay-accepted" {
		b.seen = map[string]ports.Processed{}
	}
	return b, err
}

func (h *brokenHarness) OpenStore(ctx context.Context, t *testing.T, name string) (ports.Store, error) {
	h.opens[name]++
	file := name
	if h.rule == "forget-on-reopen" {
		file = fmt.Sprintf("%s-%d", name, h.opens[name]) // a new, empty file
	}
	s, err := sqlite.Open(ctx, filepath.Join(h.dir, file+".db"), &sqlite.Options{})
	if err != nil || h.rule != "commit-on-error" {
		return s, err
	}
	return commitOnError{s}, nil
}

// commitOnError commits a transaction whose function failed.
type commitOnError struct{ ports.Store }

func (s commitOnError) Tx(ctx context.Context, fn func(tx ports.Tx) error) error {
	var fnErr error
	if err := s.Store.Tx(ctx, func(tx ports.Tx) error { fnErr = fn(tx); return nil }); err != nil {
		return err
	}
	return fnErr
}

// brokenEngine is the real engine with one rule broken.
type brokenEngine struct {
	*mls.Engine
	rule string
	sig  []byte
	// seen holds the application messages processed, with replay-accepted.
	seen map[string]ports.Processed
}

func (b brokenEngine) Process(ctx context.Context, tx ports.Tx, gid, msg []byte) (ports.Processed, error) {
	if b.rule == "panic-on-short" && len(msg) < 8 {
		panic("short message")
	}
	p, err := b.Engine.Process(ctx, tx, gid, msg)
	if err == nil && b.rule == "sender-from-current-tree" {
		if v, verr := b.Engine.Group(ctx, tx, gid); verr == nil {
			for _, m := range v.Members {
				if m.LeafIndex == p.Sender.LeafIndex {
					p.Sender = m
				}
			}
		}
	}
	if err == nil {
		if b.seen != nil && p.Kind == ports.ProcessedApplication {
			b.seen[string(msg)] = p
		}
		return p, nil
	}
	var we *ports.WrongEpochError
	isEpoch := errors.As(err, &we)
	switch {
	case b.rule == "wrong-epoch-as-invalid" && isEpoch:
		return p, fmt.Errorf("%w: %v", ports.ErrInvalid, err)
	case b.rule == "future-as-older" && isEpoch && we.Relation == ports.EpochFuture:
		c := *we
		c.Relation = ports.EpochOlder
		return p, &c
	case b.rule == "epoch-numbers-swapped" && isEpoch:
		c := *we
		c.MessageEpoch, c.GroupEpoch = c.GroupEpoch, c.MessageEpoch
		return p, &c
	case b.rule == "undecryptable-as-invalid" && errors.Is(err, ports.ErrUndecryptable):
		return p, fmt.Errorf("%w: %v", ports.ErrInvalid, err)
	case b.rule == "invalid-as-undecryptable" && errors.Is(err, ports.ErrInvalid):
		return p, fmt.Errorf("%w: %v", ports.ErrUndecryptable, err)
	case b.rule == "two-classes" && errors.Is(err, ports.ErrInvalid):
		return p, fmt.Errorf("%w (%w)", err, ports.ErrUndecryptable)
	case b.rule == "advance-on-error":
		if _, cerr := b.Engine.Commit(ctx, tx, gid, ports.CommitOptions{ForcePath: true}); cerr == nil {
			_, _ = b.Engine.MergePending(ctx, tx, gid)
		}
	case b.rule == "replay-accepted" && errors.Is(err, ports.ErrUndecryptable):
		if prev, ok := b.seen[string(msg)]; ok {
			return prev, nil
		}
	case b.rule == "not-found-unclassified" && errors.Is(err, ports.ErrGroupNotFound):
		return p, errors.New(err.Error())
	}
	return p, err
}

func (b brokenEngine) Group(ctx context.Context, tx ports.Tx, gid []byte) (ports.GroupView, error) {
	v, err := b.Engine.Group(ctx, tx, gid)
	if b.rule == "not-found-unclassified" && errors.Is(err, ports.ErrGroupNotFound) {
		return v, errors.New(err.Error())
	}
	if b.rule == "always-active" {
		v.Active = true
	}
	return v, err
}

func (b brokenEngine) MergeStaged(ctx context.Context, tx ports.Tx, gid []byte) (ports.GroupView, error) {
	v, err := b.Engine.MergeStaged(ctx, tx, gid)
	if b.rule == "always-active" {
		v.Active = true
	}
	return v, err
}

func (b brokenEngine) Commit(ctx context.Context, tx ports.Tx, gid []byte, opts ports.CommitOptions) (ports.CommitOutput, error) {
	if b.rule == "drop-force-path" {
		opts.ForcePath = false
	}
	return b.Engine.Commit(ctx, tx, gid, opts)
}

func (b brokenEngine) ClearPending(ctx context.Context, tx ports.Tx, gid []byte) error {
	if b.rule == "clear-keeps-pending" {
		return nil
	}
	return b.Engine.ClearPending(ctx, tx, gid)
}

func (b brokenEngine) Export(ctx context.Context, tx ports.Tx, gid []byte, label string, context []byte, n int) ([]byte, error) {
	x, err := b.Engine.Export(ctx, tx, gid, label, context, n)
	if b.rule == "export-per-installation" && len(x) > 0 {
		x[0] ^= b.sig[0] | 1
	}
	return x, err
}

func (b brokenEngine) StageWelcome(ctx context.Context, tx ports.Tx, w []byte, kp ports.KeyPackageRecord) (ports.StagedWelcome, error) {
	st, err := b.Engine.StageWelcome(ctx, tx, w, kp)
	if b.rule == "stage-any-key-package" && err != nil {
		return ports.StagedWelcome{Handle: "none"}, nil
	}
	if b.rule == "stage-installs" && err == nil {
		if _, err := b.Engine.InstallWelcome(ctx, tx, st.Handle); err != nil {
			return st, err
		}
	}
	return st, err
}

func (b brokenEngine) ValidateKeyPackage(ctx context.Context, kp []byte, opts ports.ValidateOptions) (ports.ValidatedKeyPackage, error) {
	switch {
	case b.rule == "no-lifetime-check":
		opts.Now = time.Time{}
	case b.rule == "lifetime-always-checked" && opts.Now.IsZero():
		opts.Now = time.Now().Add(365 * 24 * time.Hour)
	}
	v, err := b.Engine.ValidateKeyPackage(ctx, kp, opts)
	if b.rule == "accept-tampered" && err != nil && opts.Now.IsZero() {
		return ports.ValidatedKeyPackage{}, nil
	}
	return v, err
}
