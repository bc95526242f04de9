package mlstest_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	b := brokenEngine{Engine: e, rule: h.rule, sig: sigKey, kept: map[string][]byte{}}
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
	// kept holds blobs a rule puts back later, by namespace and key.
	kept map[string][]byte
}

// Encrypt, under ratchet-step-kept, advances the sender's ratchet once
// more before every message after this engine's first, as an engine
// would that kept the ratchet step of an earlier, rolled-back call.
func (b brokenEngine) Encrypt(ctx context.Context, tx ports.Tx, gid, plaintext, aad []byte) ([]byte, error) {
	if b.rule == "ratchet-step-kept" {
		if b.kept["encrypted:"+string(gid)] != nil {
			if _, err := b.Engine.Encrypt(ctx, tx, gid, plaintext, aad); err != nil {
				return nil, err
			}
		}
		b.kept["encrypted:"+string(gid)] = []byte{1}
	}
	return b.Engine.Encrypt(ctx, tx, gid, plaintext, aad)
}

// blob namespaces of the engine that rules tamper with.
const (
	nsGroup   = "mls.group"
	nsStaged  = "mls.staged"
	nsWelcome = "mls.welcome"
)

// keep remembers the blob ns/k under name.
func (b brokenEngine) keep(ctx context.Context, tx ports.Tx, name, ns, k string) {
	if v, err := tx.Blobs().Get(ctx, ns, k); err == nil {
		b.kept[name] = v
	}
}

func (b brokenEngine) Process(ctx context.Context, tx ports.Tx, gid, msg []byte) (ports.Processed, error) {
	if b.rule == "panic-on-short" && len(msg) < 8 {
		panic("short message")
	}
	p, err := b.Engine.Process(ctx, tx, gid, msg)
	if p, err = b.breakProcess(ctx, tx, gid, p, err); err == nil && b.rule == "sender-from-current-tree" {
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
	switch b.rule {
	case "forget-removal":
		v.Removal = nil
	case "members-bare":
		v = strip(v)
	}
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
	if b.rule == "forget-removal" {
		v.Removal = nil
	}
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
	if b.rule == "unsupported-as-invalid" && errors.Is(err, ports.ErrUnsupported) {
		return st, fmt.Errorf("%w: %v", ports.ErrInvalid, err)
	}
	if b.rule == "keep-sibling-handles" && err == nil {
		b.keep(ctx, tx, "welcome:"+st.Handle, nsWelcome, st.Handle)
	}
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

// breakProcess applies the rules about own commits, readds, staged
// commits, inactive groups and what Processed reports.
func (b brokenEngine) breakProcess(ctx context.Context, tx ports.Tx, gid []byte, p ports.Processed, err error) (ports.Processed, error) {
	var we *ports.WrongEpochError
	switch {
	case b.rule == "own-commit-invalid" && err == nil && p.Own:
		return ports.Processed{}, fmt.Errorf("%w: processing one's own commit", ports.ErrInvalid)
	case b.rule == "own-commit-not-equal" && errors.As(err, &we) && we.Relation == ports.EpochEqual:
		return p, fmt.Errorf("%w: processing one's own commit", ports.ErrInvalid)
	case b.rule == "readd-invalid" && err == nil && p.RemovesSelf && p.Staged != nil:
		for _, m := range p.Staged.Members {
			if bytes.Equal(m.SignatureKey, ed25519.NewKeyFromSeed(b.sig).Public().(ed25519.PublicKey)) {
				return ports.Processed{}, fmt.Errorf("%w: own leaf re-added", ports.ErrInvalid)
			}
		}
	case b.rule == "merge-any-staged" && err == nil && p.Kind == ports.ProcessedCommit:
		b.keep(ctx, tx, "staged:"+hex.EncodeToString(gid), nsStaged, hex.EncodeToString(gid))
	case b.rule == "merge-any-staged" && err != nil:
		if v, ok := b.kept["staged:"+hex.EncodeToString(gid)]; ok {
			_ = tx.Blobs().Put(ctx, nsStaged, hex.EncodeToString(gid), v)
		}
	case b.rule == "no-process-error" && errors.As(err, new(*ports.ProcessError)):
		var pe *ports.ProcessError
		errors.As(err, &pe)
		return p, pe.Err
	case b.rule == "inactive-unclassified" && errors.Is(err, ports.ErrInactive):
		return p, ports.ErrInactive
	case b.rule == "no-message-epoch" && err == nil:
		if v, verr := b.Engine.Group(ctx, tx, gid); verr == nil {
			p.Epoch = v.Epoch
		}
	case b.rule == "no-proposals":
		p.Proposals = nil
	case b.rule == "external-sender-as-member" && p.SenderType == ports.SenderNewMemberCommit:
		p.SenderType = ports.SenderMember
	}
	return p, err
}

func (b brokenEngine) InstallWelcome(ctx context.Context, tx ports.Tx, h string) (ports.GroupView, error) {
	if b.rule == "install-replaces-silently" {
		return b.Engine.InstallWelcomeWith(ctx, tx, h, ports.InstallOptions{Replace: true})
	}
	v, err := b.Engine.InstallWelcome(ctx, tx, h)
	switch {
	case b.rule == "stale-handle-rolls-back" && err == nil:
		b.keep(ctx, tx, "installed:"+h, nsGroup, hex.EncodeToString(v.GroupID))
		b.kept["gid:"+h] = v.GroupID
	case b.rule == "stale-handle-rolls-back":
		if state, ok := b.kept["installed:"+h]; ok { // the old engine kept the staged state and installed it again
			if perr := tx.Blobs().Put(ctx, nsGroup, hex.EncodeToString(b.kept["gid:"+h]), state); perr != nil {
				return v, perr
			}
			return b.Engine.Group(ctx, tx, b.kept["gid:"+h])
		}
	case b.rule == "keep-sibling-handles" && err == nil:
		for name, blob := range b.kept {
			if k, ok := strings.CutPrefix(name, "welcome:"); ok && k != h {
				_ = tx.Blobs().Put(ctx, nsWelcome, k, blob)
			}
		}
	}
	return v, err
}

func (b brokenEngine) CreateGroup(ctx context.Context, tx ports.Tx, gid []byte, kp ports.KeyPackageBundle, ext []ports.Extension) (ports.GroupView, error) {
	if b.rule == "create-overwrites" {
		if err := tx.Blobs().Delete(ctx, nsGroup, hex.EncodeToString(gid)); err != nil {
			return ports.GroupView{}, err
		}
	}
	return b.Engine.CreateGroup(ctx, tx, gid, kp, ext)
}

func (b brokenEngine) PendingCommit(ctx context.Context, tx ports.Tx, gid []byte) (ports.CommitOutput, error) {
	if b.rule == "pending-commit-lost" {
		return ports.CommitOutput{}, ports.ErrNotFound
	}
	return b.Engine.PendingCommit(ctx, tx, gid)
}

func (b brokenEngine) ExpireWelcomes(ctx context.Context, tx ports.Tx, before time.Time) (int, error) {
	if b.rule == "expire-everything" {
		before = before.Add(time.Hour)
	}
	return b.Engine.ExpireWelcomes(ctx, tx, before)
}

// strip removes what a member carries beyond its key and inbox.
func strip(v ports.GroupView) ports.GroupView {
	ms := make([]ports.Member, len(v.Members))
	for i, m := range v.Members {
		ms[i] = ports.Member{LeafIndex: m.LeafIndex, SignatureKey: m.SignatureKey, InboxID: m.InboxID}
	}
	v.Members = ms
	return v
}
