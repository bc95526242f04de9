package commitlog_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// FuzzReadHostileLog feeds one reader arbitrary sequences of envelopes: a
// real publisher's entries mixed with garbage, entries sealed under other
// keys, entries from a member that is no publisher, publisher entries
// carrying values no store holds, genuine entries served again at forged
// sequence ids, duplicates, pages out of order, and a delivery service
// that for a while claims its topic reaches far beyond its counter.
// After every pass and record the fork state must be the table's answer
// (section 5) for the local and accepted entries, forked staying forked;
// once the injection stops, every honest entry the topic serves must end
// up accepted.
func FuzzReadHostileLog(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 0, 0, 0, 1, 2, 1, 2, 1, 2, 8})
	f.Add([]byte{6, 2, 0, 0, 1, 2, 3, 0, 7, 3, 8, 1, 2, 4, 1, 8, 7, 8, 1, 2, 8})
	f.Add([]byte{5, 1, 1, 0, 1, 2, 5, 2, 9, 6, 3, 8, 10, 1, 2, 4, 2, 8, 11, 8})
	f.Add([]byte{8, 3, 2, 1, 0, 0, 0, 1, 1, 1, 2, 2, 2, 7, 0, 4, 1, 3, 8, 7, 8, 9, 8, 12, 8})
	st := fuzzStore(f)
	var n uint64
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, data []byte) {
		mu.Lock()
		n++
		id := n
		mu.Unlock()
		runHostile(t, st, id, data)
	})
}

func fuzzStore(f *testing.F) ports.Store {
	st, err := sqlite.Open(context.Background(), filepath.Join(f.TempDir(), "fuzz.db"), &sqlite.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	return st
}

// bytesIn hands out the fuzz input, zeros once it runs out.
type bytesIn struct{ b []byte }

func (in *bytesIn) next() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

func (in *bytesIn) done() bool { return len(in.b) == 0 }

type hCommit struct {
	cs, epoch  uint64
	auth, mine []byte // the group's authenticator, and the reader's
}

type hEntry struct {
	seq   uint64
	entry *contentspb.PlaintextCommitLogEntry
	env   *backendpb.ClientEnvelope
}

// hostileWorld is one conversation: its commits, its honest publisher's
// published entries, what the operator injects, and one reader.
type hostileWorld struct {
	t        *testing.T
	ctx      context.Context
	keys     commitlog.Keys
	other    commitlog.Keys
	pub      ed25519.PrivateKey
	member   ed25519.PrivateKey
	reader   []byte
	ext      []ports.Extension
	log      *commitlog.Log
	store    ports.Store
	counter  uint64 // the delivery service's shared counter; honest ids are even
	commits  []hCommit
	done     int // commits the reader processed
	forkAt   int // first commit the reader applies differently; -1 for none
	entries  []hEntry
	mu       sync.Mutex
	injected []*backendpb.OriginatorEnvelope
	claim    uint64
	reverse  bool
	dup      bool
	forked   bool // the reader was seen forked (FORK-041)
}

func key(seed ...uint64) ed25519.PrivateKey {
	h := sha256.New()
	for _, s := range seed {
		_ = binary.Write(h, binary.BigEndian, s)
	}
	return ed25519.NewKeyFromSeed(h.Sum(nil))
}

func authOf(seed ...uint64) []byte {
	return key(seed...).Public().(ed25519.PublicKey)
}

func runHostile(t *testing.T, st ports.Store, id uint64, data []byte) {
	in := &bytesIn{data}
	root := authOf(id, 1)
	keys, err := commitlog.DeriveKeys(root)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := commitlog.DeriveKeys(authOf(id, 2))
	w := &hostileWorld{t: t, ctx: context.Background(), keys: keys, other: other, store: st,
		pub: key(id, 3), member: key(id, 4), counter: 100, forkAt: -1}
	readerKey := key(id, 5)
	w.reader = readerKey.Public().(ed25519.PublicKey)
	var d metadata.Dictionary
	d = d.Set(metadata.ComponentConversationType, metadata.EncodeConversationType(ports.ConversationGroup))
	d = d.Set(metadata.ComponentSuperAdminList, metadata.EncodeInboxList([]string{"publisher"}))
	ext, err := d.Extension()
	if err != nil {
		t.Fatal(err)
	}
	w.ext = []ports.Extension{ext}
	nCommits := int(in.next()%10) + 1
	if fa := int(in.next() % 16); fa < nCommits {
		w.forkAt = fa
	}
	w.reverse, w.dup = in.next()%2 == 1, in.next()%2 == 1
	for i := 0; i < nCommits; i++ {
		w.commits = append(w.commits, hCommit{epoch: uint64(i + 2), auth: authOf(id, 10, uint64(i)), mine: authOf(id, 11, uint64(i))})
	}
	w.log, err = commitlog.New(commitlog.Options{Enabled: true, Store: st, Transport: w, Clock: clock.NewFake(time.Unix(0, 0)),
		Views: w, InstallationKey: readerKey, PageSize: int(in.next()%4) + 1})
	if err != nil {
		t.Fatal(err)
	}
	w.must(st.Tx(w.ctx, func(tx ports.Tx) error {
		if err := tx.Groups().Insert(w.ctx, ports.Group{ID: keys.GroupID, ConversationType: ports.ConversationGroup,
			Consent: ports.ConsentAllowed, Active: true, GroupRoot: root}); err != nil {
			return err
		}
		return w.log.BeginMembership(w.ctx, tx, keys.GroupID, w.viewAt(-1), 0)
	}))
	happened := 0
	for steps := 0; steps < 64 && !in.done(); steps++ {
		switch in.next() % 13 {
		case 0: // the next commit takes a sequence id on the group topic
			if happened < nCommits {
				w.counter += 2
				w.commits[happened].cs = w.counter
				happened++
			}
		case 1: // the reader processes the next commit
			if w.done < happened {
				w.process()
			}
		case 2: // the publisher publishes its next entry
			if len(w.entries) < happened {
				w.publishHonest()
			}
		case 3:
			w.inject(in, w.garbage(in))
		case 4:
			w.inject(in, w.sealed(in, w.member, w.keys))
		case 5:
			w.inject(in, w.sealed(in, w.pub, w.other))
		case 6:
			w.inject(in, w.unstorable(in))
		case 7: // a genuine entry again: at its own id, or far ahead
			if len(w.entries) > 0 {
				e := w.entries[int(in.next())%len(w.entries)]
				seq := e.seq
				if in.next()%2 == 1 {
					seq = w.farSeq(in)
				}
				w.serve(seq, e.env)
			}
		case 8:
			w.read()
		case 9:
			// The operator claims its topic reaches far beyond its counter.
			// It does not also keep envelopes placed just ahead of the
			// counter: under such a claim they are indistinguishable from
			// honest ones, and once the counter overtakes them the forgery
			// cannot be told from withholding (COMP-100).
			w.mu.Lock()
			w.claim = 1<<62 + uint64(in.next())<<20
			w.injected = slices.DeleteFunc(w.injected, func(e *backendpb.OriginatorEnvelope) bool {
				return e.GetSequenceId() > w.counter && e.GetSequenceId() < 1<<62
			})
			w.mu.Unlock()
		case 10:
			w.mu.Lock()
			w.claim = 0
			w.mu.Unlock()
		case 11:
			w.reverse, w.dup = !w.reverse, !w.dup
		case 12: // a restart: a new Log on the same store
			o := commitlog.Options{Enabled: true, Store: st, Transport: w, Clock: clock.NewFake(time.Unix(0, 0)), Views: w,
				InstallationKey: readerKey, PageSize: int(in.next()%4) + 1}
			if w.log, err = commitlog.New(o); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The injection stops; the group goes on to a later envelope, every
	// commit is processed and every entry published.
	w.mu.Lock()
	w.injected, w.claim = nil, 0
	w.mu.Unlock()
	for happened < nCommits {
		w.counter += 2
		w.commits[happened].cs = w.counter
		happened++
	}
	for w.done < nCommits {
		w.process()
	}
	for len(w.entries) < nCommits {
		w.publishHonest()
	}
	w.counter += 2
	cursor := w.counter
	w.must(st.Tx(w.ctx, func(tx ports.Tx) error {
		return tx.Groups().Update(w.ctx, keys.GroupID, func(g *ports.Group) error { g.Cursor = cursor; return nil })
	}))
	for pass := 0; ; pass++ {
		rep := w.read()
		if rep.Evaluated == 0 && !rep.Rewound && rep.Held == 0 {
			break
		}
		if pass > 20 {
			t.Fatalf("no quiet pass after the injection stopped: %+v", rep)
		}
	}
	remote, err := w.log.RemoteEntries(w.ctx, keys.GroupID)
	w.must(err)
	for _, e := range w.entries {
		found := slices.ContainsFunc(remote, func(r ports.RemoteCommitLogEntry) bool {
			return r.CommitSequenceID == e.entry.CommitSequenceId && bytes.Equal(r.AppliedEpochAuthenticator, e.entry.AppliedEpochAuthenticator)
		})
		if !found {
			t.Fatalf("honest entry for commit %d (envelope %d) never accepted; accepted %v; counters %v",
				e.entry.CommitSequenceId, e.seq, remoteSeqs(remote), w.log.Counters())
		}
	}
	if want := w.forkAt >= 0; (w.forkState() == ports.ForkForked) != want {
		t.Fatalf("final fork state %v with the reader forked from commit %d", w.forkState(), w.forkAt)
	}
}

func (w *hostileWorld) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

// viewAt is the reader's state after its i-th commit (-1: creation).
func (w *hostileWorld) viewAt(i int) ports.GroupView {
	v := ports.GroupView{GroupID: w.keys.GroupID, Epoch: 1, EpochAuthenticator: authOf(0), Extensions: w.ext, Active: true, OwnLeaf: 1,
		Members: []ports.Member{
			{LeafIndex: 0, SignatureKey: w.pub.Public().(ed25519.PublicKey), InboxID: "publisher"},
			{LeafIndex: 1, SignatureKey: w.reader, InboxID: "reader"},
			{LeafIndex: 2, SignatureKey: w.member.Public().(ed25519.PublicKey), InboxID: "member"},
		}}
	if i >= 0 {
		c := w.commits[i]
		v.Epoch, v.EpochAuthenticator = c.epoch, c.auth
		if w.forkAt >= 0 && i >= w.forkAt {
			v.EpochAuthenticator = c.mine
		}
	}
	return v
}

// Group implements commitlog.Views.
func (w *hostileWorld) Group(_ context.Context, _ ports.Tx, id []byte) (ports.GroupView, error) {
	if !bytes.Equal(id, w.keys.GroupID) {
		return ports.GroupView{}, ports.ErrGroupNotFound
	}
	return w.viewAt(w.done - 1), nil
}

func (w *hostileWorld) process() {
	i := w.done
	before, after := w.viewAt(i-1), w.viewAt(i)
	var rec commitlog.Recorded
	w.must(w.store.Tx(w.ctx, func(tx ports.Tx) error {
		var err error
		rec, err = w.log.RecordMerge(w.ctx, tx, commitlog.Merge{GroupID: w.keys.GroupID, CommitSequenceID: w.commits[i].cs,
			Before: before, After: after, RoleEvidence: true})
		if err != nil {
			return err
		}
		return tx.Groups().Update(w.ctx, w.keys.GroupID, func(g *ports.Group) error { g.Cursor = w.commits[i].cs; return nil })
	}))
	w.log.Notify(rec)
	w.done++
	w.check("record", rec.ForkState)
}

func (w *hostileWorld) publishHonest() {
	i := len(w.entries)
	c := w.commits[i]
	last := authOf(0)
	if i > 0 {
		last = w.commits[i-1].auth
	}
	e := &contentspb.PlaintextCommitLogEntry{GroupId: w.keys.GroupID, CommitSequenceId: c.cs, CommitResult: contentspb.CommitResult_COMMIT_RESULT_APPLIED,
		LastEpochAuthenticator: last, AppliedEpochNumber: c.epoch, AppliedEpochAuthenticator: c.auth}
	s, err := commitlog.Seal(w.keys, e, w.pub)
	w.must(err)
	w.counter += 2
	w.mu.Lock()
	w.entries = append(w.entries, hEntry{seq: w.counter, entry: e, env: commitlog.Envelope(w.keys, s)})
	w.mu.Unlock()
}

// farSeq is a forged sequence id far beyond the counter, or one no store
// holds.
func (w *hostileWorld) farSeq(in *bytesIn) uint64 {
	switch in.next() % 3 {
	case 0:
		return 1<<62 + uint64(in.next())
	case 1:
		return 1<<63 + uint64(in.next())
	}
	return math.MaxUint64 - uint64(in.next())
}

// inject serves env at a sequence id the input picks: an unused odd id
// the counter has passed, one just ahead of it (only while the operator
// tells the truth about its topic), or a far one.
func (w *hostileWorld) inject(in *bytesIn, env *backendpb.ClientEnvelope) {
	var seq uint64
	switch in.next() % 3 {
	case 0:
		seq = 1 + 2*uint64(int(in.next())%int(w.counter/2))
	case 1:
		seq = w.counter + 1 + 2*uint64(in.next()%8)
		w.mu.Lock()
		lying := w.claim != 0
		w.mu.Unlock()
		if lying {
			seq = w.farSeq(in)
		}
	default:
		seq = w.farSeq(in)
	}
	w.serve(seq, env)
}

func (w *hostileWorld) serve(seq uint64, env *backendpb.ClientEnvelope) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.injected = append(w.injected, &backendpb.OriginatorEnvelope{SequenceId: seq, Envelope: env})
}

func (w *hostileWorld) garbage(in *bytesIn) *backendpb.ClientEnvelope {
	n := int(in.next() % 80)
	b := make([]byte, n)
	for i := range b {
		b[i] = in.next()
	}
	return &backendpb.ClientEnvelope{TargetTopic: w.keys.Topic, Payload: &backendpb.ClientEnvelope_SealedCommitLogEntry{
		SealedCommitLogEntry: &backendpb.SealedCommitLogEntry{CommitLogId: w.keys.CommitLogID, Nonce: b[:min(n, 12)], Ciphertext: b, Signature: b}}}
}

// sealed is an entry with fields the input picks, signed by author and
// sealed under k: from a member that is no publisher, or under another
// conversation's keys.
func (w *hostileWorld) sealed(in *bytesIn, author ed25519.PrivateKey, k commitlog.Keys) *backendpb.ClientEnvelope {
	e := &contentspb.PlaintextCommitLogEntry{GroupId: w.keys.GroupID, CommitSequenceId: uint64(in.next()) * 3,
		CommitResult: contentspb.CommitResult(in.next() % 5), LastEpochAuthenticator: authOf(uint64(in.next() % 4)),
		AppliedEpochNumber: uint64(in.next() % 12), AppliedEpochAuthenticator: authOf(uint64(in.next() % 4))}
	s, err := commitlog.Seal(k, e, author)
	w.must(err)
	env := commitlog.Envelope(k, s)
	env.TargetTopic = w.keys.Topic
	return env
}

// unstorable is a publisher's entry whose applied epoch or authenticator
// no store holds (COMP-101).
func (w *hostileWorld) unstorable(in *bytesIn) *backendpb.ClientEnvelope {
	e := &contentspb.PlaintextCommitLogEntry{GroupId: w.keys.GroupID, CommitSequenceId: uint64(in.next()%100) + 1,
		CommitResult: contentspb.CommitResult_COMMIT_RESULT_APPLIED, AppliedEpochNumber: 1<<63 + uint64(in.next())}
	if in.next()%2 == 1 {
		e.AppliedEpochNumber = 3
		e.AppliedEpochAuthenticator = make([]byte, 65+int(in.next()))
	}
	s, err := commitlog.Seal(w.keys, e, w.pub)
	w.must(err)
	return commitlog.Envelope(w.keys, s)
}

func (w *hostileWorld) read() commitlog.ReadReport {
	w.t.Helper()
	rep, err := w.log.Read(w.ctx, w.keys.GroupID)
	if err != nil {
		w.t.Fatalf("read: %v (counters %v)", err, w.log.Counters())
	}
	w.check("read", rep.ForkState)
	return rep
}

func (w *hostileWorld) forkState() ports.ForkState {
	s, err := w.log.ForkState(w.ctx, w.keys.GroupID)
	w.must(err)
	return s
}

// check compares the stored fork state with the table of section 5,
// computed here from the local and accepted entries.
func (w *hostileWorld) check(after string, reported ports.ForkState) {
	w.t.Helper()
	local, err := w.log.LocalEntries(w.ctx, w.keys.GroupID)
	w.must(err)
	remote, err := w.log.RemoteEntries(w.ctx, w.keys.GroupID)
	w.must(err)
	want := tableState(local, remote, 1)
	if w.forked {
		want = ports.ForkForked
	}
	got := w.forkState()
	if got != want || reported != got {
		w.t.Fatalf("after %s: fork state %v (reported %v), the table says %v\nlocal %v\nremote %v",
			after, got, reported, want, localSeqs(local), remoteSeqs(remote))
	}
	w.forked = got == ports.ForkForked
}

func localSeqs(ls []ports.LocalCommitLogEntry) []uint64 {
	var out []uint64
	for _, l := range ls {
		out = append(out, l.CommitSequenceID)
	}
	return out
}

// tableState is section 5's table, written out: the shared commit is the
// local entry of the membership, other than a removal entry, with the
// highest commit sequence id that an accepted entry also has.
func tableState(local []ports.LocalCommitLogEntry, remote []ports.RemoteCommitLogEntry, membership uint64) ports.ForkState {
	var mine []ports.LocalCommitLogEntry
	for _, l := range local {
		if l.Membership == membership && !l.RemovedThisInstallation {
			mine = append(mine, l)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].CommitSequenceID > mine[j].CommitSequenceID })
	for i, l := range mine {
		for _, r := range remote {
			if r.CommitSequenceID != l.CommitSequenceID {
				continue
			}
			switch {
			case !bytes.Equal(l.AppliedEpochAuthenticator, r.AppliedEpochAuthenticator):
				return ports.ForkForked
			case i > 0:
				return ports.ForkUnknown // a newer local entry has no counterpart yet
			}
			return ports.ForkNotForked
		}
	}
	return ports.ForkUnknown
}

// Transport: the operator's view of the topic.

// Query returns a prefix, in sequence id order, of the honest entries and
// the injected envelopes above after, as the input arranges it: reversed,
// with duplicates.
func (w *hostileWorld) Query(_ context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var all []*backendpb.OriginatorEnvelope
	for _, e := range w.entries {
		if e.seq > after {
			all = append(all, &backendpb.OriginatorEnvelope{SequenceId: e.seq, Envelope: e.env})
		}
	}
	for _, e := range w.injected {
		if e.GetSequenceId() > after {
			all = append(all, e)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].GetSequenceId() < all[j].GetSequenceId() })
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	if w.dup && len(all) > 0 {
		all = append(all, all[0], all[len(all)-1])
	}
	if w.reverse {
		slices.Reverse(all)
	}
	return all, nil
}

// HighestSequenceID is the newest honest id, or the operator's claim.
func (w *hostileWorld) HighestSequenceID(context.Context, []byte) (uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.claim != 0 {
		return w.claim, nil
	}
	if len(w.entries) == 0 {
		return 0, nil
	}
	return w.entries[len(w.entries)-1].seq, nil
}

var errNotServed = errors.New("not served by the fuzz transport")

func (w *hostileWorld) Publish(context.Context, []*backendpb.ClientEnvelope) ([]uint64, error) {
	return nil, errNotServed
}

func (w *hostileWorld) QueryNewest(context.Context, []byte) (*backendpb.OriginatorEnvelope, error) {
	return nil, fmt.Errorf("query newest: %w", errNotServed)
}

func (w *hostileWorld) Subscribe(context.Context, []ports.TopicCursor) (ports.Subscription, error) {
	return nil, errNotServed
}
