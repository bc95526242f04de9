package mls_test

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// memBlobs is an in-memory ports.Blobs.
type memBlobs struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (b *memBlobs) Get(_ context.Context, ns, k string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[ns+"/"+k]
	if !ok {
		return nil, ports.ErrNotFound
	}
	return append([]byte(nil), v...), nil
}
func (b *memBlobs) Put(_ context.Context, ns, k string, v []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[ns+"/"+k] = append([]byte(nil), v...)
	return nil
}
func (b *memBlobs) Delete(_ context.Context, ns, k string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, ns+"/"+k)
	return nil
}
func (b *memBlobs) Keys(_ context.Context, ns, prefix string) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for k := range b.m {
		if rest, ok := strings.CutPrefix(k, ns+"/"); ok && strings.HasPrefix(rest, prefix) {
			out = append(out, rest)
		}
	}
	sort.Strings(out)
	return out, nil
}

// blobTx is a ports.Tx of which the engine uses only Blobs.
type blobTx struct {
	ports.Tx
	blobs *memBlobs
}

func (t blobTx) Blobs() ports.Blobs { return t.blobs }

type installation struct {
	engine *mls.Engine
	tx     blobTx
	sig    []byte
	inbox  string
}

func newInstallation(t *testing.T, inbox string) *installation { return newInstallationTB(t, inbox) }

func newInstallationTB(t testing.TB, inbox string) *installation {
	t.Helper()
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	sig, _, _ := s.GenerateSignatureKey()
	e, err := mls.New(mls.Options{SignaturePrivateKey: sig, PastEpochs: 2})
	if err != nil {
		t.Fatal(err)
	}
	return &installation{engine: e, tx: blobTx{blobs: &memBlobs{m: map[string][]byte{}}}, sig: sig, inbox: inbox}
}

func (in *installation) keyPackage(t *testing.T) ports.KeyPackageBundle { return in.keyPackageTB(t) }

func (in *installation) keyPackageTB(t testing.TB) ports.KeyPackageBundle {
	t.Helper()
	cred, _ := proto.Marshal(&contentspb.MlsCredential{InboxId: in.inbox})
	b, err := in.engine.CreateKeyPackage(context.Background(), ports.KeyPackageOptions{
		Credential: cred, SignaturePrivateKey: in.sig, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func same(t *testing.T, step string, a, b ports.GroupView) {
	t.Helper()
	if a.Epoch != b.Epoch || !bytes.Equal(a.EpochAuthenticator, b.EpochAuthenticator) || len(a.Members) != len(b.Members) {
		t.Fatalf("%s: views differ: epoch %d/%d, %d/%d members", step, a.Epoch, b.Epoch, len(a.Members), len(b.Members))
	}
}

// TestEngineLifecycle drives two installations through ports.MLS: create,
// validate a key package, add by Welcome (staged, then installed), an
// application message, a commit with a path staged and merged on both
// sides, a removal, and the error class of a replayed message (JOIN-007,
// JOIN-027 path of StageWelcome, RFC 9420 §12).
func TestEngineLifecycle(t *testing.T) {
	ctx := context.Background()
	a, b := newInstallation(t, "inbox-a"), newInstallation(t, "inbox-b")
	gid := []byte("engine-group")
	va, err := a.engine.CreateGroup(ctx, a.tx, gid, a.keyPackage(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if va.Epoch != 0 || len(va.Members) != 1 || va.Members[0].InboxID != "inbox-a" || !va.Active {
		t.Fatalf("created view: %+v", va)
	}
	kpb := b.keyPackage(t)
	vk, err := a.engine.ValidateKeyPackage(ctx, kpb.KeyPackage, ports.ValidateOptions{Now: time.Now()})
	if err != nil || !bytes.Equal(vk.Ref, kpb.Ref) {
		t.Fatalf("validate: %v", err)
	}
	if _, err := a.engine.ValidateKeyPackage(ctx, kpb.KeyPackage, ports.ValidateOptions{Now: time.Now().Add(48 * time.Hour)}); !errors.Is(err, ports.ErrInvalid) {
		t.Fatalf("expired package (JOIN-008): %v", err)
	}
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: [][]byte{kpb.KeyPackage}})
	if err != nil {
		t.Fatal(err)
	}
	if va, err = a.engine.MergePending(ctx, a.tx, gid); err != nil {
		t.Fatal(err)
	}
	staged, err := b.engine.StageWelcome(ctx, b.tx, out.Welcome, ports.KeyPackageRecord{Ref: kpb.Ref, KeyPackage: kpb.KeyPackage,
		InitPrivateKey: kpb.InitPrivateKey, EncryptionPrivateKey: kpb.EncryptionPrivateKey})
	if err != nil {
		t.Fatal(err)
	}
	if staged.HasPSKs || staged.Signer.InboxID != "inbox-a" {
		t.Fatalf("staged welcome: %+v", staged)
	}
	if _, err := b.engine.Group(ctx, b.tx, gid); !errors.Is(err, ports.ErrGroupNotFound) {
		t.Fatalf("staging installed the group: %v", err)
	}
	vb, err := b.engine.InstallWelcome(ctx, b.tx, staged.Handle)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "after the welcome", va, vb)

	ct, err := b.engine.Encrypt(ctx, b.tx, gid, []byte("hello"), []byte("aad"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.engine.Process(ctx, a.tx, gid, ct)
	if err != nil || p.Kind != ports.ProcessedApplication || string(p.Application) != "hello" || string(p.AuthenticatedData) != "aad" || p.Sender.InboxID != "inbox-b" {
		t.Fatalf("application: %+v %v", p, err)
	}
	if _, err := a.engine.Process(ctx, a.tx, gid, ct); !errors.Is(err, ports.ErrUndecryptable) {
		t.Fatalf("replayed application message: %v", err)
	}

	out, err = b.engine.Commit(ctx, b.tx, gid, ports.CommitOptions{ForcePath: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err = a.engine.Process(ctx, a.tx, gid, out.Commit)
	if err != nil || p.Kind != ports.ProcessedCommit || p.Staged == nil || p.Staged.Epoch != 2 {
		t.Fatalf("commit: %+v %v", p, err)
	}
	if va, err = a.engine.MergeStaged(ctx, a.tx, gid); err != nil {
		t.Fatal(err)
	}
	if vb, err = b.engine.MergePending(ctx, b.tx, gid); err != nil {
		t.Fatal(err)
	}
	same(t, "after b's commit", va, vb)
	xa, _ := a.engine.Export(ctx, a.tx, gid, "label", nil, 32)
	xb, _ := b.engine.Export(ctx, b.tx, gid, "label", nil, 32)
	if !bytes.Equal(xa, xb) {
		t.Fatal("exporters differ")
	}
	var we *ports.WrongEpochError
	if _, err := a.engine.Process(ctx, a.tx, gid, out.Commit); !errors.As(err, &we) || we.Relation != ports.EpochOlder {
		t.Fatalf("replayed commit: %v", err)
	}

	out, err = a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Remove: []uint32{vb.OwnLeaf}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.engine.ClearPending(ctx, a.tx, gid); err != nil {
		t.Fatal(err)
	}
	if _, err := a.engine.MergePending(ctx, a.tx, gid); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("merging a cleared commit: %v", err)
	}
	out, _ = a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Remove: []uint32{vb.OwnLeaf}})
	p, err = b.engine.Process(ctx, b.tx, gid, out.Commit)
	if err != nil || !p.RemovesSelf {
		t.Fatalf("removal: %+v %v", p, err)
	}
	if vb, err = b.engine.MergeStaged(ctx, b.tx, gid); err != nil || vb.Active {
		t.Fatalf("after removal: active=%v %v", vb.Active, err)
	}
	if _, err := b.engine.Encrypt(ctx, b.tx, gid, []byte("x"), nil); !errors.Is(err, ports.ErrInactive) {
		t.Fatalf("encrypt after removal: %v", err)
	}
}

var errorsIs = errors.Is
