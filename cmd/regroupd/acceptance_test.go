package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"testing"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// acceptModes are the databases commit acceptance is proven on.
var acceptModes = []string{"sqlite", "postgres"}

// acceptance is a world on a regroupd process with -accept-commits, and
// a view of that process's database.
type acceptance struct {
	*world.World
	t     *testing.T
	store *deliverydb.Store
	keys  map[*world.Member]ed25519.PrivateKey
}

func newAcceptance(t *testing.T, mode string) *acceptance {
	return newAcceptanceFor(t, mode, 4*time.Minute)
}

// newAcceptanceFor is newAcceptance with d for everything the test does.
func newAcceptanceFor(t *testing.T, mode string, d time.Duration) *acceptance {
	t.Helper()
	return newAcceptanceWith(t, mode, d)
}

// newAcceptanceWith is newAcceptanceFor with more regroupd flags.
func newAcceptanceWith(t *testing.T, mode string, d time.Duration, flags ...string) *acceptance {
	t.Helper()
	if mode == "postgres" && os.Getenv("REGROUP_POSTGRES_DSN") == "" {
		t.Skip("REGROUP_POSTGRES_DSN unset: set it to prove commit acceptance on PostgreSQL")
	}
	r := testenv.StartRegroupdWith(t, mode, append([]string{"-accept-commits"}, flags...)...)
	a := &acceptance{World: world.NewOn(t, mode, r, d), t: t, keys: map[*world.Member]ed25519.PrivateKey{}}
	var err error
	if mode == "postgres" {
		a.store, err = deliverydb.OpenPostgres(a.Ctx, r.Flag("database"), &deliverydb.Options{Schema: r.Flag("postgres-schema"), MaxOpenConns: 2})
	} else {
		a.store, err = deliverydb.OpenSQLite(a.Ctx, r.Flag("database"), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.store.Close() })
	return a
}

// member makes a member and keeps its installation key, the MLS
// signature key forged commits are signed with; cfg.RecoveryKey makes it
// an installation of that recovery key's inbox.
func (a *acceptance) member(name string, cfg world.Config) *world.Member {
	var key ed25519.PrivateKey
	cfg.Installation = func(ctx context.Context, store ports.Store, clk ports.Clock) (identity.Installation, error) {
		in, err := regroup.ProvideInstallation(ctx, store, clk, regroup.IdentityConfig{RecoveryKey: cfg.RecoveryKey})
		key = in.InstallationKey
		return in, err
	}
	m := a.Member(name, cfg)
	a.keys[m] = key
	return m
}

func topicOf(kind ports.TopicKind, id []byte) []byte { return append([]byte{byte(kind)}, id...) }

// groupInfo returns the member's signed GroupInfo of the group's current
// epoch, with its tree.
func groupInfo(t testing.TB, m *world.Member, id []byte) []byte {
	t.Helper()
	var gi []byte
	m.Tx(func(tx ports.Tx) (err error) {
		gi, err = m.Engine.GroupInfo(m.W.Ctx, tx, id)
		return err
	})
	return gi
}

// register publishes the member's GroupInfo on the group's GroupInfo
// topic: the group's registration (COMP-372).
func (a *acceptance) register(m *world.Member, id []byte) {
	a.t.Helper()
	if err := a.publishInfo(m, id, groupInfo(a.t, m, id)); err != nil {
		a.t.Fatalf("registration: %v", err)
	}
}

func (a *acceptance) publishInfo(m *world.Member, id, gi []byte) error {
	_, err := m.Transport.Publish(a.Ctx, []*backendpb.ClientEnvelope{{TargetTopic: topicOf(ports.TopicGroupInfo, id),
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: gi}}})
	return err
}

// follows fails unless the service's public state of the group has the
// epoch and group context (tree hash, confirmed transcript hash,
// extensions) of every member's state.
func (a *acceptance) follows(id []byte, ms ...*world.Member) {
	a.t.Helper()
	st, err := a.store.PublicState(a.Ctx, id)
	if err != nil {
		a.t.Fatalf("service state: %v", err)
	}
	pg := mls.NewPublicGroups(&mls.PublicOptions{CacheBytes: -1})
	var viewer ports.PublicStateViewer = pg
	v, err := viewer.View(a.Ctx, st.State)
	if err != nil {
		a.t.Fatalf("service state does not load: %v", err)
	}
	if v.Epoch != st.Epoch {
		a.t.Fatalf("service state of epoch %d stored as epoch %d", v.Epoch, st.Epoch)
	}
	for _, m := range ms {
		gi := groupInfo(a.t, m, id)
		msg, err := framing.Decode(gi)
		if err != nil {
			a.t.Fatal(err)
		}
		gc := &msg.GroupInfo.GroupContext
		if v.Epoch != gc.Epoch || !bytes.Equal(v.GroupID, gc.GroupID) || !bytes.Equal(v.TreeHash, gc.TreeHash) ||
			len(v.Extensions) != len(gc.Extensions) {
			a.t.Fatalf("service at epoch %d, %s at %d: group contexts differ", v.Epoch, m.Name, gc.Epoch)
		}
		// The whole group context (the confirmed transcript hash and the
		// extensions' bytes among it) and the ratchet tree: the
		// validator's own comparison of a member's GroupInfo with the
		// state.
		if err := pg.CheckGroupInfo(a.Ctx, st.State, gi); err != nil {
			a.t.Fatalf("service at epoch %d, %s's GroupInfo of epoch %d: %v", v.Epoch, m.Name, gc.Epoch, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// highest is the group topic's highest sequence id.
func (a *acceptance) highest(kind ports.TopicKind, id []byte) uint64 {
	a.t.Helper()
	n, err := a.store.Highest(a.Ctx, topicOf(kind, id))
	if err != nil {
		a.t.Fatal(err)
	}
	return n
}

// newGroup creates a group of the members, registers it and lets every
// member join it.
func (a *acceptance) newGroup(creator *world.Member, others ...*world.Member) []byte {
	a.t.Helper()
	var inboxes []string
	for _, m := range others {
		inboxes = append(inboxes, m.C.InboxID())
	}
	g, err := creator.C.CreateGroup(a.Ctx, client.GroupOptions{Name: "g", Members: inboxes})
	if err != nil {
		a.t.Fatal(err)
	}
	a.register(creator, g.ID())
	all := append([]*world.Member{creator}, others...)
	world.SyncAll(all...)
	for _, m := range all {
		if err := m.Conv(g.ID()).SetConsent(a.Ctx, ports.ConsentAllowed); err != nil {
			a.t.Fatal(err)
		}
	}
	return g.ID()
}

// pendingCommit builds an honest commit with an UpdatePath on the
// member's engine and clears it there: the bytes a forger starts from,
// with the group context of the epoch it is for.
func pendingCommit(t *testing.T, m *world.Member, id []byte) (*framing.MLSMessage, []byte) {
	t.Helper()
	msg, err := framing.Decode(groupInfo(t, m, id))
	if err != nil {
		t.Fatal(err)
	}
	gc, _ := codec.Marshal(&msg.GroupInfo.GroupContext)
	var commit []byte
	m.Tx(func(tx ports.Tx) error {
		out, err := m.Engine.Commit(m.W.Ctx, tx, id, ports.CommitOptions{ForcePath: true})
		if err != nil {
			return err
		}
		commit = out.Commit
		return m.Engine.ClearPending(m.W.Ctx, tx, id)
	})
	c, err := framing.Decode(commit)
	if err != nil {
		t.Fatal(err)
	}
	return c, gc
}

func suite(t *testing.T) *ciphersuite.Suite {
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// resign signs the commit's content again with key over gc.
func resign(t *testing.T, c *framing.MLSMessage, key ed25519.PrivateKey, gc []byte) {
	t.Helper()
	ac, err := framing.Sign(suite(t), framing.WirePublicMessage, &c.Public.Content, key.Seed(), gc)
	if err != nil {
		t.Fatal(err)
	}
	c.Public.Auth.Signature = ac.Auth.Signature
}

func encode(t *testing.T, c *framing.MLSMessage) []byte {
	b, err := codec.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// COMP-371: each forged commit a member publishes to regroupd over gRPC
// is refused with its reason class and stored nowhere, and the group
// goes on: after each, an honest member's commit is accepted and the
// service's state equals every member's.
func TestCOMP371_ForgedCommitsRefusedOverGRPC(t *testing.T) {
	for _, mode := range acceptModes {
		t.Run(mode, func(t *testing.T) { testForgedCommits(t, mode) })
	}
}

func testForgedCommits(t *testing.T, mode string) {
	a := newAcceptance(t, mode)
	alice, bob, carol := a.member("alice", world.Config{}), a.member("bob", world.Config{}), a.member("carol", world.Config{})
	all := []*world.Member{alice, bob, carol}
	id := a.newGroup(alice, bob, carol)
	a.follows(id, all...)
	forgeries := []struct {
		name   string
		reason string
		forge  func(c *framing.MLSMessage, gc []byte)
	}{
		{"bad signature", ports.RefusedSignature, func(c *framing.MLSMessage, gc []byte) { c.Public.Auth.Signature[3] ^= 0x10 }},
		{"non-member sender", ports.RefusedSender, func(c *framing.MLSMessage, gc []byte) {
			c.Public.Content.Sender.LeafIndex = 40
			resign(t, c, a.keys[bob], gc)
		}},
		{"invalid leaf node", ports.RefusedLeafNode, func(c *framing.MLSMessage, gc []byte) {
			ln := &c.Public.Content.Commit.Path.LeafNode
			ln.Capabilities.Extensions = append(ln.Capabilities.Extensions, 0xfa0f) // its signature no longer covers it
			resign(t, c, a.keys[bob], gc)
		}},
		{"wrong parent hash", ports.RefusedParentHash, func(c *framing.MLSMessage, gc []byte) {
			ln := &c.Public.Content.Commit.Path.LeafNode
			ln.ParentHash = bytes.Clone(ln.ParentHash)
			ln.ParentHash[0] ^= 0x01
			if err := ln.Sign(suite(t), a.keys[bob].Seed(), id, c.Public.Content.Sender.LeafIndex); err != nil {
				t.Fatal(err)
			}
			resign(t, c, a.keys[bob], gc)
		}},
	}
	for _, f := range forgeries {
		c, gc := pendingCommit(t, bob, id)
		f.forge(c, gc)
		before := a.highest(ports.TopicGroupMessages, id)
		_, err := bob.Transport.Publish(a.Ctx, []*backendpb.ClientEnvelope{{TargetTopic: topicOf(ports.TopicGroupMessages, id),
			Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: encode(t, c)}}})
		if !errors.Is(err, ports.ErrInvalidArgument) || !bytes.Contains([]byte(err.Error()), []byte("("+f.reason+")")) {
			t.Fatalf("%s: publish = %v, want a refusal (%s)", f.name, err, f.reason)
		}
		if got := a.highest(ports.TopicGroupMessages, id); got != before {
			t.Fatalf("%s: the refused commit was stored (highest %d → %d)", f.name, before, got)
		}
		// The group goes on.
		if err := carol.Conv(id).UpdateKeys(a.Ctx); err != nil {
			t.Fatalf("%s: the next honest commit: %v", f.name, err)
		}
		world.SyncAll(all...)
		world.Agree(t, id, all...)
		a.follows(id, all...)
	}

	// Wrong epoch: two members commit at one epoch; the second is refused
	// with ErrEpochConflict and stored nowhere.
	second, _ := pendingCommit(t, bob, id)
	pub := func(m *world.Member, c *framing.MLSMessage) error {
		_, err := m.Transport.Publish(a.Ctx, []*backendpb.ClientEnvelope{{TargetTopic: topicOf(ports.TopicGroupMessages, id),
			Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: encode(t, c)}}})
		return err
	}
	if err := carol.Conv(id).UpdateKeys(a.Ctx); err != nil {
		t.Fatal(err)
	}
	before := a.highest(ports.TopicGroupMessages, id)
	if err := pub(bob, second); !errors.Is(err, ports.ErrEpochConflict) || errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("a second commit of one epoch: %v, want ErrEpochConflict", err)
	}
	if got := a.highest(ports.TopicGroupMessages, id); got != before {
		t.Fatalf("the losing commit was stored")
	}
	// bob's engine cleared its commit; everyone goes on.
	world.SyncAll(all...)
	if err := bob.Conv(id).UpdateKeys(a.Ctx); err != nil {
		t.Fatalf("after the lost epoch: %v", err)
	}
	world.SyncAll(all...)
	world.Agree(t, id, all...)
	a.follows(id, all...)

	// Wrong tree hash: a registration whose GroupInfo's tree hash is not
	// its tree's is refused and stored nowhere. dave's client publishes
	// no GroupInfo, so her group is not registered.
	dave := a.member("dave", world.Config{Options: &client.Options{MaxGroupInfoBytes: 1}})
	other := a.newGroupUnregistered(dave)
	msg, err := framing.Decode(groupInfo(t, dave, other))
	if err != nil {
		t.Fatal(err)
	}
	gi := msg.GroupInfo
	gi.GroupContext.TreeHash = bytes.Clone(gi.GroupContext.TreeHash)
	gi.GroupContext.TreeHash[0] ^= 0x01
	if err := gi.Sign(suite(t), a.keys[dave].Seed()); err != nil {
		t.Fatal(err)
	}
	if err := a.publishInfo(dave, other, encode(t, msg)); !errors.Is(err, ports.ErrInvalidArgument) ||
		!bytes.Contains([]byte(err.Error()), []byte("("+ports.RefusedTreeHash+")")) {
		t.Fatalf("a GroupInfo with a wrong tree hash: %v, want a refusal (%s)", err, ports.RefusedTreeHash)
	}
	if n := a.highest(ports.TopicGroupInfo, other); n != 0 {
		t.Fatalf("the refused GroupInfo was stored")
	}
	if _, err := a.store.PublicState(a.Ctx, other); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("a refused registration left a state: %v", err)
	}
	a.register(dave, other)
	a.follows(other, dave)
}

// newGroupUnregistered creates a group whose creator publishes no
// GroupInfo: its client's Options.MaxGroupInfoBytes is below any, so the
// creation's registration is left out (COMP-395) and CreateGroup reports
// that as ErrInvalidArgument beside the group.
func (a *acceptance) newGroupUnregistered(creator *world.Member, others ...*world.Member) []byte {
	a.t.Helper()
	var inboxes []string
	for _, m := range others {
		inboxes = append(inboxes, m.C.InboxID())
	}
	g, err := creator.C.CreateGroup(a.Ctx, client.GroupOptions{Name: "h", Members: inboxes})
	if g == nil || (err != nil && !errors.Is(err, ports.ErrInvalidArgument)) {
		a.t.Fatal(err)
	}
	if n := a.highest(ports.TopicGroupInfo, g.ID()); n != 0 {
		a.t.Fatal("the creator registered the group")
	}
	return g.ID()
}

var _ = message.ProposalAdd
