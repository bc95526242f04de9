package join_test

import (
	"crypto/rand"
	"encoding/binary"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/welcome"
	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// patched returns a copy of an MLSMessage whose big-endian uint16 at off
// is v: offset 0 is the ProtocolVersion, offset 4 a Welcome's
// cipher_suite (RFC 9420 §6, §12.4.3.1).
func patched(msg []byte, off int, v uint16) []byte {
	out := append([]byte(nil), msg...)
	binary.BigEndian.PutUint16(out[off:], v)
	return out
}

// gceWelcome seals, from the RFC's pieces, a Welcome adding kp to a group
// whose context carries extension 0xff7b, which kp's leaf does not
// advertise. No honest committer builds one: it checks the joiner's
// capabilities first.
func (in *inst) gceWelcome(kp []byte) []byte {
	t := in.w.t
	t.Helper()
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	cred := mustMarshal(&contentspb.MlsCredential{InboxId: in.inbox()})
	now := in.w.clock.Now()
	leaf, err := in.eng.CreateKeyPackage(in.w.ctx, ports.KeyPackageOptions{Credential: cred, SignaturePrivateKey: in.id.InstallationKey.Seed(),
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var ka, kb message.KeyPackage
	if err := codec.Unmarshal(leaf.KeyPackage, &ka); err != nil {
		t.Fatal(err)
	}
	if err := codec.Unmarshal(kp, &kb); err != nil {
		t.Fatal(err)
	}
	tree := ratchettree.New(s, &ka.LeafNode)
	if _, err := tree.AddLeaf(&kb.LeafNode); err != nil {
		t.Fatal(err)
	}
	th, err := tree.TreeHash()
	if err != nil {
		t.Fatal(err)
	}
	cth, joiner := make([]byte, s.HashSize()), make([]byte, s.HashSize())
	rand.Read(cth)
	rand.Read(joiner)
	gc := message.GroupContext{Version: message.MLS10, CipherSuite: s.ID(), GroupID: make([]byte, 32), Epoch: 1,
		TreeHash: th, ConfirmedTranscriptHash: cth, Extensions: message.Extensions{{Type: 0xff7b, Data: []byte("x")}}}
	rand.Read(gc.GroupID)
	gcBytes, _ := codec.Marshal(&gc)
	epoch, err := keyschedule.FromJoiner(s, joiner, make([]byte, s.HashSize()), gcBytes)
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := codec.Marshal(tree.Export())
	gi := &message.GroupInfo{GroupContext: gc, Extensions: message.Extensions{{Type: message.ExtRatchetTree, Data: rt}},
		ConfirmationTag: keyschedule.ConfirmationTag(s, epoch.ConfirmationKey, cth), Signer: 0}
	if err := gi.Sign(s, in.id.InstallationKey.Seed()); err != nil {
		t.Fatal(err)
	}
	w, err := welcome.Seal(s, gi, joiner, epoch.WelcomeSecret, nil, []welcome.Recipient{{KeyPackage: &kb}})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := codec.Marshal(&framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireWelcome, Welcome: w})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// JOIN-087: every kind of unreadable Welcome the rule names is held 1 day
// from the first encounter, not rejected, and rejected at the first
// attempt after that day on which it is still unreadable.
func TestJOIN087_EveryUnsupportedCaseIsHeld(t *testing.T) {
	cases := []struct {
		name string
		send func(c *corpus) uint64
	}{
		{"protobuf WelcomeMessage.version variant", func(c *corpus) uint64 {
			j := c.joiner(instOptions{Transport: func(in *inst, tr ports.Transport) ports.Transport {
				return &rewriting{Transport: tr, topic: join.WelcomeTopic(in.key()), rewrite: func(e *backendpb.OriginatorEnvelope) {
					e.Envelope.GetWelcomeMessage().Version = nil // a variant this client does not know
				}}
			}})
			_, seq := c.a.newGroup(groupSpec{}).join(j, addSpec{})
			return seq
		}},
		{"wrapper algorithm", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			j.opts.Registry = classicalOnly(c.w.t) // X-Wing is gone: a lost plugin
			j.setup()
			_, seq := c.a.newGroup(groupSpec{}).join(j, addSpec{})
			return seq
		}},
		{"MLS version", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			ad := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			r := ad.recipients[0]
			return c.a.publish(c.a.inline(r, r.Wrapper, r.Wrapper, patched(ad.welcome, 0, 2), meta(ad.anchor)))[0]
		}},
		{"MLS ciphersuite", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			ad := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			r := ad.recipients[0]
			return c.a.publish(c.a.inline(r, r.Wrapper, r.Wrapper, patched(ad.welcome, 4, 0x0001), meta(ad.anchor)))[0]
		}},
		{"group-context extension the leaf does not advertise", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			v := c.a.validated(j)
			return c.a.publish(c.a.inline(recipientOf(v), v.WrapperAlgorithm, v.WrapperAlgorithm, c.a.gceWelcome(v.KeyPackage), meta(1)))[0]
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "sqlite")
			c := &corpus{w: w, a: w.newInst("adder", instOptions{})}
			seq := tc.send(c)
			c.j.process()
			h := c.j.heldOne(seq)
			if h.Reason[:8] != "JOIN-087" || h.Deadline != w.clock.Now().Add(24*time.Hour) {
				t.Fatalf("held for %q until %v, want JOIN-087 for 1 day", h.Reason, h.Deadline)
			}
			w.clock.Advance(23 * time.Hour)
			c.j.retry()
			c.j.want(seq, "held JOIN-087")
			w.clock.Advance(time.Hour)
			c.j.retry()
			c.j.want(seq, "rejected JOIN-087")
		})
	}
}

// JOIN-026: a payload of MLS version 1 that is not a Welcome, and one
// whose version is the reserved value 0, are rejected at once: no upgrade
// makes either readable.
func TestJOIN026_NonWelcomeOfKnownVersionRejectedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		patch func([]byte) []byte
	}{
		{"wire_format mls_public_message", func(b []byte) []byte { return patched(b, 2, 1) }},
		{"reserved version 0", func(b []byte) []byte { return patched(b, 0, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "sqlite")
			a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
			ad := a.newGroup(groupSpec{}).add(addSpec{}, j)
			r := ad.recipients[0]
			seq := a.publish(a.inline(r, r.Wrapper, r.Wrapper, tc.patch(ad.welcome), meta(ad.anchor)))[0]
			j.process()
			j.want(seq, "rejected JOIN-026")
		})
	}
}
