// Package mlstest is the contract suite of [ports.MLS]. An adapter author
// implements a [Harness] and calls [Run] from one test function:
//
//	func TestContract(t *testing.T) {
//		mlstest.Run(t, func(t *testing.T) mlstest.Harness { return newHarness(t) })
//	}
//
// The suite drives several installations, each with its own engine and
// its own [ports.Store], through group lifecycles and checks what every
// engine must do: members agree on the epoch, the epoch authenticator, the
// tree hash, the member list and exported secrets at every epoch;
// application messages cross in both directions; state lives in the
// caller's transaction, so a failed transaction leaves it unchanged
// (JOIN-046) and a store closed and opened again, under a new engine,
// continues where it stopped; and every failure of [ports.MLS.Process]
// wraps exactly one of [ports.ErrWrongEpoch] (as a [*ports.WrongEpochError]
// with the right relation), [ports.ErrUndecryptable] or [ports.ErrInvalid].
//
// Each case is named after the rule it checks. A case that needs a
// capability the harness does not declare in [Caps] is skipped with the
// reason, never passed silently.
//
// # Cases
//
//   - Lifecycle: two and three members through adds (several in one
//     commit), updates with a path, a group context extension and a
//     removal, agreeing at every epoch; ForcePath puts an UpdatePath in a
//     commit that needs none; a Welcome opens only with its key package.
//   - Restart: the store is closed and opened again under a new engine
//     with a commit pending, with a commit staged, and after a join.
//   - JOIN-046: writes of a transaction that fails are not kept, also by
//     an engine that keeps state between calls (a rolled-back ratchet
//     step is taken again).
//   - FORK-073 and Process: wrong epoch (older, future), undecryptable
//     (garbled, replayed, forked), invalid (membership tag), unknown
//     group, and hostile input that never panics and changes nothing.
//     The suite commits the transaction around a failed Process, as a
//     caller recording a terminal rejection does (FORK-002), so a failure
//     must not write group state.
//   - JOIN-007, JOIN-008: key packages round-trip; tampered ones fail;
//     the lifetime is checked exactly when ValidateOptions.Now is set.
//   - PastEpochs: late application messages within the declared bound
//     decrypt, also after a restart; beyond it they are of a wrong epoch.
//   - Own commits (COMP-110, COMP-111): an installation's own commit read
//     back is staged and merged; a losing one is older; its own commit
//     without the pending state is of relation equal (FORK-073).
//   - Readd and removal (FORK-062, COMP-112, COMP-113): a commit that
//     removes and re-adds an installation reports RemovesSelf; the
//     inactive group keeps a removal record for JOIN-042 and classifies
//     every later message in one class.
//   - Process and MergeStaged (COMP-114, COMP-117): only the last
//     Process's commit merges; Processed names the message's epoch, its
//     sender type and a commit's proposals; members carry credentials,
//     capabilities and keys.
//   - Staged Welcomes (COMP-115, COMP-116, JOIN-087): one handle per
//     Welcome, no install over held state, siblings deleted on install,
//     list, discard, expiry and view after a restart; a Welcome in an
//     unsupported version or suite is ErrUnsupported.
//   - CreateGroup, PendingCommit and external commits (COMP-118): an
//     existing group is not overwritten; a pending commit is handed back
//     after a restart; GroupInfo and external joins, with and without
//     resync.
//   - SelfRemove (draft-ietf-mls-extensions, COMP-304): in a
//     self-remove-capable group a member's SelfRemove is committed by
//     another member and removes it; elsewhere it is ErrUnsupported.
//
// [RunPublic] is the contract of [ports.PublicGroups], the validator a
// delivery service follows groups with: a [PublicHarness] adds the
// validator to the engines, whose groups it follows (COMP-309 to
// COMP-314).
//
// Cases of an optional interface ([ports.MLSWelcomes],
// [ports.MLSPendingCommits], [ports.MLSExternal], [ports.MLSSelfRemove])
// skip, with the reason, when the engine does not implement it.
//
// # Writing a harness
//
// The suite creates installation signature keys itself: 32-byte Ed25519
// private keys (the RFC 8032 seed, as RFC 9420 serializes them), used for
// ciphersuite MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519 or any
// other Ed25519 suite the engine chooses. Credentials are basic
// credentials holding a serialized MlsCredential, whose inbox id the suite
// expects back in [ports.Member.InboxID]. Key packages advertise the
// private-use extension type 0xff7a in their capabilities, and one commit
// sets it as a group context extension.
package mlstest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// Caps declares what the engine and stores under test can do. A case
// needing a capability the harness lacks is skipped with the reason.
type Caps struct {
	// Reopen reports that a store opened by [Harness.OpenStore] after the
	// previous store of the same name was closed holds everything that
	// store committed, so that the restart cases can run.
	Reopen bool
	// BoundedPastEpochs reports that engines made by [Harness.MakeEngine]
	// keep the keys of exactly PastEpochs past epochs for late application
	// messages, and no more.
	BoundedPastEpochs bool
	// PastEpochs is the bound BoundedPastEpochs declares.
	PastEpochs int
	// RejectsUnknownVersion reports that Process refuses, with ErrInvalid,
	// an MLSMessage whose version is not mls10 (RFC 9420 §6).
	RejectsUnknownVersion bool
	// Parallel reports that harnesses are independent of each other, so the
	// cases may run in parallel (t.Parallel).
	Parallel bool
}

// Harness gives the suite the engines and stores under test. [Run] creates
// a fresh harness for every case; the harness releases what it holds
// through t.Cleanup.
type Harness interface {
	// Caps declares the capabilities of the engine and stores.
	Caps() Caps
	// MakeEngine returns the engine of the installation whose Ed25519
	// signature private key (32-byte seed) is sigKey. The suite calls it
	// again with the same key after reopening that installation's store;
	// the new engine must then continue from the state the store holds.
	MakeEngine(t *testing.T, sigKey []byte) (ports.MLS, error)
	// OpenStore opens the store named name, empty when first opened. The
	// suite closes a store before it opens the same name again.
	OpenStore(ctx context.Context, t *testing.T, name string) (ports.Store, error)
}

type testCase struct {
	name string
	run  func(e *env)
}

// Run runs every case of the contract against engines and stores made by
// the harnesses newHarness returns.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	var cases []testCase
	cases = append(cases, lifecycleCases...)
	cases = append(cases, restartCases...)
	cases = append(cases, txCases...)
	cases = append(cases, failureCases...)
	cases = append(cases, keyPackageCases...)
	cases = append(cases, pastEpochCases...)
	cases = append(cases, clientCases...)
	cases = append(cases, welcomeCases...)
	cases = append(cases, repairCases...)
	cases = append(cases, proposalCases...)
	cases = append(cases, selfRemoveCases...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			if h.Caps().Parallel {
				t.Parallel()
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			c.run(&env{t: t, ctx: ctx, h: h, caps: h.Caps()})
		})
	}
}

// env is one case's view of its harness.
type env struct {
	t    *testing.T
	ctx  context.Context
	h    Harness
	caps Caps
}

// member is one installation: its engine, its store and its keys.
type member struct {
	e     *env
	name  string
	inbox string
	sig   []byte
	pub   []byte
	store ports.Store
	mls   ports.MLS
}

// newMember makes an installation with a fresh signature key and store.
func (e *env) newMember(name string) *member {
	e.t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		e.t.Fatal(err)
	}
	m := &member{e: e, name: name, inbox: "inbox-" + name, sig: seed,
		pub: ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)}
	m.open()
	return m
}

func (m *member) open() {
	t := m.e.t
	t.Helper()
	s, err := m.e.h.OpenStore(m.e.ctx, t, m.name)
	if err != nil {
		t.Fatalf("%s: open store: %v", m.name, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, ports.ErrClosed) {
			t.Errorf("%s: close store: %v", m.name, err)
		}
	})
	eng, err := m.e.h.MakeEngine(t, m.sig)
	if err != nil {
		t.Fatalf("%s: make engine: %v", m.name, err)
	}
	m.store, m.mls = s, eng
}

// restart closes the member's store, opens it again and makes a new
// engine, as a process restart does. It skips without Caps.Reopen.
func (m *member) restart() {
	t := m.e.t
	t.Helper()
	if !m.e.caps.Reopen {
		t.Skip("harness does not declare Caps.Reopen: a store cannot be closed and opened again")
	}
	if err := m.store.Close(); err != nil {
		t.Fatalf("%s: close store: %v", m.name, err)
	}
	m.open()
}

// tx runs fn in one transaction of the member's store.
func (m *member) tx(fn func(ctx context.Context, tx ports.Tx) error) error {
	ctx := m.e.ctx
	return m.store.Tx(ctx, func(tx ports.Tx) error { return fn(ctx, tx) })
}

// must runs fn in one transaction and fails the case on error.
func (m *member) must(step string, fn func(ctx context.Context, tx ports.Tx) error) {
	m.e.t.Helper()
	if err := m.tx(fn); err != nil {
		m.e.t.Fatalf("%s: %s: %v", m.name, step, err)
	}
}

// credential is the member's serialized MlsCredential.
func (m *member) credential() []byte {
	b, err := proto.Marshal(&contentspb.MlsCredential{InboxId: m.inbox})
	if err != nil {
		m.e.t.Fatal(err)
	}
	return b
}

// suiteExtension is a group context extension type from the private-use
// range (RFC 9420 §17.3) that every member's leaf advertises, so that a
// commit may set it.
const suiteExtension = 0xff7a

// keyPackageOptions are the options of a valid key package of the member,
// valid from an hour ago for a day.
func (m *member) keyPackageOptions() ports.KeyPackageOptions {
	now := time.Now()
	return ports.KeyPackageOptions{Credential: m.credential(), SignaturePrivateKey: m.sig,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		CapabilityExtensions: []uint16{suiteExtension}}
}

// keyPackage creates a key package of the member.
func (m *member) keyPackage() ports.KeyPackageBundle {
	m.e.t.Helper()
	b, err := m.mls.CreateKeyPackage(m.e.ctx, m.keyPackageOptions())
	if err != nil {
		m.e.t.Fatalf("%s: CreateKeyPackage: %v", m.name, err)
	}
	if len(b.KeyPackage) == 0 || len(b.Ref) == 0 {
		m.e.t.Fatalf("%s: CreateKeyPackage returned an empty key package or ref", m.name)
	}
	return b
}

func record(b ports.KeyPackageBundle) ports.KeyPackageRecord {
	return ports.KeyPackageRecord{Ref: b.Ref, KeyPackage: b.KeyPackage,
		InitPrivateKey: b.InitPrivateKey, EncryptionPrivateKey: b.EncryptionPrivateKey}
}
