package mlsfault_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
	"github.com/regroup-mls/regroup/ports/mlstest"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// contractHarness runs ports/mlstest on decorators with nothing armed.
type contractHarness struct{ dir string }

func (h *contractHarness) Caps() mlstest.Caps {
	return mlstest.Caps{Reopen: true, BoundedPastEpochs: true, PastEpochs: 2, RejectsUnknownVersion: true, Parallel: true}
}

func (h *contractHarness) MakeEngine(t *testing.T, sigKey []byte) (ports.MLS, error) {
	inner, err := mls.New(mls.Options{SignaturePrivateKey: sigKey, PastEpochs: 2})
	if err != nil {
		return nil, err
	}
	return mlsfault.Wrap(inner), nil
}

func (h *contractHarness) OpenStore(ctx context.Context, t *testing.T, name string) (ports.Store, error) {
	return sqlite.Open(ctx, filepath.Join(h.dir, name+".db"), &sqlite.Options{})
}

// A decorator with nothing armed is the engine it wraps: it passes the
// whole ports.MLS contract, optional interfaces included.
func TestUnarmedPassesTheContract(t *testing.T) {
	mlstest.Run(t, func(t *testing.T) mlstest.Harness { return &contractHarness{dir: t.TempDir()} })
}

// inst is one installation: a decorated engine over a SQLite store.
type inst struct {
	t     *testing.T
	ctx   context.Context
	name  string
	seed  []byte
	store ports.Store
	eng   *mlsfault.Engine
}

func newInst(t *testing.T, name string) *inst {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), name+".db"), &sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	inner, err := mls.New(mls.Options{SignaturePrivateKey: seed})
	if err != nil {
		t.Fatal(err)
	}
	return &inst{t: t, ctx: ctx, name: name, seed: seed, store: s, eng: mlsfault.Wrap(inner)}
}

func (m *inst) tx(fn func(tx ports.Tx) error) {
	m.t.Helper()
	if err := m.store.Tx(m.ctx, fn); err != nil {
		m.t.Fatalf("%s: %v", m.name, err)
	}
}

func (m *inst) keyPackage() ports.KeyPackageBundle {
	m.t.Helper()
	cred, _ := proto.Marshal(&contentspb.MlsCredential{InboxId: "inbox-" + m.name})
	now := time.Now()
	b, err := m.eng.CreateKeyPackage(m.ctx, ports.KeyPackageOptions{Credential: cred, SignaturePrivateKey: m.seed,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)})
	if err != nil {
		m.t.Fatal(err)
	}
	return b
}

func (m *inst) view(gid []byte) (v ports.GroupView) {
	m.t.Helper()
	m.tx(func(tx ports.Tx) (err error) {
		v, err = m.eng.Group(m.ctx, tx, gid)
		return err
	})
	return v
}

// commit builds a commit and merges it at once, as if read back.
func (m *inst) commit(gid []byte, opts ports.CommitOptions) (out ports.CommitOutput) {
	m.t.Helper()
	m.tx(func(tx ports.Tx) (err error) {
		if out, err = m.eng.Commit(m.ctx, tx, gid, opts); err != nil {
			return err
		}
		_, err = m.eng.MergePending(m.ctx, tx, gid)
		return err
	})
	return out
}

// process processes msg and, for a commit, merges it, in one transaction
// that commits whatever Process returned (a caller recording a terminal
// rejection commits too). It returns the merged view or Process's error.
func (m *inst) process(gid, msg []byte) (ports.GroupView, error) {
	m.t.Helper()
	var v ports.GroupView
	var perr error
	m.tx(func(tx ports.Tx) error {
		p, err := m.eng.Process(m.ctx, tx, gid, msg)
		if err != nil {
			perr = err
			return nil
		}
		if p.Kind == ports.ProcessedCommit {
			v, err = m.eng.MergeStaged(m.ctx, tx, gid)
		}
		return err
	})
	return v, perr
}

// pair returns a and b in one group at epoch 1.
func pair(t *testing.T) (gid []byte, a, b *inst) {
	a, b = newInst(t, "a"), newInst(t, "b")
	gid = bytes.Repeat([]byte{7}, 32)
	a.tx(func(tx ports.Tx) error {
		_, err := a.eng.CreateGroup(a.ctx, tx, gid, a.keyPackage(), nil)
		return err
	})
	kp := b.keyPackage()
	out := a.commit(gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	b.tx(func(tx ports.Tx) error {
		st, err := b.eng.StageWelcome(b.ctx, tx, out.Welcome, ports.KeyPackageRecord{Ref: kp.Ref, KeyPackage: kp.KeyPackage,
			InitPrivateKey: kp.InitPrivateKey, EncryptionPrivateKey: kp.EncryptionPrivateKey})
		if err != nil {
			return err
		}
		_, err = b.eng.InstallWelcome(b.ctx, tx, st.Handle)
		return err
	})
	return gid, a, b
}

// diverged fails unless b's state really left a's: b cannot process a
// commit a makes next, as every member of a forked state finds.
func diverged(t *testing.T, gid []byte, a, b *inst) {
	t.Helper()
	av, bv := a.view(gid), b.view(gid)
	if bytes.Equal(av.EpochAuthenticator, bv.EpochAuthenticator) {
		t.Fatalf("a and b share the epoch authenticator %x", av.EpochAuthenticator)
	}
	next := a.commit(gid, ports.CommitOptions{ForcePath: true})
	if _, err := b.process(gid, next.Commit); err == nil {
		t.Fatal("b processed a's next commit: its state did not diverge")
	}
}

// DivergeAfterMerge: b merges a's commit and then a commit of its own that
// nobody sees; the merge reports the diverged state, and b can follow a
// no longer.
func TestDivergeAfterMerge(t *testing.T) {
	gid, a, b := pair(t)
	b.eng.Arm(gid, mlsfault.DivergeAfterMerge)
	c := a.commit(gid, ports.CommitOptions{ForcePath: true})
	got, err := b.process(gid, c.Commit)
	if err != nil {
		t.Fatal(err)
	}
	if got.Epoch != 3 || !bytes.Equal(got.EpochAuthenticator, b.view(gid).EpochAuthenticator) {
		t.Fatalf("the merge reported epoch %d, %x; the engine holds %+v", got.Epoch, got.EpochAuthenticator, b.view(gid))
	}
	if n := b.eng.Fired(gid, mlsfault.DivergeAfterMerge); n != 1 {
		t.Fatalf("fired %d times", n)
	}
	diverged(t, gid, a, b)
}

// RefuseWinner without a pending commit: b refuses a's commit as invalid
// and merges one of its own for the same epoch in its place.
func TestRefuseWinnerMergesAnOwnCommit(t *testing.T) {
	gid, a, b := pair(t)
	b.eng.Arm(gid, mlsfault.RefuseWinner)
	c := a.commit(gid, ports.CommitOptions{ForcePath: true})
	_, err := b.process(gid, c.Commit)
	var pe *ports.ProcessError
	if !errors.Is(err, ports.ErrInvalid) || !errors.Is(err, mlsfault.ErrInjected) || !errors.As(err, &pe) || pe.MessageEpoch != 1 {
		t.Fatalf("processing the winner = %v; want an injected ErrInvalid naming epoch 1", err)
	}
	if v := b.view(gid); v.Epoch != 2 {
		t.Fatalf("b at epoch %d, want 2 (its own commit merged)", v.Epoch)
	}
	diverged(t, gid, a, b)
}

// RefuseWinner with a pending commit: b refuses the winner, keeps its own
// pending commit and merges it when it reads it back (the losing commit of
// a real race), while a rejects that commit as of an older epoch.
func TestRefuseWinnerMergesThePendingLoser(t *testing.T) {
	gid, a, b := pair(t)
	b.eng.Arm(gid, mlsfault.RefuseWinner)
	var loser ports.CommitOutput
	b.tx(func(tx ports.Tx) (err error) {
		loser, err = b.eng.Commit(b.ctx, tx, gid, ports.CommitOptions{ForcePath: true})
		return err
	})
	winner := a.commit(gid, ports.CommitOptions{ForcePath: true})
	if _, err := b.process(gid, winner.Commit); !errors.Is(err, mlsfault.ErrInjected) {
		t.Fatalf("processing the winner = %v; want the injected refusal", err)
	}
	var own bool
	b.tx(func(tx ports.Tx) error {
		p, err := b.eng.Process(b.ctx, tx, gid, loser.Commit)
		if err != nil {
			return err
		}
		own = p.Own
		_, err = b.eng.MergeStaged(b.ctx, tx, gid)
		return err
	})
	if !own {
		t.Fatal("b's own commit was not recognised read back")
	}
	if _, err := a.process(gid, loser.Commit); !errors.Is(err, ports.ErrWrongEpoch) {
		t.Fatalf("a processing the loser = %v, want wrong epoch", err)
	}
	diverged(t, gid, a, b)
}

// MisrecordAuthenticator: the merge reports an authenticator the engine
// does not hold, once; the state itself stays the group's, so b keeps
// following a.
func TestMisrecordAuthenticator(t *testing.T) {
	gid, a, b := pair(t)
	b.eng.Arm(gid, mlsfault.MisrecordAuthenticator)
	c := a.commit(gid, ports.CommitOptions{ForcePath: true})
	got, err := b.process(gid, c.Commit)
	if err != nil {
		t.Fatal(err)
	}
	want := a.view(gid)
	if bytes.Equal(got.EpochAuthenticator, want.EpochAuthenticator) || len(got.EpochAuthenticator) != len(want.EpochAuthenticator) {
		t.Fatalf("reported %x, the group's is %x: want another of the same length", got.EpochAuthenticator, want.EpochAuthenticator)
	}
	if v := b.view(gid); !bytes.Equal(v.EpochAuthenticator, want.EpochAuthenticator) {
		t.Fatal("the engine's own state diverged")
	}
	next := a.commit(gid, ports.CommitOptions{ForcePath: true})
	got, err = b.process(gid, next.Commit)
	if err != nil {
		t.Fatalf("b cannot follow a: %v", err)
	}
	if !bytes.Equal(got.EpochAuthenticator, a.view(gid).EpochAuthenticator) {
		t.Fatal("a fault armed once fired twice")
	}
}

// A transaction rolled back and run again meets the fault again at the
// same epoch, so the fork does not vanish with the rollback; the fault is
// counted once.
func TestFaultSurvivesARetriedTransaction(t *testing.T) {
	gid, a, b := pair(t)
	b.eng.Arm(gid, mlsfault.DivergeAfterMerge)
	c := a.commit(gid, ports.CommitOptions{ForcePath: true})
	rollback := errors.New("roll back")
	err := b.store.Tx(b.ctx, func(tx ports.Tx) error {
		if _, err := b.eng.Process(b.ctx, tx, gid, c.Commit); err != nil {
			return err
		}
		if _, err := b.eng.MergeStaged(b.ctx, tx, gid); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	if _, err := b.process(gid, c.Commit); err != nil {
		t.Fatal(err)
	}
	if n := b.eng.Fired(gid, mlsfault.DivergeAfterMerge); n != 1 {
		t.Fatalf("fired at %d epochs, want 1", n)
	}
	diverged(t, gid, a, b)
}

// ArmRepeat fires at every epoch until Disarm.
func TestArmRepeat(t *testing.T) {
	gid, a, b := pair(t)
	b.eng.ArmRepeat(gid, mlsfault.MisrecordAuthenticator)
	for i := 0; i < 2; i++ {
		c := a.commit(gid, ports.CommitOptions{ForcePath: true})
		got, err := b.process(gid, c.Commit)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(got.EpochAuthenticator, a.view(gid).EpochAuthenticator) {
			t.Fatalf("commit %d: the repeating fault did not fire", i)
		}
	}
	b.eng.Disarm(gid)
	c := a.commit(gid, ports.CommitOptions{ForcePath: true})
	if got, err := b.process(gid, c.Commit); err != nil || !bytes.Equal(got.EpochAuthenticator, a.view(gid).EpochAuthenticator) {
		t.Fatalf("after Disarm: %v, %x", err, got.EpochAuthenticator)
	}
	if n := b.eng.Fired(gid, mlsfault.MisrecordAuthenticator); n != 2 {
		t.Fatalf("fired at %d epochs, want 2", n)
	}
}
