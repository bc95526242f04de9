package tsmls_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/keypackage"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/interop/tsmls"
)

// startDriver installs and starts driver.mjs. Without node the test skips,
// except under CI=true where it fails.
func startDriver(t *testing.T) *tsmls.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	err := tsmls.Install(ctx, tsmls.Dir())
	var d *tsmls.Driver
	if err == nil {
		d, err = tsmls.Start(tsmls.Dir(), os.Stderr)
	}
	if errors.Is(err, tsmls.ErrNoNode) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("ts-mls interop needs Node 20 under CI: %v", err)
		}
		t.Skipf("ts-mls interop skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// rgMember is a regroup member: its keys and, once in a group, its state.
type rgMember struct {
	s       *ciphersuite.Suite
	name    string
	sigPriv []byte
	kp      *keypackage.Bundle
	g       *group.Group
}

func newRGMember(t *testing.T, s *ciphersuite.Suite, name string) *rgMember {
	t.Helper()
	sigPriv, _, err := s.GenerateSignatureKey()
	if err != nil {
		t.Fatal(err)
	}
	now := uint64(time.Now().Unix())
	kp, err := keypackage.New(s, &keypackage.Options{
		Credential:    message.Credential{Type: message.CredentialBasic, Identity: []byte(name)},
		SignaturePriv: sigPriv,
		Lifetime:      message.Lifetime{NotBefore: now - 3600, NotAfter: now + 30*24*3600},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &rgMember{s: s, name: name, sigPriv: sigPriv, kp: kp}
}

// mlsMessage returns the member's key package as an MLSMessage.
func (m *rgMember) mlsKeyPackage(t *testing.T) []byte {
	t.Helper()
	return encode(t, &framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireKeyPackage, KeyPackage: m.kp.KeyPackage})
}

func (m *rgMember) join(t *testing.T, welcome []byte) {
	t.Helper()
	w := decode(t, welcome)
	if w.Welcome == nil {
		t.Fatalf("%s: wire format %d is not a Welcome", m.name, w.WireFormat)
	}
	g, err := group.Join(m.s, w.Welcome, &group.JoinOptions{KeyPackage: m.kp.KeyPackage, InitPriv: m.kp.InitPriv,
		EncryptionPriv: m.kp.EncryptionPriv, SignaturePriv: m.sigPriv})
	if err != nil {
		t.Fatalf("%s joins from a ts-mls Welcome: %v", m.name, err)
	}
	m.g = g
}

// commit creates a commit, merges it and returns it and its Welcome as MLSMessages.
func (m *rgMember) commit(t *testing.T, opts *group.CommitOptions) (commit, welcome []byte) {
	t.Helper()
	p, err := m.g.Commit(opts)
	if err != nil {
		t.Fatalf("%s commits: %v", m.name, err)
	}
	commit = encode(t, p.Message)
	if p.Welcome != nil {
		welcome = encode(t, &framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireWelcome, Welcome: p.Welcome})
	}
	if err := m.g.MergePending(p); err != nil {
		t.Fatalf("%s merges its commit: %v", m.name, err)
	}
	return commit, welcome
}

func (m *rgMember) handle(t *testing.T, step string, msg []byte) {
	t.Helper()
	if err := m.g.HandleCommit(decode(t, msg)); err != nil {
		t.Fatalf("%s: %s processes the ts-mls commit: %v", step, m.name, err)
	}
}

func encode(t *testing.T, m *framing.MLSMessage) []byte {
	t.Helper()
	b, err := codec.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t *testing.T, b []byte) *framing.MLSMessage {
	t.Helper()
	m, err := framing.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// scenario is one run of the interop flow.
type scenario struct {
	t   *testing.T
	ctx context.Context
	// public selects PublicMessage commits, otherwise PrivateMessage.
	public bool
	wf     framing.WireFormat
}

// agree checks that every member is at epoch and that all epoch
// authenticators are equal.
func (sc *scenario) agree(step string, epoch uint64, rg []*rgMember, ts []*tsmls.Member) {
	sc.t.Helper()
	var want []byte
	for _, m := range rg {
		if m.g.Epoch() != epoch {
			sc.t.Fatalf("%s: regroup %s at epoch %d, want %d", step, m.name, m.g.Epoch(), epoch)
		}
		if want == nil {
			want = m.g.EpochAuthenticator()
		} else if !bytes.Equal(want, m.g.EpochAuthenticator()) {
			sc.t.Fatalf("%s: regroup members disagree on the epoch authenticator", step)
		}
	}
	for _, m := range ts {
		st, err := m.State(sc.ctx)
		if err != nil {
			sc.t.Fatal(err)
		}
		if st.Epoch != epoch {
			sc.t.Fatalf("%s: ts-mls member %s at epoch %d, want %d", step, m.Handle, st.Epoch, epoch)
		}
		if !bytes.Equal(want, st.EpochAuthenticator) {
			sc.t.Fatalf("%s: epoch %d authenticators differ: regroup %x, ts-mls %x", step, epoch, want, st.EpochAuthenticator)
		}
	}
	sc.t.Logf("%s: epoch %d, %d regroup and %d ts-mls members agree on %x", step, epoch, len(rg), len(ts), want)
}

// checkPath verifies that a commit carries an UpdatePath and has the run's
// wire format (the path is visible only in a PublicMessage).
func (sc *scenario) checkPath(step string, commit []byte) {
	sc.t.Helper()
	m := decode(sc.t, commit)
	if m.WireFormat != sc.wf {
		sc.t.Fatalf("%s: commit wire format %d, want %d", step, m.WireFormat, sc.wf)
	}
	if m.Public != nil && (m.Public.Content.Commit == nil || m.Public.Content.Commit.Path == nil) {
		sc.t.Fatalf("%s: commit carries no UpdatePath", step)
	}
}

// messages sends one application message, with authenticated_data, from
// every member to every other.
func (sc *scenario) messages(step string, rg []*rgMember, ts []*tsmls.Member) {
	sc.t.Helper()
	for i, from := range rg {
		text := fmt.Sprintf("%s: from regroup %s", step, from.name)
		msg, err := from.g.ProtectWithAuthenticatedData([]byte(text), []byte("aad "+text))
		if err != nil {
			sc.t.Fatal(err)
		}
		enc := encode(sc.t, msg)
		for j, to := range rg {
			if i == j {
				continue
			}
			if got, _, err := to.g.Unprotect(decode(sc.t, enc)); err != nil || string(got) != text {
				sc.t.Fatalf("%s: regroup %s reads %q: %v", step, to.name, got, err)
			}
		}
		for _, to := range ts {
			p, err := to.Process(sc.ctx, enc)
			if err != nil || p.Kind != "application" || string(p.Plaintext) != text {
				sc.t.Fatalf("%s: ts-mls %s reads the regroup message: %+v %v", step, to.Handle, p, err)
			}
		}
	}
	for i, from := range ts {
		text := fmt.Sprintf("%s: from ts-mls %s", step, from.Handle)
		enc, err := from.Protect(sc.ctx, []byte(text), []byte("aad "+text))
		if err != nil {
			sc.t.Fatal(err)
		}
		for _, to := range rg {
			r, err := to.g.Process(decode(sc.t, enc))
			if err != nil || string(r.Application) != text || string(r.AuthenticatedData) != "aad "+text {
				sc.t.Fatalf("%s: regroup %s reads the ts-mls message: %+v %v", step, to.name, r, err)
			}
			sender := r.Sender.LeafIndex
			st, err := from.State(sc.ctx)
			if err != nil {
				sc.t.Fatal(err)
			}
			if uint32(sender) != st.Leaf {
				sc.t.Fatalf("%s: sender leaf %d, ts-mls says %d", step, sender, st.Leaf)
			}
		}
		for j, to := range ts {
			if i == j {
				continue
			}
			if p, err := to.Process(sc.ctx, enc); err != nil || string(p.Plaintext) != text {
				sc.t.Fatalf("%s: ts-mls reads ts-mls: %+v %v", step, p, err)
			}
		}
	}
}

// TestInteropTSMLS plays a group with members of regroup and of ts-mls
// 1.6.4 on cipher suite 3 (MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519),
// once with every commit a PublicMessage and once a PrivateMessage: ts-mls
// creates the group and adds a regroup member, regroup adds a ts-mls
// member, both commit with an UpdatePath, regroup removes the ts-mls member
// it added, ts-mls removes the regroup member, application messages go both
// ways with authenticated_data, an altered ts-mls commit is rejected, and
// the epoch authenticators and an exported secret agree at every epoch.
func TestInteropTSMLS(t *testing.T) {
	d := startDriver(t)
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	for _, public := range []bool{true, false} {
		name := map[bool]string{true: "PublicMessage", false: "PrivateMessage"}[public]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
			defer cancel()
			sc := &scenario{t: t, ctx: ctx, public: public, wf: framing.WirePrivateMessage}
			if public {
				sc.wf = framing.WirePublicMessage
			}
			sc.run(d, s, []byte("tsmls-interop-"+name))
		})
	}
}

func (sc *scenario) run(d *tsmls.Driver, s *ciphersuite.Suite, groupID []byte) {
	t, ctx := sc.t, sc.ctx
	// 1. ts-mls creates the group.
	alice, err := d.CreateGroup(ctx, groupID, []byte("alice (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	// 2. ts-mls adds a regroup member, which joins from the Welcome.
	rob := newRGMember(t, s, "rob (regroup)")
	c, err := alice.Commit(ctx, [][]byte{rob.mlsKeyPackage(t)}, nil, sc.public)
	if err != nil {
		t.Fatalf("ts-mls adds regroup: %v", err)
	}
	if len(c.Welcome) == 0 {
		t.Fatal("ts-mls add commit has no Welcome")
	}
	rob.join(t, c.Welcome)
	sc.agree("ts-mls added regroup", 1, []*rgMember{rob}, []*tsmls.Member{alice})
	sc.exporter("ts-mls added regroup", rob, alice)

	// 3. regroup adds a ts-mls member, with a path; ts-mls processes the
	// commit and the newcomer joins from regroup's Welcome.
	tkp, err := d.NewKeyPackage(ctx, []byte("tess (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, tkp.KP)
	if m.KeyPackage == nil {
		t.Fatal("ts-mls key package is not a KeyPackage message")
	}
	commit, welcome := rob.commit(t, &group.CommitOptions{WireFormat: sc.wf, Path: true, TreeInWelcome: true,
		Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *m.KeyPackage}}}})
	sc.checkPath("regroup adds ts-mls", commit)
	if p, err := alice.Process(ctx, commit); err != nil || p.Kind != "handshake" {
		t.Fatalf("ts-mls processes regroup's add commit: %+v %v", p, err)
	}
	tess, err := d.Join(ctx, tkp, welcome)
	if err != nil {
		t.Fatalf("ts-mls joins from regroup's Welcome: %v", err)
	}
	everyone := []*tsmls.Member{alice, tess}
	sc.agree("regroup added ts-mls", 2, []*rgMember{rob}, everyone)
	sc.messages("epoch 2", []*rgMember{rob}, everyone)

	// 4. ts-mls commits with a path (an empty commit needs one).
	c, err = alice.Commit(ctx, nil, nil, sc.public)
	if err != nil {
		t.Fatal(err)
	}
	sc.checkPath("ts-mls path commit", c.Commit)
	// A ts-mls commit altered in its last byte (signature, membership tag or
	// AEAD tag) is rejected and leaves regroup's epoch as it was.
	bad := bytes.Clone(c.Commit)
	bad[len(bad)-1] ^= 1
	if err := rob.g.HandleCommit(decode(t, bad)); !errors.Is(err, group.ErrInvalid) && !errors.Is(err, group.ErrUndecryptable) {
		t.Fatalf("altered ts-mls commit: %v, want ErrInvalid or ErrUndecryptable", err)
	}
	if rob.g.Epoch() != 2 {
		t.Fatalf("altered commit moved regroup to epoch %d", rob.g.Epoch())
	}
	rob.handle(t, "ts-mls path commit", c.Commit)
	if _, err := tess.Process(ctx, c.Commit); err != nil {
		t.Fatal(err)
	}
	sc.agree("ts-mls path commit", 3, []*rgMember{rob}, everyone)
	sc.exporter("ts-mls path commit", rob, tess)

	// 5. regroup commits with a path.
	commit, _ = rob.commit(t, &group.CommitOptions{WireFormat: sc.wf, Path: true})
	sc.checkPath("regroup path commit", commit)
	for _, m := range everyone {
		if _, err := m.Process(ctx, commit); err != nil {
			t.Fatalf("ts-mls processes regroup's path commit: %v", err)
		}
	}
	sc.agree("regroup path commit", 4, []*rgMember{rob}, everyone)
	sc.messages("epoch 4", []*rgMember{rob}, everyone)

	// 6. regroup removes the ts-mls member it added.
	st, err := tess.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commit, _ = rob.commit(t, &group.CommitOptions{WireFormat: sc.wf,
		Proposals: []*message.Proposal{{Type: message.ProposalRemove, Remove: &message.Remove{Removed: st.Leaf}}}})
	sc.checkPath("regroup removes ts-mls", commit)
	if _, err := alice.Process(ctx, commit); err != nil {
		t.Fatalf("ts-mls processes the removal: %v", err)
	}
	if p, err := tess.Process(ctx, commit); err != nil || p.Active != "removedFromGroup" {
		t.Fatalf("removed ts-mls member: %+v %v", p, err)
	}
	sc.agree("regroup removed ts-mls", 5, []*rgMember{rob}, []*tsmls.Member{alice})
	ast, err := alice.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ast.Members[st.Leaf]; ok || len(ast.Members) != 2 || rob.g.Tree().Leaf(rob.g.Leaf()) == nil {
		t.Fatalf("members after the removal: %v", ast.Members)
	}
	sc.messages("epoch 5", []*rgMember{rob}, []*tsmls.Member{alice})

	// 7. ts-mls removes the regroup member, which learns it is out.
	c, err = alice.Commit(ctx, nil, []uint32{uint32(rob.g.Leaf())}, sc.public)
	if err != nil {
		t.Fatal(err)
	}
	sc.checkPath("ts-mls removes regroup", c.Commit)
	if err := rob.g.HandleCommit(decode(t, c.Commit)); !errors.Is(err, group.ErrRemoved) {
		t.Fatalf("regroup processes its removal by ts-mls: %v, want ErrRemoved", err)
	}
	if ast, err = alice.State(ctx); err != nil || ast.Epoch != 6 || len(ast.Members) != 1 {
		t.Fatalf("ts-mls after removing regroup: %+v %v", ast, err)
	}
}

// exporter checks that the MLS exporter agrees between implementations.
func (sc *scenario) exporter(step string, rg *rgMember, ts *tsmls.Member) {
	sc.t.Helper()
	ctxt := []byte("regroup interop")
	want, err := rg.g.Export("regroup-interop", ctxt, 32)
	if err != nil {
		sc.t.Fatal(err)
	}
	got, err := ts.Export(sc.ctx, "regroup-interop", ctxt, 32)
	if err != nil {
		sc.t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		sc.t.Fatalf("%s: exporter regroup %x, ts-mls %x", step, want, got)
	}
}
