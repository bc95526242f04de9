package join_test

import (
	"context"
	"crypto/rand"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// grp is a group an adder builds and commits to with its own engine.
type grp struct {
	a    *inst
	id   []byte
	root []byte
	ct   ports.ConversationType
	dict metadata.Dictionary
}

type groupSpec struct {
	ct      ports.ConversationType // zero: a group
	dmPeer  string
	oneshot *contentspb.OneshotMessage
	root    []byte // nil: random
	gid     []byte // nil: derived from the root (JOIN-083)
	edit    func(d metadata.Dictionary) metadata.Dictionary
}

type memberships = map[string]*contentspb.GroupMembershipEntry_V1

// newGroup creates a group as the client does: the group id derived from a
// fresh root, the immutable components, the creator's membership entry.
func (a *inst) newGroup(s groupSpec) *grp {
	t := a.w.t
	t.Helper()
	if s.ct == 0 {
		s.ct = ports.ConversationGroup
	}
	root := s.root
	if root == nil {
		root = make([]byte, 32)
		rand.Read(root)
	}
	keys, err := commitlog.DeriveKeys(root)
	if err != nil {
		t.Fatal(err)
	}
	gid := keys.GroupID
	if s.gid != nil {
		gid = s.gid
	}
	own := a.association(a.inbox())
	var failed [][]byte
	for _, k := range own.InstallationKeys {
		if string(k) != string(a.key()) {
			failed = append(failed, k)
		}
	}
	d := metadata.Dictionary{}.
		Set(metadata.ComponentConversationType, metadata.EncodeConversationType(s.ct)).
		Set(metadata.ComponentCreatorInbox, []byte(a.inbox())).
		Set(metadata.ComponentGroupRootKey, root).
		Set(metadata.ComponentMinProtocol, []byte("1.6.0")).
		Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(memberships{
			a.inbox(): {SequenceId: own.SequenceID, FailedInstallations: failed}}))
	switch s.ct {
	case ports.ConversationGroup:
		d = d.Set(metadata.ComponentSuperAdminList, metadata.EncodeInboxList([]string{a.inbox()})).
			Set(metadata.ComponentAdminList, metadata.EncodeInboxList(nil))
	case ports.ConversationDM:
		d = d.Set(metadata.ComponentDMMembers, metadata.EncodeDMMembers(a.inbox(), s.dmPeer))
	case ports.ConversationOneshot:
		if s.oneshot != nil {
			b, _ := proto.Marshal(s.oneshot)
			d = d.Set(metadata.ComponentOneshotMessage, b)
		}
	}
	if s.edit != nil {
		d = s.edit(d)
	}
	ext, err := d.Extension()
	if err != nil {
		t.Fatal(err)
	}
	cred, _ := proto.Marshal(&contentspb.MlsCredential{InboxId: a.inbox()})
	now := a.w.clock.Now()
	leaf, err := a.eng.CreateKeyPackage(a.w.ctx, ports.KeyPackageOptions{Credential: cred, SignaturePrivateKey: a.id.InstallationKey.Seed(),
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour),
		CapabilityExtensions: keypackage.CapabilityExtensions(), CapabilityProposals: keypackage.CapabilityProposals()})
	if err != nil {
		t.Fatal(err)
	}
	a.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := a.eng.CreateGroup(ctx, tx, gid, leaf, []ports.Extension{ext})
		return err
	})
	return &grp{a: a, id: gid, root: root, ct: s.ct, dict: d}
}

// addSpec shapes an adding commit.
type addSpec struct {
	// edit changes the membership and metadata the commit sets.
	edit func(mem memberships, d metadata.Dictionary) metadata.Dictionary
	// remove are leaves the same commit removes (a readd).
	remove []uint32
	// extra are key packages added beside the joiners' (no recipient).
	extra [][]byte
	// local merges the commit without publishing it: the group topic
	// never shows it (a second MLS group under a known group id).
	local bool
}

// added is a merged adding commit.
type added struct {
	welcome    []byte
	anchor     uint64
	epoch      uint64
	treeHash   []byte
	recipients []join.Recipient
}

// add commits the addition of joiners as a client does: their newest key
// packages, validated; their inboxes' identity sequence ids and left-out
// installations in GROUP_MEMBERSHIP (JOIN-012); published, then merged.
func (g *grp) add(s addSpec, joiners ...*inst) added {
	t, a := g.a.w.t, g.a
	t.Helper()
	mem, err := g.dict.Membership()
	if err != nil {
		t.Fatal(err)
	}
	view, _ := a.view(g.id)
	inTree := map[string]bool{}
	for _, m := range view.Members {
		inTree[string(m.SignatureKey)] = true
	}
	for _, l := range s.remove {
		for _, m := range view.Members {
			if m.LeafIndex == l {
				delete(inTree, string(m.SignatureKey))
			}
		}
	}
	var opts ports.CommitOptions
	var out added
	adding := map[string]bool{}
	for _, j := range joiners {
		adding[string(j.key())] = true
	}
	for _, j := range joiners {
		v := a.validated(j)
		opts.Add = append(opts.Add, v.KeyPackage)
		out.recipients = append(out.recipients, recipientOf(v))
		st := a.association(j.inbox())
		e := &contentspb.GroupMembershipEntry_V1{SequenceId: st.SequenceID}
		for _, k := range st.InstallationKeys {
			if !adding[string(k)] && !inTree[string(k)] {
				e.FailedInstallations = append(e.FailedInstallations, k)
			}
		}
		mem[j.inbox()] = e
	}
	opts.Add = append(opts.Add, s.extra...)
	d := g.dict.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(mem))
	if s.edit != nil {
		d = s.edit(mem, d)
	}
	ext, err := d.Extension()
	if err != nil {
		t.Fatal(err)
	}
	opts.Remove = s.remove
	opts.GroupContextExtensions = []ports.Extension{ext}
	var co ports.CommitOutput
	a.tx(func(ctx context.Context, tx ports.Tx) (err error) {
		co, err = a.eng.Commit(ctx, tx, g.id, opts)
		return err
	})
	if s.local {
		a.tx(func(ctx context.Context, tx ports.Tx) error {
			_, err := a.eng.MergePending(ctx, tx, g.id)
			return err
		})
	} else {
		out.anchor = g.publishCommit(co.Commit)
	}
	g.dict = d
	out.welcome, out.epoch, out.treeHash = co.Welcome, co.Staged.Epoch, co.Staged.TreeHash
	return out
}

// publishCommit publishes the adder's pending commit on the group topic
// and merges it, returning its sequence id.
func (g *grp) publishCommit(commit []byte) uint64 {
	a := g.a
	seqs := a.publish(&backendpb.ClientEnvelope{TargetTopic: append([]byte{0}, g.id...),
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: commit}})
	a.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := a.eng.MergePending(ctx, tx, g.id)
		return err
	})
	return seqs[0]
}

// commit builds, publishes and merges a commit; it returns its sequence id.
func (g *grp) commit(opts ports.CommitOptions) uint64 {
	var co ports.CommitOutput
	g.a.tx(func(ctx context.Context, tx ports.Tx) (err error) {
		co, err = g.a.eng.Commit(ctx, tx, g.id, opts)
		return err
	})
	return g.publishCommit(co.Commit)
}

// leafOf returns j's leaf in the adder's view.
func (g *grp) leafOf(j *inst) uint32 {
	v, _ := g.a.view(g.id)
	for _, m := range v.Members {
		if string(m.SignatureKey) == string(j.key()) {
			return m.LeafIndex
		}
	}
	g.a.w.t.Fatalf("%s has no leaf", j.name)
	return 0
}

// send wraps the Welcome with the sender and publishes it; it returns the
// sequence id of each envelope, in the order the sender returned them.
func (g *grp) send(ad added) []uint64 {
	g.a.w.t.Helper()
	envs, err := (&join.Sender{Algorithms: g.a.reg}).Envelopes(g.a.w.ctx, ad.welcome, ad.anchor, ad.recipients)
	if err != nil {
		g.a.w.t.Fatal(err)
	}
	return g.a.publish(envs...)
}

// join adds j alone with an inline Welcome and returns its sequence id.
func (g *grp) join(j *inst, s addSpec) (added, uint64) {
	g.a.w.t.Helper()
	ad := g.add(s, j)
	seqs := g.send(ad)
	return ad, seqs[len(seqs)-1]
}

// commitLocal builds and merges a commit without publishing it.
func (g *grp) commitLocal(opts ports.CommitOptions) {
	g.a.tx(func(ctx context.Context, tx ports.Tx) error {
		if _, err := g.a.eng.Commit(ctx, tx, g.id, opts); err != nil {
			return err
		}
		_, err := g.a.eng.MergePending(ctx, tx, g.id)
		return err
	})
}

// sendAt wraps the Welcome with the sender at cursor and publishes it;
// it returns the last envelope's sequence id.
func (g *grp) sendAt(ad added, cursor uint64) uint64 {
	ad.anchor = cursor
	seqs := g.send(ad)
	return seqs[len(seqs)-1]
}

// fill publishes n envelopes on fresh welcome topics, moving the shared
// sequence id counter (COMP-041) past values a test names.
func (in *inst) fill(n int) {
	for i := 0; i < n; i++ {
		id := make([]byte, 32)
		rand.Read(id)
		in.publish(welcomeEnv(id, &apipb.WelcomeMessage{Version: &apipb.WelcomeMessage_V1_{V1: &apipb.WelcomeMessage_V1{InstallationKey: id, Data: []byte{1}}}}))
	}
}

// publishMessage publishes an application message on the group topic.
func (g *grp) publishMessage(ct []byte) uint64 {
	return g.a.publish(&backendpb.ClientEnvelope{TargetTopic: append([]byte{0}, g.id...),
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: ct}})[0]
}
