package mls_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// errRollback ends a benchmark transaction so that every iteration starts
// from the same stored state.
var errRollback = errors.New("rollback")

// storedInstallation is an engine whose state lives in a SQLite file.
type storedInstallation struct {
	engine *mls.Engine
	store  *sqlite.Store
	sig    []byte
	inbox  string
}

func newStoredInstallation(b *testing.B, dir, inbox string) *storedInstallation {
	b.Helper()
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	sig, _, _ := s.GenerateSignatureKey()
	e, err := mls.New(mls.Options{SignaturePrivateKey: sig, PastEpochs: 2})
	if err != nil {
		b.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, inbox+".db"), &sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return &storedInstallation{engine: e, store: st, sig: sig, inbox: inbox}
}

func keyPackageOf(b *testing.B, e ports.MLS, sig []byte, inbox string) ports.KeyPackageBundle {
	b.Helper()
	cred, _ := proto.Marshal(&contentspb.MlsCredential{InboxId: inbox})
	kp, err := e.CreateKeyPackage(context.Background(), ports.KeyPackageOptions{
		Credential: cred, SignaturePrivateKey: sig, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	return kp
}

// tx runs fn in a transaction of in's store and commits it.
func (in *storedInstallation) tx(b *testing.B, fn func(ctx context.Context, tx ports.Tx) error) {
	b.Helper()
	if err := in.store.Tx(context.Background(), func(tx ports.Tx) error { return fn(context.Background(), tx) }); err != nil {
		b.Fatal(err)
	}
}

// rolledBack runs fn in a transaction of in's store and rolls it back.
func (in *storedInstallation) rolledBack(b *testing.B, fn func(ctx context.Context, tx ports.Tx) error) {
	err := in.store.Tx(context.Background(), func(tx ports.Tx) error {
		if err := fn(context.Background(), tx); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		b.Fatal(err)
	}
}

// BenchmarkEngineScale measures what a client pays per commit through
// ports.MLS with its state in SQLite, for groups of 10, 100 and 1,000
// members: a member holding two past epochs processing and merging a
// commit with a path, and the
// committer building one, each in one transaction that is rolled back so
// that every iteration starts from the same stored state. Each call loads
// the group's state from the store and saves it back; the reference is the
// same transaction writing a blob the size of that state.
func BenchmarkEngineScale(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("members-%d", n), func(b *testing.B) {
			dir := b.TempDir()
			a := newStoredInstallation(b, dir, "creator")
			m := newStoredInstallation(b, dir, "member")
			gid := []byte("engine-scale")
			mkp := keyPackageOf(b, m.engine, m.sig, m.inbox)
			adds := [][]byte{mkp.KeyPackage}
			for i := 2; i < n; i++ {
				other := newInstallationTB(b, fmt.Sprintf("member-%d", i))
				adds = append(adds, keyPackageOf(b, other.engine, other.sig, other.inbox).KeyPackage)
			}
			var welcome []byte
			a.tx(b, func(ctx context.Context, tx ports.Tx) error {
				if _, err := a.engine.CreateGroup(ctx, tx, gid, keyPackageOf(b, a.engine, a.sig, a.inbox), nil); err != nil {
					return err
				}
				out, err := a.engine.Commit(ctx, tx, gid, ports.CommitOptions{Add: adds})
				if err != nil {
					return err
				}
				welcome = out.Welcome
				_, err = a.engine.MergePending(ctx, tx, gid)
				return err
			})
			m.tx(b, func(ctx context.Context, tx ports.Tx) error {
				st, err := m.engine.StageWelcome(ctx, tx, welcome, ports.KeyPackageRecord{Ref: mkp.Ref, KeyPackage: mkp.KeyPackage,
					InitPrivateKey: mkp.InitPrivateKey, EncryptionPrivateKey: mkp.EncryptionPrivateKey})
				if err != nil {
					return err
				}
				_, err = m.engine.InstallWelcome(ctx, tx, st.Handle)
				return err
			})
			// Two commits first, so that the member holds the two past
			// epochs it keeps, as in a group that has been in use.
			var commit []byte
			for i := range 3 {
				a.tx(b, func(ctx context.Context, tx ports.Tx) error {
					out, err := a.engine.Commit(ctx, tx, gid, ports.CommitOptions{ForcePath: true})
					commit = out.Commit
					if err != nil || i == 2 {
						return err
					}
					_, err = a.engine.MergePending(ctx, tx, gid)
					return err
				})
				if i < 2 {
					m.tx(b, func(ctx context.Context, tx ports.Tx) error {
						if _, err := m.engine.Process(ctx, tx, gid, commit); err != nil {
							return err
						}
						_, err := m.engine.MergeStaged(ctx, tx, gid)
						return err
					})
				}
			}
			var stateSize int
			m.tx(b, func(ctx context.Context, tx ports.Tx) error {
				s, err := tx.Blobs().Get(ctx, "mls.group", fmt.Sprintf("%x", gid))
				stateSize = len(s)
				return err
			})
			b.Run("process-and-merge-commit", func(b *testing.B) {
				for b.Loop() {
					m.rolledBack(b, func(ctx context.Context, tx ports.Tx) error {
						if _, err := m.engine.Process(ctx, tx, gid, commit); err != nil {
							return err
						}
						_, err := m.engine.MergeStaged(ctx, tx, gid)
						return err
					})
				}
			})
			b.Run("create-commit", func(b *testing.B) {
				for b.Loop() {
					a.rolledBack(b, func(ctx context.Context, tx ports.Tx) error {
						_, err := a.engine.Commit(ctx, tx, gid, ports.CommitOptions{ForcePath: true})
						return err
					})
				}
			})
			blob := make([]byte, stateSize)
			_, _ = rand.Read(blob)
			b.Run(fmt.Sprintf("reference-write-%dB-state", stateSize), func(b *testing.B) {
				for b.Loop() {
					m.rolledBack(b, func(ctx context.Context, tx ports.Tx) error {
						return tx.Blobs().Put(ctx, "bench", "state", blob)
					})
				}
			})
		})
	}
}
