package group_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// client is one test member's keys and key package.
type client struct {
	name                     string
	kp                       *message.KeyPackage
	sigPriv, encPriv, initPr []byte
}

func newClient(t testing.TB, s *ciphersuite.Suite, name string) *client {
	t.Helper()
	sigPriv, sigPub, err := s.GenerateSignatureKey()
	if err != nil {
		t.Fatal(err)
	}
	encPriv, encPub, _ := s.GenerateHPKEKey()
	initPriv, initPub, _ := s.GenerateHPKEKey()
	kp := &message.KeyPackage{
		Version: message.MLS10, CipherSuite: s.ID(), InitKey: initPub, Extensions: message.Extensions{},
		LeafNode: message.LeafNode{
			EncryptionKey: encPub, SignatureKey: sigPub,
			Credential: message.Credential{Type: message.CredentialBasic, Identity: []byte(name)},
			Capabilities: message.Capabilities{
				Versions: []message.ProtocolVersion{message.MLS10}, CipherSuites: []ciphersuite.ID{s.ID()},
				Extensions: []message.ExtensionType{}, Proposals: []message.ProposalType{},
				Credentials: []message.CredentialType{message.CredentialBasic},
			},
			Source: message.SourceKeyPackage, Lifetime: message.Lifetime{NotBefore: 0, NotAfter: 1 << 62},
			Extensions: message.Extensions{},
		},
	}
	if err := kp.LeafNode.Sign(s, sigPriv, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := kp.Sign(s, sigPriv); err != nil {
		t.Fatal(err)
	}
	return &client{name: name, kp: kp, sigPriv: sigPriv, encPriv: encPriv, initPr: initPriv}
}

func welcomeMessage(w *message.Welcome) *framing.MLSMessage {
	return &framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireWelcome, Welcome: w}
}

func (c *client) join(t testing.TB, s *ciphersuite.Suite, w *message.Welcome) *group.Group {
	t.Helper()
	m := wire(t, welcomeMessage(w)) // over the wire
	g, err := group.Join(s, m.Welcome, &group.JoinOptions{KeyPackage: c.kp, InitPriv: c.initPr, EncryptionPriv: c.encPriv, SignaturePriv: c.sigPriv})
	if err != nil {
		t.Fatalf("%s joins: %v", c.name, err)
	}
	return g
}

func wire(t testing.TB, m *framing.MLSMessage) *framing.MLSMessage {
	t.Helper()
	b, err := codec.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out, err := framing.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func agree(t *testing.T, step string, gs ...*group.Group) {
	t.Helper()
	for _, g := range gs[1:] {
		if g.Epoch() != gs[0].Epoch() || !bytes.Equal(g.EpochAuthenticator(), gs[0].EpochAuthenticator()) {
			t.Fatalf("%s: members disagree on epoch %d / %d", step, gs[0].Epoch(), g.Epoch())
		}
	}
}

// TestLifecycle drives three members through creation, adds with and
// without a path, a proposal by reference, a removal and application
// messages, in PublicMessage and PrivateMessage commits, checking that the
// epoch authenticators agree at every epoch (§12.4).
func TestLifecycle(t *testing.T) {
	for _, tc := range []struct {
		wf      framing.WireFormat
		restart bool
	}{{framing.WirePublicMessage, false}, {framing.WirePrivateMessage, false}, {framing.WirePrivateMessage, true}} {
		wf := tc.wf
		t.Run(fmt.Sprintf("wire-format-%d/restart-%v", wf, tc.restart), func(t *testing.T) {
			// rs simulates a process restart: the state goes through Marshal and Load.
			rs := func(gs ...**group.Group) {
				if !tc.restart {
					return
				}
				for _, g := range gs {
					b, err := (*g).Marshal()
					if err != nil {
						t.Fatal(err)
					}
					if *g, err = group.Load(b, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
			a, b, c := newClient(t, s, "alice"), newClient(t, s, "bob"), newClient(t, s, "carol")
			leaf := a.kp.LeafNode
			ga, err := group.Create(s, &group.CreateOptions{GroupID: []byte("group-1"), Leaf: &leaf, EncryptionPriv: a.encPriv, SignaturePriv: a.sigPriv})
			if err != nil {
				t.Fatal(err)
			}
			// Alice adds Bob without a path; the tree travels in the Welcome.
			p, err := ga.Commit(&group.CommitOptions{WireFormat: wf, TreeInWelcome: true,
				Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *b.kp}}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := ga.MergePending(p); err != nil {
				t.Fatal(err)
			}
			gb := b.join(t, s, p.Welcome)
			rs(&ga, &gb)
			agree(t, "bob joined", ga, gb)

			// Bob proposes adding Carol; Alice commits it by reference with a path.
			prop, err := gb.Propose(&message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *c.kp}}, wf)
			if err != nil {
				t.Fatal(err)
			}
			if err := ga.HandleProposal(wire(t, prop)); err != nil {
				t.Fatal(err)
			}
			p, err = ga.Commit(&group.CommitOptions{WireFormat: wf, Path: true, TreeInWelcome: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := gb.HandleCommit(wire(t, p.Message)); err != nil {
				t.Fatalf("bob processes the add of carol: %v", err)
			}
			if err := ga.MergePending(p); err != nil {
				t.Fatal(err)
			}
			gc := c.join(t, s, p.Welcome)
			rs(&ga, &gb, &gc)
			agree(t, "carol joined", ga, gb, gc)

			// Carol commits an empty commit (path required) and everyone follows.
			p, err = gc.Commit(&group.CommitOptions{WireFormat: wf})
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range []*group.Group{ga, gb} {
				if err := g.HandleCommit(wire(t, p.Message)); err != nil {
					t.Fatalf("empty commit: %v", err)
				}
			}
			if err := gc.MergePending(p); err != nil {
				t.Fatal(err)
			}
			rs(&ga, &gb, &gc)
			agree(t, "carol's update", ga, gb, gc)

			// Bob proposes an update of his leaf; Carol commits it by reference.
			up, err := gb.ProposeUpdate(wf)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range []*group.Group{ga, gc} {
				if err := g.HandleProposal(wire(t, up)); err != nil {
					t.Fatalf("update proposal: %v", err)
				}
			}
			rs(&gb)
			p, err = gc.Commit(&group.CommitOptions{WireFormat: wf})
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range []*group.Group{ga, gb} {
				if err := g.HandleCommit(wire(t, p.Message)); err != nil {
					t.Fatalf("commit of bob's update: %v", err)
				}
			}
			if err := gc.MergePending(p); err != nil {
				t.Fatal(err)
			}
			agree(t, "bob's update", ga, gb, gc)

			// Application messages.
			for i, sender := range []*group.Group{ga, gb, gc} {
				msg, err := sender.Protect([]byte(fmt.Sprintf("hello %d", i)))
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range []*group.Group{ga, gb, gc} {
					if r == sender {
						continue
					}
					data, from, err := r.Unprotect(wire(t, msg))
					if err != nil || string(data) != fmt.Sprintf("hello %d", i) || from != sender.Leaf() {
						t.Fatalf("application message %d: %q from %d: %v", i, data, from, err)
					}
				}
			}

			rs(&ga, &gb, &gc)
			// Carol removes Bob; Bob learns he is out.
			p, err = gc.Commit(&group.CommitOptions{WireFormat: wf,
				Proposals: []*message.Proposal{{Type: message.ProposalRemove, Remove: &message.Remove{Removed: uint32(gb.Leaf())}}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := ga.HandleCommit(wire(t, p.Message)); err != nil {
				t.Fatalf("alice processes the removal: %v", err)
			}
			if err := gb.HandleCommit(wire(t, p.Message)); !errors.Is(err, group.ErrRemoved) {
				t.Fatalf("bob processes his removal: %v", err)
			}
			rs(&gb)
			if gb.Active() || gb.Epoch() != ga.Epoch() {
				t.Fatalf("bob after his removal: active=%v epoch %d", gb.Active(), gb.Epoch())
			}
			if err := gc.MergePending(p); err != nil {
				t.Fatal(err)
			}
			agree(t, "bob removed", ga, gc)
			if ga.Tree().Leaf(treemath.LeafIndex(1)) != nil {
				t.Fatal("bob's leaf is still in the tree")
			}
			// A replayed commit is for an old epoch.
			if err := ga.HandleCommit(wire(t, p.Message)); !errors.Is(err, group.ErrWrongEpoch) {
				t.Fatalf("replayed commit: %v", err)
			}
		})
	}
}
