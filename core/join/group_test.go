package join_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// JOIN-025: the adder is the leaf at GroupInfo.signer: here a member who
// is not the group's creator, and not whoever published the envelope.
func TestJOIN025_AdderIsTheGroupInfoSigner(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, b, j := w.newInst("creator", instOptions{}), w.newInst("member", instOptions{}), w.newInst("joiner", instOptions{})
	g := a.newGroup(groupSpec{})
	_, seq := g.join(b, addSpec{})
	b.process()
	b.want(seq, "joined")
	b.catchUp(w.ctx, g.id)
	gb := &grp{a: b, id: g.id, root: g.root, ct: g.ct, dict: g.dict}
	ad := gb.add(addSpec{}, j)
	// The creator publishes the Welcome b built: the wrapper is anyone's.
	envs, err := (&join.Sender{Algorithms: a.reg}).Envelopes(w.ctx, ad.welcome, ad.anchor, ad.recipients)
	if err != nil {
		t.Fatal(err)
	}
	seq = a.publish(envs...)[0]
	j.process()
	j.want(seq, "joined")
	if got := j.joined[0].Adder; !bytes.Equal(got.SignatureKey, b.key()) || got.InboxID != b.inbox() || got.LeafIndex != 1 {
		t.Fatalf("adder %s (leaf %d), want the member who committed the add", got.InboxID, got.LeafIndex)
	}
}

// JOIN-051: the joiner holds no identity state of the adder's inbox; it
// fetches it at the referenced sequence id before deciding.
func TestJOIN051_ResolvesIdentityItDoesNotHold(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	if st, err := j.res.Newest(w.ctx, a.inbox()); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("the joiner already holds the adder's identity: %+v %v", st, err)
	}
	_, seq := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	j.want(seq, "joined")
}

// batchCounter is the joiner's resolver, counting how it is asked.
type batchCounter struct {
	*identity.Resolver
	singles, batches int
	requested        []ports.IdentityRequest
}

func (c *batchCounter) AssociationState(ctx context.Context, inbox string, seq uint64) (ports.AssociationState, error) {
	c.singles++
	return c.Resolver.AssociationState(ctx, inbox, seq)
}

func (c *batchCounter) AssociationStates(ctx context.Context, reqs []ports.IdentityRequest) ([]ports.IdentityResult, error) {
	c.batches++
	c.requested = append(c.requested, reqs...)
	return c.Resolver.AssociationStates(ctx, reqs)
}

// JOIN-051: with an identity that resolves many states at once
// (ports.BatchIdentity), the membership check resolves every inbox of
// GROUP_MEMBERSHIP, at its entry's sequence id, in one call.
func TestJOIN051_MembershipResolvedInOneBatch(t *testing.T) {
	w := newWorld(t, "sqlite")
	bc := &batchCounter{}
	a := w.newInst("adder", instOptions{})
	j := w.newInst("joiner", instOptions{Identity: func(id ports.Identity) ports.Identity {
		bc.Resolver = id.(*identity.Resolver)
		return bc
	}})
	g := a.newGroup(groupSpec{})
	_, seq := g.join(j, addSpec{})
	j.process()
	j.want(seq, "joined")
	members, err := g.dict.Membership()
	if err != nil {
		t.Fatal(err)
	}
	if bc.batches != 1 || bc.singles != 0 || len(bc.requested) != 2 {
		t.Fatalf("%d batches of %d requests and %d single calls, want one batch of the 2 inboxes", bc.batches, len(bc.requested), bc.singles)
	}
	for _, q := range bc.requested {
		if e, ok := members[q.InboxID]; ok && q.InboxID != j.inbox() && e.GetSequenceId() != q.SequenceID {
			t.Fatalf("requested %s at %d, GROUP_MEMBERSHIP says %d", q.InboxID, q.SequenceID, e.GetSequenceId())
		}
	}
}

// lyingInstall is a test double of the engine whose staged view differs
// from what it installs: a membership re-derived between validation and
// install (JOIN-054).
type lyingInstall struct{ *mls.Engine }

func (l lyingInstall) StageWelcome(ctx context.Context, tx ports.Tx, w []byte, kp ports.KeyPackageRecord) (ports.StagedWelcome, error) {
	st, err := l.Engine.StageWelcome(ctx, tx, w, kp)
	if len(st.Group.TreeHash) > 0 {
		st.Group.TreeHash = append([]byte(nil), st.Group.TreeHash...)
		st.Group.TreeHash[0] ^= 1
	}
	return st, err
}

// JOIN-054: what installs must be what was validated; otherwise nothing
// installs and the Welcome is rejected.
func TestJOIN054_InstallsWhatWasValidated(t *testing.T) {
	w := newWorld(t, "sqlite")
	a := w.newInst("adder", instOptions{})
	j := w.newInst("joiner", instOptions{MLS: func(e *mls.Engine) ports.MLS { return lyingInstall{e} }})
	g := a.newGroup(groupSpec{})
	_, seq := g.join(j, addSpec{})
	j.process()
	j.want(seq, "rejected JOIN-054")
	if _, ok := j.group(g.id); ok {
		t.Fatal("a group record was kept")
	}
	if _, ok := j.view(g.id); ok {
		t.Fatal("engine state was kept")
	}
}

// JOIN-057: a group that needs a later client is held without deadline,
// stays eligible for as long as it takes, and joins after an upgrade.
func TestJOIN057_HeldUntilUpgrade(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	g := a.newGroup(groupSpec{edit: laterVersion})
	_, seq := g.join(j, addSpec{})
	j.process()
	if h := j.heldOne(seq); !h.Deadline.IsZero() {
		t.Fatalf("held with a deadline %v", h.Deadline)
	}
	w.clock.Advance(90 * 24 * 3600e9)
	j.retry()
	j.want(seq, "held JOIN-057")
	j.opts.Version = metadata.Version{Major: 1, Minor: 7}
	j.reopen()
	j.retry()
	j.want(seq, "joined")
	if gr, _ := j.group(g.id); gr.MinProtocolVersion != "1.7.0" {
		t.Fatalf("minimum protocol version %q recorded", gr.MinProtocolVersion)
	}
}

// JOIN-060: each conversation kind must have the properties COMP-166
// lists; the kinds with more privilege are not exempt.
func TestJOIN060_ConversationKinds(t *testing.T) {
	cases := []struct {
		name string
		want string
		run  func(c *corpus) uint64
	}{
		{"a DM between the joiner and the adder joins", "joined", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{ct: ports.ConversationDM, dmPeer: j.inbox()}).join(j, addSpec{})
			return seq
		}},
		{"a DM whose members do not include the joiner", "rejected JOIN-060", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{ct: ports.ConversationDM, dmPeer: c.a.inbox()}).join(j, addSpec{})
			return seq
		}},
		{"a DM with an admin list", "rejected JOIN-060", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{ct: ports.ConversationDM, dmPeer: j.inbox(), edit: func(d metadata.Dictionary) metadata.Dictionary {
				return d.Set(metadata.ComponentSuperAdminList, metadata.EncodeInboxList([]string{c.a.inbox()}))
			}}).join(j, addSpec{})
			return seq
		}},
		{"a sync group of the own inbox joins", "joined", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			own := c.w.newInst("own other installation", instOptions{Recovery: j.id.RecoveryKey})
			_, seq := own.newGroup(groupSpec{ct: ports.ConversationSync}).join(j, addSpec{})
			return seq
		}},
		{"a sync group from another inbox", "rejected JOIN-060", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{ct: ports.ConversationSync}).join(j, addSpec{})
			return seq
		}},
		{"a group claiming ONESHOT_MESSAGE", "rejected JOIN-060", func(c *corpus) uint64 {
			j := c.joiner(instOptions{})
			_, seq := c.a.newGroup(groupSpec{edit: func(d metadata.Dictionary) metadata.Dictionary {
				return d.Set(metadata.ComponentOneshotMessage, mustMarshal(readdRequest()))
			}}).join(j, addSpec{})
			return seq
		}},
		{"a one-shot group without its message", "rejected JOIN-060", func(c *corpus) uint64 {
			j := c.joiner(instOptions{OnOneshot: func(context.Context, join.Oneshot) error { return nil }})
			_, seq := c.a.newGroup(groupSpec{ct: ports.ConversationOneshot, oneshot: nil}).join(j, addSpec{})
			return seq
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "sqlite")
			c := &corpus{w: w, a: w.newInst("adder", instOptions{})}
			seq := tc.run(c)
			c.j.process()
			c.j.want(seq, tc.want)
		})
	}
}

func readdRequest() *contentspb.OneshotMessage {
	return &contentspb.OneshotMessage{MessageType: &contentspb.OneshotMessage_ReaddRequest{ReaddRequest: &contentspb.ReaddRequest{
		GroupId: []byte("forked group"), LatestCommitSequenceId: 42}}}
}

// JOIN-066: the joiner reads its group's topic from the anchor, so no
// message sent before it was added is processed, let alone reported as
// one it failed to decrypt.
func TestJOIN066_PreAnchorMessagesAreNotFailures(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	g := a.newGroup(groupSpec{})
	var ct []byte
	a.tx(func(ctx context.Context, tx ports.Tx) (err error) {
		ct, err = a.eng.Encrypt(ctx, tx, g.id, []byte("before the joiner"), []byte{1})
		return err
	})
	pre := g.publishMessage(ct)
	ad, seq := g.join(j, addSpec{})
	if pre >= ad.anchor {
		t.Fatalf("the message %d is not before the anchor %d", pre, ad.anchor)
	}
	j.process()
	j.want(seq, "joined")
	g.commit(ports.CommitOptions{ForcePath: true})
	j.catchUp(w.ctx, g.id)
	if j.failures != 0 {
		t.Fatalf("%d messages processed as failures", j.failures)
	}
	if gr, _ := j.group(g.id); gr.JoinAnchor != ad.anchor {
		t.Fatalf("join anchor %d, want %d", gr.JoinAnchor, ad.anchor)
	}
}

// JOIN-095: a Welcome whose adder is an installation of the own inbox
// that the newest held identity state no longer associates is rejected,
// though the membership it names predates the revocation.
func TestJOIN095_RevokedOwnAdder(t *testing.T) {
	for _, revoked := range []bool{false, true} {
		t.Run(fmt.Sprintf("revoked=%v", revoked), func(t *testing.T) {
			w := newWorld(t, "sqlite")
			own := w.newInst("own installation", instOptions{})
			j := w.newInst("joiner", instOptions{Recovery: own.id.RecoveryKey})
			g := own.newGroup(groupSpec{})
			ad := g.add(addSpec{}, j)
			if revoked {
				if _, err := identity.Revoke(w.ctx, identity.Options{Store: own.store, Transport: own.tr, Clock: w.clock}, own.id.RecoveryKey, own.key()); err != nil {
					t.Fatal(err)
				}
			}
			j.association(j.inbox()) // the joiner holds its inbox's newest state
			seq := g.sendAt(ad, ad.anchor)
			j.process()
			if revoked {
				j.want(seq, "rejected JOIN-095")
			} else {
				j.want(seq, "joined")
			}
		})
	}
}

// JOIN-045: a Welcome delivered again (here: the topic read again from the
// start after the cursor was lost) is recognised as applied: no second
// join, no rejection, the state unchanged.
func TestJOIN045_RedeliveryAppliesOnce(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	g := a.newGroup(groupSpec{})
	ad, seq := g.join(j, addSpec{})
	j.process()
	j.want(seq, "joined")
	g.commit(ports.CommitOptions{ForcePath: true})
	j.catchUp(w.ctx, g.id)
	before, _ := j.group(g.id)
	j.tx(func(ctx context.Context, tx ports.Tx) error { return tx.Blobs().Delete(ctx, "regroup/join", "cursor") })
	j.reopen()
	j.joined = nil
	j.process()
	after, _ := j.group(g.id)
	if len(j.joined) != 0 || after.Membership != before.Membership || after.Cursor != before.Cursor || after.Cursor == ad.anchor {
		t.Fatalf("redelivery applied again: %+v, joined %d", after, len(j.joined))
	}
	if rej, _ := j.rcv.Rejected(w.ctx); len(rej) != 0 {
		t.Fatalf("redelivery recorded as a rejection: %+v", rej)
	}
}

// FORK-052, JOIN-036: a one-shot Welcome carries no anchor, is validated
// like any other, is handed to the one-shot hook with its message and
// adder, and is never installed or listed; a hook failure that is not a
// rejection keeps it for a retry.
func TestOneshotHandedToHook(t *testing.T) {
	w := newWorld(t, "sqlite")
	var got []join.Oneshot
	fail := true
	a := w.newInst("requester", instOptions{})
	j := w.newInst("readder", instOptions{OnOneshot: func(_ context.Context, o join.Oneshot) error {
		if fail {
			fail = false
			return errors.New("recovery store busy")
		}
		got = append(got, o)
		return nil
	}})
	g := a.newGroup(groupSpec{ct: ports.ConversationOneshot, oneshot: readdRequest()})
	ad := g.add(addSpec{}, j)
	seq := a.publish(a.inline(ad.recipients[0], ports.WrapperXWingMLKEM768Draft6, ports.WrapperXWingMLKEM768Draft6, ad.welcome))[0]
	_ = j.rcv.Process(w.ctx)
	j.want(seq, "held JOIN-085")
	j.retry()
	if len(got) != 1 || got[0].WelcomeSequenceID != seq || !bytes.Equal(got[0].Adder.SignatureKey, a.key()) ||
		got[0].Message.GetReaddRequest().GetLatestCommitSequenceId() != 42 || !bytes.Equal(got[0].GroupID, g.id) {
		t.Fatalf("one-shot hook got %+v", got)
	}
	if held, _ := j.rcv.Held(w.ctx); len(held) != 0 {
		t.Fatalf("still held: %+v", held)
	}
	if _, ok := j.group(g.id); ok {
		t.Fatal("a one-shot group was installed as a conversation")
	}
	if _, ok := j.view(g.id); ok {
		t.Fatal("a one-shot group left engine state")
	}
}

// FORK-052: a hook error wrapping ErrRejected rejects the Welcome.
func TestOneshotHookRejects(t *testing.T) {
	w := newWorld(t, "sqlite")
	a := w.newInst("requester", instOptions{})
	j := w.newInst("readder", instOptions{OnOneshot: func(context.Context, join.Oneshot) error {
		return &join.Rejection{Rule: "FORK-053", Err: errors.New("not a permitted readder")}
	}})
	g := a.newGroup(groupSpec{ct: ports.ConversationOneshot, oneshot: readdRequest()})
	_, seq := g.join(j, addSpec{})
	j.process()
	j.want(seq, "rejected FORK-053")
}
