package tsmls_test

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/interop/tsmls"
	"github.com/regroup-mls/regroup/ports"
)

// memBlobs is an in-memory ports.Blobs, the only part of a ports.Tx the
// engine touches.
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
	return bytes.Clone(v), nil
}

func (b *memBlobs) Put(_ context.Context, ns, k string, v []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[ns+"/"+k] = bytes.Clone(v)
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

type blobTx struct {
	ports.Tx
	blobs *memBlobs
}

func (t blobTx) Blobs() ports.Blobs { return t.blobs }

// portAgree checks a port view against ts-mls members at epoch.
func (sc *scenario) portAgree(step string, epoch uint64, v ports.GroupView, ts []*tsmls.Member) {
	sc.t.Helper()
	if v.Epoch != epoch {
		sc.t.Fatalf("%s: ports.MLS at epoch %d, want %d", step, v.Epoch, epoch)
	}
	for _, m := range ts {
		st, err := m.State(sc.ctx)
		if err != nil {
			sc.t.Fatal(err)
		}
		if st.Epoch != epoch || !bytes.Equal(st.EpochAuthenticator, v.EpochAuthenticator) {
			sc.t.Fatalf("%s: ts-mls epoch %d authenticator %x, ports.MLS epoch %d %x", step, st.Epoch, st.EpochAuthenticator, v.Epoch, v.EpochAuthenticator)
		}
		if len(st.Members) != len(v.Members) {
			sc.t.Fatalf("%s: ts-mls sees %d members, ports.MLS %d", step, len(st.Members), len(v.Members))
		}
	}
	sc.t.Logf("%s: epoch %d agrees through ports.MLS", step, epoch)
}

// TestInteropTSMLSThroughPort plays the interop flow with regroup's member
// behind ports.MLS (adapters/mls.Engine, state in the caller's
// transaction), the interface core uses: ts-mls adds it by Welcome
// (staged, then installed), it adds a ts-mls member with a path, both
// commit with a path, application messages with authenticated_data go both
// ways, it removes the ts-mls member it added, and ts-mls removes it; the
// epoch authenticators and member lists agree at every epoch. The port's
// commits are PublicMessages.
func TestInteropTSMLSThroughPort(t *testing.T) {
	d := startDriver(t)
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	sc := &scenario{t: t, ctx: ctx, public: true, wf: framing.WirePublicMessage}
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	sig, _, err := s.GenerateSignatureKey()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := mls.New(mls.Options{SignaturePrivateKey: sig, PastEpochs: 2})
	if err != nil {
		t.Fatal(err)
	}
	tx := blobTx{blobs: &memBlobs{m: map[string][]byte{}}}
	gid := []byte("tsmls-through-port")

	// 1. ts-mls creates the group and adds the port's member.
	alice, err := d.CreateGroup(ctx, gid, []byte("alice (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := eng.CreateKeyPackage(ctx, ports.KeyPackageOptions{Credential: []byte("rob (regroup port)"), SignaturePrivateKey: sig,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.ValidateKeyPackage(ctx, kp.KeyPackage, ports.ValidateOptions{Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	c, err := alice.Commit(ctx, [][]byte{asMLSMessage(t, kp.KeyPackage)}, nil, true)
	if err != nil {
		t.Fatalf("ts-mls adds the port's key package: %v", err)
	}
	staged, err := eng.StageWelcome(ctx, tx, c.Welcome, ports.KeyPackageRecord{Ref: kp.Ref, KeyPackage: kp.KeyPackage,
		InitPrivateKey: kp.InitPrivateKey, EncryptionPrivateKey: kp.EncryptionPrivateKey})
	if err != nil {
		t.Fatalf("port stages ts-mls's Welcome: %v", err)
	}
	v, err := eng.InstallWelcome(ctx, tx, staged.Handle)
	if err != nil {
		t.Fatal(err)
	}
	sc.portAgree("ts-mls added the port", 1, v, []*tsmls.Member{alice})

	// 2. The port adds a ts-mls member with a path.
	tkp, err := d.NewKeyPackage(ctx, []byte("tess (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := eng.Commit(ctx, tx, gid, ports.CommitOptions{Add: [][]byte{tkp.KP}, ForcePath: true})
	if err != nil {
		t.Fatalf("port commits the add of a ts-mls key package: %v", err)
	}
	sc.checkPath("port adds ts-mls", out.Commit)
	if _, err := alice.Process(ctx, out.Commit); err != nil {
		t.Fatal(err)
	}
	tess, err := d.Join(ctx, tkp, out.Welcome)
	if err != nil {
		t.Fatalf("ts-mls joins from the port's Welcome: %v", err)
	}
	if v, err = eng.MergePending(ctx, tx, gid); err != nil {
		t.Fatal(err)
	}
	everyone := []*tsmls.Member{alice, tess}
	sc.portAgree("port added ts-mls", 2, v, everyone)

	// 3. ts-mls commits with a path; the port stages and merges it.
	c, err = alice.Commit(ctx, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	p, err := eng.Process(ctx, tx, gid, c.Commit)
	if err != nil || p.Kind != ports.ProcessedCommit || p.Staged == nil || p.Staged.Epoch != 3 {
		t.Fatalf("port processes ts-mls's path commit: %+v %v", p, err)
	}
	if v, err = eng.MergeStaged(ctx, tx, gid); err != nil {
		t.Fatal(err)
	}
	if _, err := tess.Process(ctx, c.Commit); err != nil {
		t.Fatal(err)
	}
	sc.portAgree("ts-mls path commit", 3, v, everyone)

	// 4. The port commits with a path.
	out, err = eng.Commit(ctx, tx, gid, ports.CommitOptions{ForcePath: true})
	if err != nil {
		t.Fatal(err)
	}
	sc.checkPath("port path commit", out.Commit)
	for _, m := range everyone {
		if _, err := m.Process(ctx, out.Commit); err != nil {
			t.Fatalf("ts-mls processes the port's path commit: %v", err)
		}
	}
	if v, err = eng.MergePending(ctx, tx, gid); err != nil {
		t.Fatal(err)
	}
	sc.portAgree("port path commit", 4, v, everyone)

	// 5. Application messages both ways.
	ct, err := eng.Encrypt(ctx, tx, gid, []byte("from the port"), []byte("port aad"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range everyone {
		if r, err := m.Process(ctx, ct); err != nil || string(r.Plaintext) != "from the port" {
			t.Fatalf("ts-mls reads the port's message: %+v %v", r, err)
		}
	}
	ct, err = tess.Protect(ctx, []byte("from ts-mls"), []byte("ts aad"))
	if err != nil {
		t.Fatal(err)
	}
	p, err = eng.Process(ctx, tx, gid, ct)
	if err != nil || p.Kind != ports.ProcessedApplication || string(p.Application) != "from ts-mls" || string(p.AuthenticatedData) != "ts aad" {
		t.Fatalf("port reads ts-mls's message: %+v %v", p, err)
	}

	// 6. The port removes the ts-mls member it added.
	st, err := tess.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err = eng.Commit(ctx, tx, gid, ports.CommitOptions{Remove: []uint32{st.Leaf}})
	if err != nil {
		t.Fatal(err)
	}
	sc.checkPath("port removes ts-mls", out.Commit)
	if _, err := alice.Process(ctx, out.Commit); err != nil {
		t.Fatal(err)
	}
	if r, err := tess.Process(ctx, out.Commit); err != nil || r.Active != "removedFromGroup" {
		t.Fatalf("removed ts-mls member: %+v %v", r, err)
	}
	if v, err = eng.MergePending(ctx, tx, gid); err != nil {
		t.Fatal(err)
	}
	sc.portAgree("port removed ts-mls", 5, v, []*tsmls.Member{alice})

	// 7. ts-mls removes the port's member, which learns it.
	c, err = alice.Commit(ctx, nil, []uint32{v.OwnLeaf}, true)
	if err != nil {
		t.Fatal(err)
	}
	p, err = eng.Process(ctx, tx, gid, c.Commit)
	if err != nil || p.Kind != ports.ProcessedCommit || !p.RemovesSelf {
		t.Fatalf("port processes its removal: %+v %v", p, err)
	}
}

// asMLSMessage wraps a bare KeyPackage in an MLSMessage for ts-mls.
func asMLSMessage(t *testing.T, kp []byte) []byte {
	t.Helper()
	var k message.KeyPackage
	if m, err := framing.Decode(kp); err == nil && m.KeyPackage != nil {
		return kp
	}
	if err := codec.Unmarshal(kp, &k); err != nil {
		t.Fatal(err)
	}
	return encode(t, &framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireKeyPackage, KeyPackage: &k})
}
