package keypackage_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// tlsVector reads an RFC 9420 variable-length vector (QUIC varint length).
func tlsVector(b []byte) (body, rest []byte) {
	n, l := uint64(b[0]&0x3f), 1<<(b[0]>>6)
	for i := 1; i < l; i++ {
		n = n<<8 | uint64(b[i])
	}
	return b[l : l+int(n)], b[l+int(n):]
}

// rawKeyPackage splits a TLS KeyPackage by hand, independently of the
// engine: suite, init_key, the leaf's encryption_key and signature_key and
// credential.
type rawKeyPackage struct {
	version, suite               uint16
	initKey, encKey, sigKey      []byte
	credType                     uint16
	identity                     []byte
	capVersions, capSuites, capX []byte
	capProposals, capCreds       []byte
}

func parseRaw(t *testing.T, kp []byte) rawKeyPackage {
	t.Helper()
	var r rawKeyPackage
	r.version, r.suite = binary.BigEndian.Uint16(kp), binary.BigEndian.Uint16(kp[2:])
	rest := kp[4:]
	r.initKey, rest = tlsVector(rest)
	r.encKey, rest = tlsVector(rest)
	r.sigKey, rest = tlsVector(rest)
	r.credType, rest = binary.BigEndian.Uint16(rest), rest[2:]
	r.identity, rest = tlsVector(rest)
	r.capVersions, rest = tlsVector(rest)
	r.capSuites, rest = tlsVector(rest)
	r.capX, rest = tlsVector(rest)
	r.capProposals, rest = tlsVector(rest)
	r.capCreds, _ = tlsVector(rest)
	return r
}

func u16s(b []byte) []uint16 {
	var out []uint16
	for ; len(b) >= 2; b = b[2:] {
		out = append(out, binary.BigEndian.Uint16(b))
	}
	return out
}

// JOIN-001, JOIN-004, JOIN-072: the published package's credential is a
// basic credential (type 1) whose identity is exactly one serialized
// MlsCredential naming the inbox, its signature key is the installation
// key the inbox associates, and its suite is 0x0003 — all read from the
// bytes by hand.
func TestJOIN001_JOIN004_JOIN072_PublishedPackage(t *testing.T) {
	in := newInstallation(t, "sqlite", newService(t, clock.NewFake(t0)), clock.NewFake(t0))
	rec, err := in.mgr.Publish(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in.newest(), rec.KeyPackage) {
		t.Fatal("the served package is not the one published")
	}
	r := parseRaw(t, rec.KeyPackage)
	if r.version != 1 || r.suite != 0x0003 {
		t.Errorf("JOIN-072: version %d suite %#04x, want 1 and 0x0003", r.version, r.suite)
	}
	if r.credType != 1 {
		t.Errorf("JOIN-004: credential type %d, want basic (1)", r.credType)
	}
	want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&contentspb.MlsCredential{InboxId: in.id.InboxID})
	if !bytes.Equal(r.identity, want) {
		t.Errorf("JOIN-004: identity %x, want the MlsCredential %x", r.identity, want)
	}
	st, err := in.resolver.Newest(testCtx(t), in.id.InboxID)
	if err != nil || len(st.InstallationKeys) != 1 || !bytes.Equal(st.InstallationKeys[0], r.sigKey) {
		t.Errorf("JOIN-001: leaf key %x, inbox associates %x (%v)", r.sigKey, st.InstallationKeys, err)
	}
}

// JOIN-001: an installation its inbox no longer associates (revoked)
// publishes no key package.
func TestJOIN001_RevokedInstallationPublishesNothing(t *testing.T) {
	clk := clock.NewFake(t0)
	in := newInstallation(t, "sqlite", newService(t, clk), clk)
	if _, err := identity.Revoke(testCtx(t), identity.Options{Store: in.store, Transport: in.tr, Clock: clk}, in.id.RecoveryKey, in.id.PublicKey()); err != nil {
		t.Fatal(err)
	}
	_, err := in.mgr.Publish(testCtx(t))
	if !errors.Is(err, keypackage.ErrNotAssociated) {
		t.Fatalf("Publish after revocation = %v, want ErrNotAssociated", err)
	}
	if n := len(in.records()); n != 0 {
		t.Fatalf("%d packages stored for a revoked installation", n)
	}
}

// JOIN-002: the leaf's capabilities list exactly CapabilityExtensions and
// CapabilityProposals, and the engine processes each listed extension: a
// group whose context carries the app_data_dictionary adds the package
// (with its 0xff03 and 0xff04), the joiner installs the Welcome, and a
// GroupContextExtensions commit changing the dictionary is processed.
func TestJOIN002_AdvertisedCapabilitiesAreProcessed(t *testing.T) {
	clk := clock.NewFake(t0)
	svc := newService(t, clk)
	bob := newInstallation(t, "sqlite", svc, clk)
	rec, err := bob.mgr.Publish(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	r := parseRaw(t, rec.KeyPackage)
	if fmt.Sprint(u16s(r.capX)) != fmt.Sprint(keypackage.CapabilityExtensions()) || len(r.capProposals) != 0 {
		t.Fatalf("capabilities: extensions %x proposals %x; want %x and none", u16s(r.capX), u16s(r.capProposals), keypackage.CapabilityExtensions())
	}
	alice := newInstallation(t, "sqlite", svc, clk)
	ctx := testCtx(t)
	alicePkg, err := alice.mgr.Publish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dict := metadata.Dictionary{}.Set(metadata.ComponentName, []byte("ops"))
	gce, _ := dict.Extension()
	gid := bytes.Repeat([]byte{7}, 32)
	signer := ports.KeyPackageBundle{KeyPackage: alicePkg.KeyPackage, Ref: alicePkg.Ref,
		InitPrivateKey: alicePkg.InitPrivateKey, EncryptionPrivateKey: alicePkg.EncryptionPrivateKey}
	var welcome []byte
	err = alice.store.Tx(ctx, func(tx ports.Tx) error {
		if _, err := alice.engine.CreateGroup(ctx, tx, gid, signer, []ports.Extension{gce}); err != nil {
			return fmt.Errorf("create group with the app_data_dictionary: %w", err)
		}
		out, err := alice.engine.Commit(ctx, tx, gid, ports.CommitOptions{Add: [][]byte{rec.KeyPackage}})
		if err != nil {
			return fmt.Errorf("add bob's package: %w", err)
		}
		welcome = out.Welcome
		_, err = alice.engine.MergePending(ctx, tx, gid)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	bobRec := bob.record(rec.Ref)
	err = bob.store.Tx(ctx, func(tx ports.Tx) error {
		st, err := bob.engine.StageWelcome(ctx, tx, welcome, bobRec)
		if err != nil {
			return fmt.Errorf("stage welcome: %w", err)
		}
		_, err = bob.engine.InstallWelcome(ctx, tx, st.Handle)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	gce2, _ := dict.Set(metadata.ComponentName, []byte("ops-2")).Extension()
	var commit []byte
	err = alice.store.Tx(ctx, func(tx ports.Tx) error {
		out, err := alice.engine.Commit(ctx, tx, gid, ports.CommitOptions{GroupContextExtensions: []ports.Extension{gce2}})
		if err != nil {
			return err
		}
		commit = out.Commit
		_, err = alice.engine.MergePending(ctx, tx, gid)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = bob.store.Tx(ctx, func(tx ports.Tx) error {
		if _, err := bob.engine.Process(ctx, tx, gid, commit); err != nil {
			return err
		}
		v, err := bob.engine.MergeStaged(ctx, tx, gid)
		if err == nil {
			d, _ := metadata.FromExtensions(v.Extensions)
			if name, _ := d.Get(metadata.ComponentName); string(name) != "ops-2" {
				return fmt.Errorf("dictionary after the commit names %q", name)
			}
		}
		return err
	})
	if err != nil {
		t.Fatalf("processing a GroupContextExtensions commit of the app_data_dictionary: %v", err)
	}
}

// JOIN-016: each replacement carries an init_key, a leaf encryption_key
// and a wrapper key generated for it, none reused from an earlier package
// (read from the bytes by hand).
func TestJOIN016_RotationChangesKeys(t *testing.T) {
	clk := clock.NewFake(t0)
	in := newInstallation(t, "sqlite", newService(t, clk), clk)
	seen := map[string]string{}
	for i := 0; i < 4; i++ {
		rec, err := in.mgr.Rotate(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		r := parseRaw(t, rec.KeyPackage)
		var w contentspb.WelcomeWrapperEncryption
		for _, e := range in.validated(rec).Extensions {
			if e.Type == keypackage.ExtWelcomeWrapperEncryption {
				proto.Unmarshal(e.Data, &w)
			}
		}
		for name, k := range map[string][]byte{"init_key": r.initKey, "encryption_key": r.encKey, "wrapper key": w.GetPubKey(),
			"init private": rec.InitPrivateKey, "encryption private": rec.EncryptionPrivateKey, "wrapper private": rec.WrapperPrivateKey} {
			if prev, dup := seen[string(k)]; dup || len(k) == 0 {
				t.Errorf("JOIN-016: package %d reuses %s (earlier as %s) or lacks it", i, name, prev)
			}
			seen[string(k)] = name
		}
		if !bytes.Equal(w.GetPubKey(), rec.WrapperPublicKey) || w.GetAlgorithm() != contentspb.WelcomeWrapperAlgorithm_WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6 {
			t.Errorf("package %d advertises %v, record holds another wrapper key", i, w.GetAlgorithm())
		}
	}
}

func (in *installation) validated(rec ports.KeyPackageRecord) ports.ValidatedKeyPackage {
	v, err := in.engine.ValidateKeyPackage(context.Background(), rec.KeyPackage, ports.ValidateOptions{})
	if err != nil {
		in.t.Fatal(err)
	}
	return v
}

// JOIN-003: while a package is the newest published one its keys are kept
// however many Welcomes use it and however much time passes: two senders
// add the installation through the same package, a day and more passes
// with destruction running, and both Welcomes still open.
func TestJOIN003_CurrentKeysKeptAcrossWelcomes(t *testing.T) {
	clk := clock.NewFake(t0)
	svc := newService(t, clk)
	bob := newInstallation(t, "sqlite", svc, clk)
	rec, err := bob.mgr.Publish(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for i := 0; i < 2; i++ {
		sender := newInstallation(t, "sqlite", svc, clk)
		sp, err := sender.mgr.Publish(ctx)
		if err != nil {
			t.Fatal(err)
		}
		gid := bytes.Repeat([]byte{byte(i + 1)}, 32)
		var welcome []byte
		err = sender.store.Tx(ctx, func(tx ports.Tx) error {
			_, err := sender.engine.CreateGroup(ctx, tx, gid, ports.KeyPackageBundle{KeyPackage: sp.KeyPackage, Ref: sp.Ref,
				InitPrivateKey: sp.InitPrivateKey, EncryptionPrivateKey: sp.EncryptionPrivateKey}, nil)
			if err != nil {
				return err
			}
			out, err := sender.engine.Commit(ctx, tx, gid, ports.CommitOptions{Add: [][]byte{bob.newest()}})
			welcome = out.Welcome
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(25 * time.Hour)
		if _, err := bob.mgr.DestroySuperseded(ctx); err != nil {
			t.Fatal(err)
		}
		bobRec := bob.record(rec.Ref)
		err = bob.store.Tx(ctx, func(tx ports.Tx) error {
			st, err := bob.engine.StageWelcome(ctx, tx, welcome, bobRec)
			if err != nil {
				return err
			}
			_, err = bob.engine.InstallWelcome(ctx, tx, st.Handle)
			return err
		})
		if err != nil {
			t.Fatalf("JOIN-003: Welcome %d to the current package: %v", i+1, err)
		}
		if err := bob.mgr.WelcomeAccepted(ctx, rec.Ref); err != nil {
			t.Fatal(err)
		}
	}
	if !hasKeys(bob.record(rec.Ref)) {
		t.Fatal("JOIN-003: the current package's keys are gone")
	}
}

// the tests below share a rotation helper: publish P1, rotate to P2 at
// the clock's current time.
func rotated(t *testing.T, db string) (in *installation, clk *clock.Fake, p1, p2 ports.KeyPackageRecord) {
	clk = clock.NewFake(t0)
	in = newInstallation(t, db, newService(t, clk), clk)
	var err error
	if p1, err = in.mgr.Publish(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if p2, err = in.mgr.Rotate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return in, clk, p1, p2
}

// JOIN-074, JOIN-019, JOIN-020: a superseded package's three private keys
// are destroyed together exactly when one day has passed since the later
// package's publish response carried a sequence id > 0, not a second
// earlier; the current package keeps its keys; the state survives a
// restart at every step.
func TestJOIN074_JOIN019_DestroyOneDayAfterConfirmation(t *testing.T) {
	for _, db := range dbs {
		t.Run(db, func(t *testing.T) {
			in, clk, p1, p2 := rotated(t, db)
			if p2.PublishSequenceID == 0 || !p2.PublishConfirmedAt.Equal(clk.Now()) {
				t.Fatalf("P2 confirmation = %d at %v", p2.PublishSequenceID, p2.PublishConfirmedAt)
			}
			clk.Set(p2.PublishConfirmedAt.Add(24*time.Hour - time.Second))
			in.reopen()
			if err := in.mgr.Tick(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			if !hasKeys(in.record(p1.Ref)) {
				t.Fatal("JOIN-074: P1 destroyed before a day had passed since P2's confirmation")
			}
			clk.Advance(time.Second)
			in.reopen()
			if n, err := in.mgr.DestroySuperseded(testCtx(t)); err != nil || n != 1 {
				t.Fatalf("DestroySuperseded = %d, %v; want 1", n, err)
			}
			if r := in.record(p1.Ref); !noKeys(r) {
				t.Fatalf("JOIN-019: after destruction P1 holds init %d, encryption %d, wrapper %d bytes", len(r.InitPrivateKey), len(r.EncryptionPrivateKey), len(r.WrapperPrivateKey))
			}
			if !hasKeys(in.record(p2.Ref)) {
				t.Fatal("JOIN-003: the current package lost its keys")
			}
		})
	}
}

// JOIN-018: while a received Welcome is held, no key package's keys are
// destroyed, however late; once it is completed they are.
func TestJOIN018_HeldWelcomeBlocksDestruction(t *testing.T) {
	for _, db := range dbs {
		t.Run(db, func(t *testing.T) {
			in, clk, p1, _ := rotated(t, db)
			ctx := testCtx(t)
			err := in.store.Tx(ctx, func(tx ports.Tx) error {
				_, err := tx.HeldWelcomes().Put(ctx, ports.HeldWelcome{SequenceID: 99, Envelope: []byte("held"), FirstSeenAt: clk.Now()})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(30 * 24 * time.Hour)
			in.reopen()
			in.mgr.Tick(ctx)
			if !hasKeys(in.record(p1.Ref)) {
				t.Fatal("JOIN-018: P1 destroyed while a Welcome was held")
			}
			in.store.Tx(ctx, func(tx ports.Tx) error { return tx.HeldWelcomes().Delete(ctx, 99) })
			if n, err := in.mgr.DestroySuperseded(ctx); err != nil || n != 1 || !noKeys(in.record(p1.Ref)) {
				t.Fatalf("after the Welcome completed: destroyed %d, %v", n, err)
			}
		})
	}
}

// failingTransport fails every publish as a lost response would: the
// service may have stored it, the caller does not know.
type lossyTransport struct {
	ports.Transport
	store bool // store the envelope before failing
	fail  bool
}

func (l *lossyTransport) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	if !l.fail {
		return l.Transport.Publish(ctx, envs)
	}
	if l.store {
		l.Transport.Publish(ctx, envs)
	}
	return nil, fmt.Errorf("%w: response lost", ports.ErrUnavailable)
}

// JOIN-020: nothing is destroyed before a later package's publish is
// confirmed — with every publish response lost, the old package keeps its
// keys however long, and the new one is republished by the next tick; a
// package the service refused with INVALID_ARGUMENT may go at once.
func TestJOIN020_ConfirmationPrecedesDestruction(t *testing.T) {
	clk := clock.NewFake(t0)
	in := newInstallation(t, "sqlite", newService(t, clk), clk)
	p1, err := in.mgr.Publish(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	lossy := &lossyTransport{Transport: in.tr, fail: true}
	in.opts.Transport = lossy
	mgr, _ := keypackage.NewManager(in.opts)
	if _, err := mgr.Rotate(testCtx(t)); !errors.Is(err, ports.ErrUnavailable) {
		t.Fatalf("Rotate with a lost response = %v", err)
	}
	clk.Advance(10 * 24 * time.Hour)
	mgr.Tick(testCtx(t))
	if !hasKeys(in.record(p1.Ref)) {
		t.Fatal("JOIN-020: P1 destroyed though no later publish was confirmed")
	}
	lossy.fail = false
	if err := mgr.Tick(testCtx(t)); err != nil { // republishes P2, confirms it
		t.Fatal(err)
	}
	cur, _ := mgr.Current(testCtx(t))
	if bytes.Equal(cur.Ref, p1.Ref) || !bytes.Equal(in.newest(), cur.KeyPackage) {
		t.Fatal("the pending package was not republished as current")
	}
	if !hasKeys(in.record(p1.Ref)) {
		t.Fatal("JOIN-074: P1 destroyed at the confirmation itself")
	}
	// A refused package: the service refuses a package whose wrapper it
	// cannot use; its keys may go at once.
	refusing := &refuseTransport{Transport: in.tr}
	in.opts.Transport = refusing
	mgr, _ = keypackage.NewManager(in.opts)
	bad, err := mgr.Rotate(testCtx(t))
	if !errors.Is(err, ports.ErrInvalidArgument) || !bad.PublishRefused {
		t.Fatalf("refused publish = %v (refused %v)", err, bad.PublishRefused)
	}
	if n, _ := mgr.DestroySuperseded(testCtx(t)); n != 1 || !noKeys(in.record(bad.Ref)) || !hasKeys(in.record(cur.Ref)) {
		t.Fatalf("refused package not destroyed at once (%d destroyed) or current touched", n)
	}
}

type refuseTransport struct{ ports.Transport }

func (r *refuseTransport) Publish(context.Context, []*backendpb.ClientEnvelope) ([]uint64, error) {
	return nil, fmt.Errorf("%w: key package refused", ports.ErrInvalidArgument)
}

// JOIN-074: for a package whose publish response was lost, the day starts
// at the read of the installation's topic that serves another package at
// or above the highest confirmed sequence id, never before that read.
func TestJOIN074_LostResponseSettlementRead(t *testing.T) {
	clk := clock.NewFake(t0)
	in := newInstallation(t, "sqlite", newService(t, clk), clk)
	p1, err := in.mgr.Publish(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	// P2's publish is stored, its response lost; the process restarts and
	// builds P3 before the pending one is retried.
	lossy := &lossyTransport{Transport: in.tr, fail: true, store: true}
	in.opts.Transport = lossy
	mgr, _ := keypackage.NewManager(in.opts)
	p2, _ := mgr.Rotate(testCtx(t))
	lossy.fail = false
	clk.Advance(time.Hour)
	p3, err := mgr.Rotate(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	confirmedAt := clk.Now()
	clk.Advance(3 * 24 * time.Hour) // no settlement read has happened yet
	if _, err := mgr.DestroySuperseded(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if !hasKeys(in.record(p2.Ref)) || !noKeys(in.record(p1.Ref)) {
		t.Fatalf("before the settlement read: P2 keys %v (want kept), P1 destroyed %v (want destroyed, confirmed at %v)",
			hasKeys(in.record(p2.Ref)), noKeys(in.record(p1.Ref)), confirmedAt)
	}
	in.reopen()
	in.opts.Transport = in.tr
	mgr, _ = keypackage.NewManager(in.opts)
	if err := mgr.Tick(testCtx(t)); err != nil { // the settlement read serves P3
		t.Fatal(err)
	}
	if !hasKeys(in.record(p2.Ref)) {
		t.Fatal("JOIN-074: P2 destroyed at its settlement read, before its day")
	}
	clk.Advance(24*time.Hour - time.Second)
	mgr.Tick(testCtx(t))
	if !hasKeys(in.record(p2.Ref)) {
		t.Fatal("JOIN-074: P2 destroyed less than a day after its settlement read")
	}
	clk.Advance(time.Second)
	mgr.Tick(testCtx(t))
	if !noKeys(in.record(p2.Ref)) || !hasKeys(in.record(p3.Ref)) {
		t.Fatal("JOIN-074: P2 kept a day after its settlement read, or P3 touched")
	}
}

// Rotation runs before not_after and after a Welcome to the current
// package is accepted, from the stored state after a restart.
func TestRotationTriggers(t *testing.T) {
	clk := clock.NewFake(t0)
	in := newInstallation(t, "sqlite", newService(t, clk), clk)
	p1, err := in.mgr.Publish(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	in.mgr.Tick(testCtx(t))
	if cur, _ := in.mgr.Current(testCtx(t)); !bytes.Equal(cur.Ref, p1.Ref) {
		t.Fatal("rotated without a reason")
	}
	if err := in.mgr.WelcomeAccepted(testCtx(t), p1.Ref); err != nil {
		t.Fatal(err)
	}
	in.reopen()
	in.mgr.Tick(testCtx(t))
	p2, _ := in.mgr.Current(testCtx(t))
	if bytes.Equal(p2.Ref, p1.Ref) {
		t.Fatal("no rotation after a Welcome to the current package was accepted")
	}
	clk.Set(p2.NotAfter.Add(-14*24*time.Hour - time.Second))
	in.mgr.Tick(testCtx(t))
	if cur, _ := in.mgr.Current(testCtx(t)); !bytes.Equal(cur.Ref, p2.Ref) {
		t.Fatal("rotated before the rotation window")
	}
	clk.Advance(time.Second)
	in.mgr.Tick(testCtx(t))
	if cur, _ := in.mgr.Current(testCtx(t)); bytes.Equal(cur.Ref, p2.Ref) {
		t.Fatal("no rotation two weeks before not_after")
	}
}

// Destroyed keys leave the database: after destruction the bytes of the
// SQLite file and its WAL hold none of the three private keys.
func TestJOIN019_DestroyedKeysLeaveTheSQLiteFile(t *testing.T) {
	in, clk, p1, _ := rotated(t, "sqlite")
	clk.Advance(25 * time.Hour)
	if n, err := in.mgr.DestroySuperseded(testCtx(t)); err != nil || n != 1 {
		t.Fatalf("DestroySuperseded = %d, %v", n, err)
	}
	in.store.Close()
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		b, err := os.ReadFile(in.locator + suffix)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for name, k := range map[string][]byte{"init": p1.InitPrivateKey, "encryption": p1.EncryptionPrivateKey, "wrapper": p1.WrapperPrivateKey} {
			if bytes.Contains(b, k) {
				t.Errorf("the %s private key of a destroyed package is still in %s", name, in.locator+suffix)
			}
		}
	}
}
