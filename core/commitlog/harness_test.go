package commitlog_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// world is one delivery service (core/delivery on a SQLite envelope store,
// reached through memtransport), one conversation's true MLS history, and
// the clients that hold it. Each client has its own SQLite store; its MLS
// state is a recorded ratchet tree (a ports.GroupView per epoch).
type world struct {
	t   *testing.T
	ctx context.Context
	svc *delivery.Service
	// es is the delivery service's store; publishRaw appends to it
	// directly, as a hostile service that stores replays would.
	es    *deliverydb.Store
	clock *clock.Fake
	g     *groupModel
	// states holds the group's state after each commit, by sequence id.
	states map[uint64]groupModel
}

type member struct {
	inbox string
	key   []byte
}

// groupModel is the group's state as the members who follow it hold it.
type groupModel struct {
	root    []byte
	keys    commitlog.Keys
	ct      ports.ConversationType
	members []member
	admins  []string
	dm      [2]string
	epoch   uint64
	auth    []byte
	seq     uint64 // last sequence id on the group-message topic
}

func newWorld(t *testing.T, ct ports.ConversationType) *world {
	t.Helper()
	ctx := context.Background()
	es, err := deliverydb.OpenSQLite(ctx, filepath.Join(t.TempDir(), "delivery.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { es.Close() })
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	root := make([]byte, 32)
	_, _ = rand.Read(root)
	keys, err := commitlog.DeriveKeys(root)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ctx: ctx, svc: delivery.New(es, &delivery.Options{Clock: fc}), es: es, clock: fc,
		g: &groupModel{root: root, keys: keys, ct: ct, epoch: 1, auth: randAuth()}}
	return w
}

func randAuth() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}

func (g *groupModel) extensions() []ports.Extension {
	var d metadata.Dictionary
	d = d.Set(metadata.ComponentConversationType, metadata.EncodeConversationType(g.ct))
	d = d.Set(metadata.ComponentGroupRootKey, g.root)
	if g.ct == ports.ConversationDM {
		d = d.Set(metadata.ComponentDMMembers, metadata.EncodeDMMembers(g.dm[0], g.dm[1]))
	} else {
		d = d.Set(metadata.ComponentSuperAdminList, metadata.EncodeInboxList(g.admins))
	}
	ext, err := d.Extension()
	if err != nil {
		panic(err)
	}
	return []ports.Extension{ext}
}

// viewFor is the group's state as c holds it when it follows the group.
func (g *groupModel) viewFor(c *client) ports.GroupView {
	v := ports.GroupView{GroupID: g.keys.GroupID, Epoch: g.epoch, EpochAuthenticator: bytes.Clone(g.auth), Extensions: g.extensions()}
	for i, m := range g.members {
		v.Members = append(v.Members, ports.Member{LeafIndex: uint32(i), SignatureKey: m.key, InboxID: m.inbox})
		if bytes.Equal(m.key, c.pub) {
			v.OwnLeaf, v.Active = uint32(i), true
		}
	}
	if !v.Active {
		v.EpochAuthenticator = nil
	}
	return v
}

// commit advances the group by one commit and returns its sequence id.
func (w *world) commit(change func(g *groupModel)) uint64 {
	w.g.seq++
	w.g.epoch++
	w.g.auth = randAuth()
	if change != nil {
		change(w.g)
	}
	snap := *w.g
	snap.members = slices.Clone(w.g.members)
	snap.admins = slices.Clone(w.g.admins)
	if w.states == nil {
		w.states = map[uint64]groupModel{}
	}
	w.states[w.g.seq] = snap
	return w.g.seq
}

// stateAt is the group's state after commit seq.
func (w *world) stateAt(seq uint64) *groupModel {
	if s, ok := w.states[seq]; ok {
		return &s
	}
	return w.g
}

// pad publishes n commit-log envelopes that open to nothing (valid publish
// signature, ciphertext under no key), so that commit-log sequence ids run
// ahead of the group-message sequence ids the entries name. The harness
// counts the group-message topic itself instead of publishing to it, so the
// delivery service's shared counter (COMP-041) does not see those ids.
func (w *world) pad(n int) {
	tr := memtransport.New(w.svc, nil)
	var envs []*backendpb.ClientEnvelope
	for i := 0; i < n; i++ {
		s, err := commitlog.SealSigned(w.g.keys, &contentspb.PlaintextCommitLogEntry{CommitSequenceId: uint64(i)})
		if err != nil {
			w.t.Fatal(err)
		}
		s.Ciphertext[0] ^= 0xff
		s.Signature, _ = w.g.keys.SigningKey.Sign(nil, commitlog.EncodeTBS(w.g.keys.Topic, s.Nonce, s.Ciphertext), &ed25519.Options{Context: commitlog.PublishContext})
		envs = append(envs, commitlog.Envelope(w.g.keys, s))
	}
	if _, err := tr.Publish(w.ctx, envs); err != nil {
		w.t.Fatal(err)
	}
}

type client struct {
	w      *world
	name   string
	inbox  string
	priv   ed25519.PrivateKey
	pub    []byte
	path   string
	store  *sqlite.Store
	log    *commitlog.Log
	tr     ports.Transport
	opts   commitlog.Options
	view   ports.GroupView
	mu     sync.Mutex
	events []commitlog.ForkEvent
	joined bool
}

// viewSource serves a client's recorded ratchet tree as its MLS state.
type viewSource struct{ c *client }

func (v viewSource) Group(_ context.Context, _ ports.Tx, id []byte) (ports.GroupView, error) {
	if !v.c.joined || !bytes.Equal(id, v.c.w.g.keys.GroupID) {
		return ports.GroupView{}, ports.ErrGroupNotFound
	}
	return v.c.view, nil
}

func (w *world) newClient(name, inbox string, configure ...func(*commitlog.Options)) *client {
	pub, priv, _ := ed25519.GenerateKey(nil)
	c := &client{w: w, name: name, inbox: inbox, priv: priv, pub: pub, path: filepath.Join(w.t.TempDir(), name+".db")}
	c.tr = memtransport.New(w.svc, &memtransport.Options{InstallationKey: pub})
	c.opts = commitlog.Options{Enabled: true, Transport: c.tr, Clock: w.clock, InstallationKey: priv}
	for _, f := range configure {
		f(&c.opts)
	}
	c.open()
	return c
}

func (c *client) open() {
	st, err := sqlite.Open(c.w.ctx, c.path, &sqlite.Options{})
	if err != nil {
		c.w.t.Fatal(err)
	}
	c.store = st
	o := c.opts
	o.Store, o.Views = st, viewSource{c}
	o.OnForked = func(e commitlog.ForkEvent) {
		c.mu.Lock()
		c.events = append(c.events, e)
		c.mu.Unlock()
	}
	if c.log, err = commitlog.New(o); err != nil {
		c.w.t.Fatal(err)
	}
	c.w.t.Cleanup(func() { st.Close() })
}

// restart closes the store and opens it again with a new Log.
func (c *client) restart() {
	if err := c.store.Close(); err != nil {
		c.w.t.Fatal(err)
	}
	c.open()
}

func (c *client) tx(fn func(tx ports.Tx) error) {
	c.w.t.Helper()
	if err := c.store.Tx(c.w.ctx, fn); err != nil {
		c.w.t.Fatalf("%s: %v", c.name, err)
	}
}

// join installs the group's current state: creation (anchor 0) or a
// Welcome whose message_cursor is anchor.
func (c *client) join(anchor uint64) {
	c.w.t.Helper()
	c.view, c.joined = c.w.g.viewFor(c), true
	c.tx(func(tx ports.Tx) error {
		g := ports.Group{ID: c.w.g.keys.GroupID, ConversationType: c.w.g.ct, Consent: ports.ConsentAllowed,
			Active: true, Cursor: anchor, GroupRoot: c.w.g.root}
		if _, err := tx.Groups().Get(c.w.ctx, g.ID); err != nil {
			if err := tx.Groups().Insert(c.w.ctx, g); err != nil {
				return err
			}
		} else if err := tx.Groups().Update(c.w.ctx, g.ID, func(gr *ports.Group) error {
			gr.Active, gr.Cursor = true, anchor
			return nil
		}); err != nil {
			return err
		}
		return c.log.BeginMembership(c.w.ctx, tx, g.ID, c.view, anchor)
	})
}

// merge applies commit seq as the group did.
func (c *client) merge(seq uint64, extra ...func(*commitlog.Merge)) {
	c.w.t.Helper()
	c.mergeView(seq, c.w.stateAt(seq).viewFor(c), extra...)
}

// mergeForked applies commit seq onto a state only this client holds.
func (c *client) mergeForked(seq uint64) {
	c.w.t.Helper()
	v := c.w.stateAt(seq).viewFor(c)
	v.EpochAuthenticator = randAuth()
	c.mergeView(seq, v)
}

func (c *client) mergeView(seq uint64, after ports.GroupView, extra ...func(*commitlog.Merge)) {
	c.w.t.Helper()
	m := commitlog.Merge{GroupID: c.w.g.keys.GroupID, CommitSequenceID: seq, Before: c.view, After: after, RoleEvidence: true}
	for _, f := range extra {
		f(&m)
	}
	var rec commitlog.Recorded
	c.tx(func(tx ports.Tx) error {
		var err error
		if rec, err = c.log.RecordMerge(c.w.ctx, tx, m); err != nil {
			return err
		}
		return tx.Groups().Update(c.w.ctx, m.GroupID, func(g *ports.Group) error {
			g.Cursor, g.Active = seq, after.Active
			return nil
		})
	})
	c.log.Notify(rec)
	c.view = after
}

// reject records a terminal rejection of commit seq.
func (c *client) reject(seq uint64, err error) {
	c.w.t.Helper()
	var rec commitlog.Recorded
	c.tx(func(tx ports.Tx) error {
		var rerr error
		if rec, rerr = c.log.RecordFailure(c.w.ctx, tx, commitlog.Failure{GroupID: c.w.g.keys.GroupID, CommitSequenceID: seq, View: c.view, Err: err}); rerr != nil {
			return rerr
		}
		return tx.Groups().Update(c.w.ctx, c.w.g.keys.GroupID, func(g *ports.Group) error {
			g.Cursor = seq
			return nil
		})
	})
	c.log.Notify(rec)
}

func (c *client) publish() commitlog.PublishReport {
	c.w.t.Helper()
	rep, err := c.log.Publish(c.w.ctx, c.w.g.keys.GroupID)
	if err != nil {
		c.w.t.Fatalf("%s publish: %v", c.name, err)
	}
	return rep
}

func (c *client) read() commitlog.ReadReport {
	c.w.t.Helper()
	rep, err := c.log.Read(c.w.ctx, c.w.g.keys.GroupID)
	if err != nil {
		c.w.t.Fatalf("%s read: %v", c.name, err)
	}
	return rep
}

func (c *client) forkState() ports.ForkState {
	c.w.t.Helper()
	s, err := c.log.ForkState(c.w.ctx, c.w.g.keys.GroupID)
	if err != nil {
		c.w.t.Fatal(err)
	}
	return s
}

func (c *client) wantFork(want ports.ForkState) {
	c.w.t.Helper()
	if got := c.forkState(); got != want {
		c.w.t.Fatalf("%s: fork state %v, want %v", c.name, got, want)
	}
}

func (c *client) remote() []ports.RemoteCommitLogEntry {
	c.w.t.Helper()
	r, err := c.log.RemoteEntries(c.w.ctx, c.w.g.keys.GroupID)
	if err != nil {
		c.w.t.Fatal(err)
	}
	return r
}

func (c *client) local() []ports.LocalCommitLogEntry {
	c.w.t.Helper()
	r, err := c.log.LocalEntries(c.w.ctx, c.w.g.keys.GroupID)
	if err != nil {
		c.w.t.Fatal(err)
	}
	return r
}

func remoteSeqs(rs []ports.RemoteCommitLogEntry) []uint64 {
	var out []uint64
	for _, r := range rs {
		out = append(out, r.CommitSequenceID)
	}
	return out
}

// topicEntries opens every envelope on the commit-log topic that opens.
func (w *world) topicEntries() []*contentspb.PlaintextCommitLogEntry {
	envs, err := memtransport.New(w.svc, nil).Query(w.ctx, w.g.keys.Topic, 0, 1000)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []*contentspb.PlaintextCommitLogEntry
	for _, e := range envs {
		if p, err := commitlog.Open(w.g.keys, w.g.keys.GroupID, e); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func entrySeqs(es []*contentspb.PlaintextCommitLogEntry) []uint64 {
	var out []uint64
	for _, e := range es {
		out = append(out, e.CommitSequenceId)
	}
	return out
}

func eq(a, b []uint64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// operator is a delivery service operator that can place any envelope on a
// topic: Query returns the real envelopes (their sequence ids multiplied by
// scale, leaving room between them) merged with injected ones.
type operator struct {
	ports.Transport
	scale    uint64
	mu       sync.Mutex
	injected []*backendpb.OriginatorEnvelope
	claim    uint64 // when non-zero, the highest sequence id claimed for every topic
	hideReal bool   // serve only the injected envelopes
	repeat   bool   // return every envelope again, ignoring after
	reverse  bool   // return each page in descending order
}

func (o *operator) inject(seq uint64, env *backendpb.ClientEnvelope) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.injected = append(o.injected, &backendpb.OriginatorEnvelope{SequenceId: seq, Envelope: env})
}

// HighestSequenceID reports the real topic's highest id, scaled as Query
// scales it, or what the operator claims when claim is set.
func (o *operator) HighestSequenceID(ctx context.Context, topic []byte) (uint64, error) {
	o.mu.Lock()
	claim := o.claim
	o.mu.Unlock()
	if claim != 0 {
		return claim, nil
	}
	h, err := o.Transport.HighestSequenceID(ctx, topic)
	return h * max(o.scale, 1), err
}

func (o *operator) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	if o.repeat {
		after = 0
	}
	scale := max(o.scale, 1)
	real, err := o.Transport.Query(ctx, topic, after/scale, 1000)
	if err != nil {
		return nil, err
	}
	var out []*backendpb.OriginatorEnvelope
	if o.hideReal {
		real = nil
	}
	for _, e := range real {
		c := proto.Clone(e).(*backendpb.OriginatorEnvelope)
		c.SequenceId *= scale
		if c.SequenceId > after {
			out = append(out, c)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.injected {
		if e.GetSequenceId() > after && bytes.Equal(e.GetEnvelope().GetTargetTopic(), topic) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].GetSequenceId() < out[j].GetSequenceId() })
	if o.reverse {
		slices.Reverse(out)
	}
	return out, nil
}
