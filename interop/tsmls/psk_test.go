package tsmls_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/interop/tsmls"
)

// TestInteropTSMLSExternalPSK mixes external PSKs into the key schedule
// across implementations on suite 3, with PublicMessage and PrivateMessage
// commits: ts-mls adds a regroup member in a commit that also injects a
// PSK (so the Welcome's GroupSecrets name it), regroup commits another PSK
// with a path and then a resumption PSK of an earlier epoch, ts-mls
// commits one regroup does not hold (regroup answers
// ErrUnknownPSK and stays at its epoch), and epoch authenticators agree.
func TestInteropTSMLSExternalPSK(t *testing.T) {
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
			sc.runPSK(d, s, []byte("tsmls-psk-"+name))
		})
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func (sc *scenario) runPSK(d *tsmls.Driver, s *ciphersuite.Suite, groupID []byte) {
	t, ctx := sc.t, sc.ctx
	p1, p2, p3 := randomBytes(t, 16), randomBytes(t, 16), randomBytes(t, 16)
	psks := group.MapPSKStore{}
	for _, id := range [][]byte{p1, p2, p3} {
		secret := randomBytes(t, 32)
		if err := d.StorePSK(ctx, id, secret); err != nil {
			t.Fatal(err)
		}
		if string(id) != string(p3) {
			psks[string(id)] = secret
		}
	}
	alice, err := d.CreateGroup(ctx, groupID, []byte("alice (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	// 1. ts-mls adds regroup with a PSK in the same commit.
	rob := newRGMember(t, s, "rob (regroup)")
	c, err := alice.CommitWith(ctx, &tsmls.CommitOptions{Add: [][]byte{rob.mlsKeyPackage(t)}, PSKs: [][]byte{p1}, Public: sc.public})
	if err != nil {
		t.Fatalf("ts-mls commits an add with a PSK: %v", err)
	}
	w := decode(t, c.Welcome)
	g, err := group.Join(s, w.Welcome, &group.JoinOptions{KeyPackage: rob.kp.KeyPackage, InitPriv: rob.kp.InitPriv,
		EncryptionPriv: rob.kp.EncryptionPriv, SignaturePriv: rob.sigPriv, PSKs: psks})
	if err != nil {
		t.Fatalf("regroup joins from a ts-mls Welcome naming a PSK: %v", err)
	}
	rob.g = g
	sc.agree("ts-mls added regroup with a PSK", 1, []*rgMember{rob}, []*tsmls.Member{alice})

	// 2. regroup commits another PSK, with a path.
	commit, _ := rob.commit(t, &group.CommitOptions{WireFormat: sc.wf, Path: true, Proposals: []*message.Proposal{{
		Type: message.ProposalPreSharedKey, PreSharedKey: &message.PreSharedKey{PSK: message.PreSharedKeyID{
			Type: message.PSKExternal, ID: p2, Nonce: randomBytes(t, s.HashSize())}}}}})
	sc.checkPath("regroup commits a PSK", commit)
	if _, err := alice.Process(ctx, commit); err != nil {
		t.Fatalf("ts-mls processes regroup's PSK commit: %v", err)
	}
	sc.agree("regroup committed a PSK", 2, []*rgMember{rob}, []*tsmls.Member{alice})

	// 3. ts-mls commits two PSKs at once.
	c, err = alice.CommitWith(ctx, &tsmls.CommitOptions{PSKs: [][]byte{p1, p2}, Public: sc.public})
	if err != nil {
		t.Fatal(err)
	}
	rob.handle(t, "ts-mls commits two PSKs", c.Commit)
	sc.agree("ts-mls committed two PSKs", 3, []*rgMember{rob}, []*tsmls.Member{alice})
	sc.messages("epoch 3", []*rgMember{rob}, []*tsmls.Member{alice})

	// 4. regroup commits the resumption PSK of epoch 2.
	commit, _ = rob.commit(t, &group.CommitOptions{WireFormat: sc.wf, Proposals: []*message.Proposal{{
		Type: message.ProposalPreSharedKey, PreSharedKey: &message.PreSharedKey{PSK: message.PreSharedKeyID{
			Type: message.PSKResumption, Usage: message.UsageApplication, GroupID: groupID, Epoch: 2,
			Nonce: randomBytes(t, s.HashSize())}}}}})
	if _, err := alice.Process(ctx, commit); err != nil {
		t.Fatalf("ts-mls processes regroup's resumption PSK commit: %v", err)
	}
	sc.agree("regroup committed a resumption PSK", 4, []*rgMember{rob}, []*tsmls.Member{alice})

	// 5. A PSK regroup does not hold: the commit fails with ErrUnknownPSK.
	c, err = alice.CommitWith(ctx, &tsmls.CommitOptions{PSKs: [][]byte{p3}, Public: sc.public})
	if err != nil {
		t.Fatal(err)
	}
	if err := rob.g.HandleCommit(decode(t, c.Commit)); !errors.Is(err, group.ErrUnknownPSK) {
		t.Fatalf("commit of an unknown PSK: %v, want ErrUnknownPSK", err)
	}
	if rob.g.Epoch() != 4 {
		t.Fatalf("regroup moved to epoch %d on a commit it could not process", rob.g.Epoch())
	}
}
