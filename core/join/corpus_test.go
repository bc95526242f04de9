package join_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// corpus is one world per case: an adder a and a joiner made on demand.
type corpus struct {
	w *world
	a *inst
	j *inst
	// reg is the joiner's registry when a case sets none.
	reg *algorithm.Registry
}

func (c *corpus) joiner(o instOptions) *inst {
	if c.j == nil {
		if o.Registry == nil {
			o.Registry = c.reg
		}
		c.j = c.w.newInst("joiner", o)
	}
	return c.j
}

// sendWith wraps welcome with the sender at cursor for the recipients.
func (c *corpus) sendWith(welcome []byte, cursor uint64, rs []join.Recipient) uint64 {
	envs, err := (&join.Sender{Algorithms: c.a.reg}).Envelopes(c.w.ctx, welcome, cursor, rs)
	if err != nil {
		c.w.t.Fatal(err)
	}
	seqs := c.a.publish(envs...)
	return seqs[len(seqs)-1]
}

// stripOwnLeaf is a test double of the engine that hides this
// installation's leaf from the staged tree (JOIN-058).
type stripOwnLeaf struct {
	*mls.Engine
	own []byte
}

func (s stripOwnLeaf) StageWelcome(ctx context.Context, tx ports.Tx, w []byte, kp ports.KeyPackageRecord) (ports.StagedWelcome, error) {
	st, err := s.Engine.StageWelcome(ctx, tx, w, kp)
	var ms []ports.Member
	for _, m := range st.Group.Members {
		if string(m.SignatureKey) != string(s.own) {
			ms = append(ms, m)
		}
	}
	st.Group.Members = ms
	return st, err
}

// The hostile Welcome corpus: every case is built with the real engine,
// wrappers and AEAD, goes through the delivery service, and must get
// exactly the outcome it names. Cases name the rule they check.
func TestHostileWelcomeCorpus(t *testing.T) {
	for _, db := range dbs {
		t.Run(db, func(t *testing.T) { runCorpus(t, db, nil) })
	}
}

// runCorpus runs every case with the joiner's algorithms from reg (nil:
// the built-in ones).
func runCorpus(t *testing.T, db string, reg *algorithm.Registry) {
	cases := []struct {
		name string
		want string
		run  func(c *corpus) uint64
	}{
		{"JOIN-076 an X-Wing Welcome relabelled CURVE25519", "rejected JOIN-076", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			ad := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			return c.a.publish(c.a.inline(ad.recipients[0], ports.WrapperXWingMLKEM768Draft6, ports.WrapperCurve25519, ad.welcome, meta(ad.anchor)))[0]
		}},
		{"JOIN-048 a corrupt wrapper ciphertext", "rejected JOIN-048", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			ad := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			env := c.a.inline(ad.recipients[0], ports.WrapperXWingMLKEM768Draft6, ports.WrapperXWingMLKEM768Draft6, ad.welcome, meta(ad.anchor))
			data := env.GetWelcomeMessage().GetV1().Data
			data[len(data)-1] ^= 1
			return c.a.publish(env)[0]
		}},
		{"JOIN-084 sealed to a key no key package of this installation advertises", "held JOIN-084", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			ad := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			r := ad.recipients[0]
			w, _ := c.a.reg.Wrapper(ports.WrapperXWingMLKEM768Draft6)
			r.WrapperPublicKey, _, _ = w.GenerateKey(c.w.ctx)
			return c.a.publish(c.a.inline(r, ports.WrapperXWingMLKEM768Draft6, ports.WrapperXWingMLKEM768Draft6, ad.welcome, meta(ad.anchor)))[0]
		}},
		{"JOIN-087 an unknown WelcomeMessage version variant", "held JOIN-087", func(c *corpus) uint64 {
			j := c.joiner(instOptions{Transport: func(in *inst, tr ports.Transport) ports.Transport {
				return &rewriting{Transport: tr, topic: join.WelcomeTopic(in.key()), rewrite: func(e *backendpb.OriginatorEnvelope) {
					e.Envelope.GetWelcomeMessage().Version = nil // a variant this client does not know
				}}
			}})
			_, seq := c.a.newGroup(groupSpec{}).join(j, addSpec{})
			return seq
		}},
		{"JOIN-033 a pointer chain", "rejected JOIN-033", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			ad := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			k1, k2 := newPointeeKeys(), newPointeeKeys()
			c.a.publish(c.a.pointee(k2, ports.WrapperSymmetricKey, ad.welcome, meta(ad.anchor)))
			chained := ad.recipients[0]
			chained.InstallationKey = k1.dest
			c.a.publish(c.a.pointerFor(chained, k2.pointer()))
			return c.a.publish(c.a.pointerFor(ad.recipients[0], k1.pointer()))[0]
		}},
		{"JOIN-032 a second pointee published after the first", "joined", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			first := c.a.newGroup(groupSpec{})
			ad1 := first.add(addSpec{}, j)
			ad2 := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			k := newPointeeKeys()
			c.a.publish(c.a.pointee(k, ports.WrapperSymmetricKey, ad1.welcome, meta(ad1.anchor)))
			c.a.publish(c.a.pointee(k, ports.WrapperSymmetricKey, ad2.welcome, meta(ad2.anchor)))
			seq := c.a.publish(c.a.pointerFor(ad1.recipients[0], k.pointer()))[0]
			c.j.process()
			if len(c.j.joined) != 1 || string(c.j.joined[0].GroupID) != string(first.id) {
				c.w.t.Fatalf("joined %+v, want the first pointee's group", c.j.joined)
			}
			return seq
		}},
		{"JOIN-056 a pointee for another destination", "rejected JOIN-056", func(c *corpus) uint64 {
			k := newPointeeKeys()
			j := c.joiner(instOptions{Transport: func(_ *inst, tr ports.Transport) ports.Transport {
				return &rewriting{Transport: tr, topic: join.WelcomeTopic(k.dest), rewrite: func(e *backendpb.OriginatorEnvelope) {
					e.Envelope.GetWelcomeMessage().GetV1().InstallationKey = make([]byte, 32)
				}}
			}})
			ad := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			c.a.publish(c.a.pointee(k, ports.WrapperSymmetricKey, ad.welcome, meta(ad.anchor)))
			return c.a.publish(c.a.pointerFor(ad.recipients[0], k.pointer()))[0]
		}},
		{"JOIN-056 a pointee not labelled SYMMETRIC_KEY", "rejected JOIN-056", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			ad := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			k := newPointeeKeys()
			c.a.publish(c.a.pointee(k, ports.WrapperCurve25519, ad.welcome, meta(ad.anchor)))
			return c.a.publish(c.a.pointerFor(ad.recipients[0], k.pointer()))[0]
		}},
		{"JOIN-064 a pointee that does not authenticate", "rejected JOIN-064", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			ad := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			k := newPointeeKeys()
			env := c.a.pointee(k, ports.WrapperSymmetricKey, ad.welcome, meta(ad.anchor))
			env.GetWelcomeMessage().GetV1().Data[3] ^= 1
			c.a.publish(env)
			return c.a.publish(c.a.pointerFor(ad.recipients[0], k.pointer()))[0]
		}},
		{"JOIN-094 a pointer that is not well formed", "rejected JOIN-094", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			ad := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			k := newPointeeKeys()
			k.metaNonce = k.dataNonce // JOIN-065 forbids it; nothing such a pointer names can open
			c.a.publish(c.a.pointee(k, ports.WrapperSymmetricKey, ad.welcome, meta(ad.anchor)))
			return c.a.publish(c.a.pointerFor(ad.recipients[0], k.pointer()))[0]
		}},
		{"JOIN-027 PSKs in GroupSecrets", "rejected JOIN-027", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			v := c.a.validated(j)
			w := c.a.pskWelcome(v.KeyPackage)
			return c.a.publish(c.a.inline(recipientOf(v), v.WrapperAlgorithm, v.WrapperAlgorithm, w, meta(1)))[0]
		}},
		{"JOIN-026 a commit MLSMessage in place of a Welcome", "rejected JOIN-026", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			g := c.a.newGroup(groupSpec{})
			ad := g.add(addSpec{}, j)
			envs, err := c.a.tr.Query(c.w.ctx, append([]byte{0}, g.id...), ad.anchor-1, 1)
			if err != nil || len(envs) != 1 {
				c.w.t.Fatal(err)
			}
			return c.sendWith(envs[0].GetEnvelope().GetGroupMessage(), ad.anchor, ad.recipients)
		}},
		{"JOIN-036 no WelcomeMetadata", "rejected JOIN-036", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			ad := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			return c.a.publish(c.a.inline(ad.recipients[0], ports.WrapperXWingMLKEM768Draft6, ports.WrapperXWingMLKEM768Draft6, ad.welcome))[0]
		}},
		{"JOIN-037 message_cursor not below the Welcome's sequence id", "rejected JOIN-037", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			ad := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			return c.sendWith(ad.welcome, 1<<40, ad.recipients)
		}},
		{"JOIN-038 message_cursor 0 for a group at epoch 1", "rejected JOIN-038", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			ad := c.a.newGroup(groupSpec{}).add(addSpec{}, j)
			return c.sendWith(ad.welcome, 0, ad.recipients)
		}},
		{"JOIN-049 GROUP_MEMBERSHIP without a leaf's inbox", "rejected JOIN-049", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{}).join(j, addSpec{edit: func(mem memberships, d metadata.Dictionary) metadata.Dictionary {
				delete(mem, c.a.inbox())
				return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(mem))
			}})
			return seq
		}},
		{"JOIN-050 an identity reference of 0", "rejected JOIN-050", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{}).join(j, addSpec{edit: func(mem memberships, d metadata.Dictionary) metadata.Dictionary {
				mem[c.a.inbox()].SequenceId = 0
				return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(mem))
			}})
			return seq
		}},
		{"JOIN-050 an identity reference not below the Welcome", "rejected JOIN-050", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{}).join(j, addSpec{edit: func(mem memberships, d metadata.Dictionary) metadata.Dictionary {
				mem[c.j.inbox()].SequenceId = 1 << 40
				return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(mem))
			}})
			return seq
		}},
		{"JOIN-059 an identity reference no update of the inbox has", "rejected JOIN-059", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{}).join(j, addSpec{edit: func(mem memberships, d metadata.Dictionary) metadata.Dictionary {
				mem[c.j.inbox()].SequenceId-- // below the inbox's first update, so the topic holds none there
				return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(mem))
			}})
			return seq
		}},
		{"JOIN-052 a leaf under a victim's inbox", "rejected JOIN-052", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			victim := c.w.newInst("victim", instOptions{NoKeyPackage: true})
			seed := make([]byte, 32)
			rand.Read(seed)
			now := c.w.clock.Now()
			forged, err := c.a.eng.CreateKeyPackage(c.w.ctx, ports.KeyPackageOptions{Credential: mustMarshal(&contentspb.MlsCredential{InboxId: victim.inbox()}),
				SignaturePrivateKey: seed, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
				CapabilityExtensions: keypackage.CapabilityExtensions(), CapabilityProposals: keypackage.CapabilityProposals()})
			if err != nil {
				c.w.t.Fatal(err)
			}
			vs := c.a.association(victim.inbox())
			_, seq := c.a.newGroup(groupSpec{}).join(j, addSpec{extra: [][]byte{forged.KeyPackage}, edit: func(mem memberships, d metadata.Dictionary) metadata.Dictionary {
				mem[victim.inbox()] = &contentspb.GroupMembershipEntry_V1{SequenceId: vs.SequenceID, FailedInstallations: [][]byte{victim.key()}}
				return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(mem))
			}})
			return seq
		}},
		{"JOIN-053 an installation left out and not listed as failed", "rejected JOIN-053", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			c.w.newInst("joiner's second installation", instOptions{Recovery: j.id.RecoveryKey, NoKeyPackage: true})
			_, seq := c.a.newGroup(groupSpec{}).join(j, addSpec{edit: func(mem memberships, d metadata.Dictionary) metadata.Dictionary {
				if len(mem[c.j.inbox()].FailedInstallations) != 1 {
					c.w.t.Fatalf("the sender did not record the second installation as failed")
				}
				mem[c.j.inbox()].FailedInstallations = nil
				return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(mem))
			}})
			return seq
		}},
		{"JOIN-053 an installation left out and listed as failed joins", "joined", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			c.w.newInst("joiner's second installation", instOptions{Recovery: j.id.RecoveryKey, NoKeyPackage: true})
			_, seq := c.a.newGroup(groupSpec{}).join(j, addSpec{})
			return seq
		}},
		{"JOIN-083 a group root that does not name the group", "rejected JOIN-083", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			other := make([]byte, 32)
			rand.Read(other)
			keys, _ := commitlog.DeriveKeys(other)
			_, seq := c.a.newGroup(groupSpec{gid: keys.GroupID}).join(j, addSpec{})
			return seq
		}},
		{"JOIN-058 the joiner absent from the ratchet tree", "rejected JOIN-058", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			j.opts.MLS = func(e *mls.Engine) ports.MLS { return stripOwnLeaf{Engine: e, own: j.key()} }
			j.setup()
			_, seq := c.a.newGroup(groupSpec{}).join(j, addSpec{edit: func(mem memberships, d metadata.Dictionary) metadata.Dictionary {
				// Listed as failed, the stripped installation passes JOIN-053.
				mem[c.j.inbox()].FailedInstallations = [][]byte{c.j.key()}
				return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(mem))
			}})
			return seq
		}},
		{"JOIN-057 a later minimum protocol version", "held JOIN-057", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{edit: func(d metadata.Dictionary) metadata.Dictionary {
				return d.Set(metadata.ComponentMinProtocol, []byte("1.7.0"))
			}}).join(j, addSpec{})
			return seq
		}},
		{"JOIN-060 a DM with a third inbox", "rejected JOIN-060", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			third := c.w.newInst("third", instOptions{})
			g := c.a.newGroup(groupSpec{ct: ports.ConversationDM, dmPeer: j.inbox()})
			ad := g.add(addSpec{}, j, third)
			seqs := g.send(ad)
			return seqs[0]
		}},
		{"JOIN-060 a group without a super admin list", "rejected JOIN-060", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{edit: func(d metadata.Dictionary) metadata.Dictionary {
				return d.Set(metadata.ComponentSuperAdminList, metadata.EncodeInboxList(nil))
			}}).join(j, addSpec{})
			return seq
		}},
		{"JOIN-089 a conversation type changed for a held group", "rejected JOIN-089", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			g := c.a.newGroup(groupSpec{ct: ports.ConversationDM, dmPeer: j.inbox()})
			_, first := g.join(j, addSpec{})
			j.process()
			j.want(first, "joined")
			b := c.w.newInst("second adder", instOptions{})
			_, seq := b.newGroup(groupSpec{root: g.root}).join(j, addSpec{})
			return seq
		}},
		{"JOIN-089 a dm id changed for a held DM", "rejected JOIN-089", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			g := c.a.newGroup(groupSpec{ct: ports.ConversationDM, dmPeer: j.inbox()})
			_, first := g.join(j, addSpec{})
			j.process()
			j.want(first, "joined")
			b := c.w.newInst("second adder", instOptions{})
			_, seq := b.newGroup(groupSpec{root: g.root, ct: ports.ConversationDM, dmPeer: j.inbox()}).join(j, addSpec{})
			return seq
		}},
		{"JOIN-042 JOIN-045 the same Welcome delivered twice", "rejected JOIN-042", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			g := c.a.newGroup(groupSpec{})
			ad, first := g.join(j, addSpec{})
			seq := g.send(ad)[0]
			j.process()
			j.want(first, "joined")
			if gr, _ := j.group(g.id); gr.Membership != 1 || gr.Cursor != ad.anchor {
				c.w.t.Fatalf("a second delivery changed the group: %+v", gr)
			}
			return seq
		}},
		{"JOIN-043 two Welcomes of one group out of order", "rejected JOIN-043", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			g := c.a.newGroup(groupSpec{})
			ad1 := g.add(addSpec{}, j)
			g.commit(ports.CommitOptions{Remove: []uint32{g.leafOf(j)}})
			ad2 := g.add(addSpec{}, j)
			second := g.send(ad2)[0]
			seq := g.send(ad1)[0]
			j.process()
			j.want(second, "joined")
			if gr, _ := j.group(g.id); gr.Cursor != ad2.anchor {
				c.w.t.Fatalf("cursor %d, want the later anchor %d", gr.Cursor, ad2.anchor)
			}
			return seq
		}},
	}
	// COMP-272: a plaintext a plugin returned that cannot be read may be
	// the plugin's fault: it is held on JOIN-087's clock, and rejected a
	// day later when it still cannot be read.
	plaintext := map[string]bool{
		"JOIN-064 a pointee that does not authenticate":      true,
		"JOIN-094 a pointer that is not well formed":         true,
		"JOIN-026 a commit MLSMessage in place of a Welcome": true,
	}
	hosted := false
	if reg != nil {
		w, _ := reg.Wrapper(ports.WrapperXWingMLKEM768Draft6)
		_, hosted = w.(ports.Hosted)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, db)
			c := &corpus{w: w, a: w.newInst("adder", instOptions{}), reg: reg}
			seq := tc.run(c)
			c.j.process()
			if hosted && plaintext[tc.name] {
				c.j.want(seq, "held JOIN-087")
				w.clock.Advance(25 * time.Hour)
				c.j.retry()
				c.j.want(seq, "rejected JOIN-087")
				return
			}
			c.j.want(seq, tc.want)
		})
	}
}
