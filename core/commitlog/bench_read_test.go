package commitlog_test

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha512"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// benchPage is how many new envelopes one measured read pass evaluates.
const benchPage = 100

// benchConv is one conversation with a long history in a SQLite store:
// every commit has a local entry and an accepted entry, and a publisher
// that goes on publishing.
type benchConv struct {
	store   *sqlite.Store
	log     *commitlog.Log
	keys    commitlog.Keys
	pub     ed25519.PrivateKey
	view    ports.GroupView
	ext     []ports.Extension
	members []ports.Member
	seq     uint64 // shared counter
	epoch   uint64
	auth    []byte
	served  []*backendpb.OriginatorEnvelope
	mu      sync.Mutex
}

// history returns a conversation with n stored entries of each kind, in
// a new store under dir.
func history(b *testing.B, n int, dir string) *benchConv {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, fmt.Sprintf("history-%d.db", n)), nil)
	if err != nil {
		b.Fatal(err)
	}
	root := authOf(uint64(n), 99)
	keys, _ := commitlog.DeriveKeys(root)
	c := &benchConv{store: st, keys: keys, pub: key(uint64(n), 98), epoch: 1, auth: authOf(0), seq: 10}
	reader := key(uint64(n), 97)
	var d metadata.Dictionary
	d = d.Set(metadata.ComponentConversationType, metadata.EncodeConversationType(ports.ConversationGroup))
	d = d.Set(metadata.ComponentSuperAdminList, metadata.EncodeInboxList([]string{"publisher"}))
	ext, _ := d.Extension()
	c.ext = []ports.Extension{ext}
	c.members = []ports.Member{{LeafIndex: 0, SignatureKey: c.pub.Public().(ed25519.PublicKey), InboxID: "publisher"},
		{LeafIndex: 1, SignatureKey: reader.Public().(ed25519.PublicKey), InboxID: "reader"}}
	c.view = c.viewNow()
	c.log, err = commitlog.New(commitlog.Options{Enabled: true, Store: st, Transport: c, Clock: clock.NewFake(time.Unix(0, 0)),
		Views: c, InstallationKey: reader})
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Tx(ctx, func(tx ports.Tx) error {
		// Membership 1, as a store written before fork comparisons were
		// kept holds it.
		if err := tx.Groups().Insert(ctx, ports.Group{ID: keys.GroupID, ConversationType: ports.ConversationGroup,
			Consent: ports.ConsentAllowed, Active: true, GroupRoot: root, Membership: 1}); err != nil {
			return err
		}
		return tx.ReaderAdmission().SetFloor(ctx, keys.GroupID, 0)
	}); err != nil {
		b.Fatal(err)
	}
	// The history, written straight to the store in large transactions.
	for done := 0; done < n; {
		if err := st.Tx(ctx, func(tx ports.Tx) error {
			for i := 0; i < 5000 && done < n; i, done = i+1, done+1 {
				last := c.auth
				c.seq++
				c.epoch++
				c.auth = authOf(uint64(n), 1, c.seq)
				l := ports.LocalCommitLogEntry{GroupID: keys.GroupID, Membership: 1, CommitSequenceID: c.seq, LastEpochAuthenticator: last,
					CommitResult: ports.CommitResultApplied, AppliedEpochNumber: c.epoch, AppliedEpochAuthenticator: c.auth, RoleEvidence: true}
				if _, _, err := tx.LocalCommitLog().Append(ctx, l); err != nil {
					return err
				}
				c.seq++
				r := ports.RemoteCommitLogEntry{GroupID: keys.GroupID, EnvelopeSequenceID: c.seq, CommitSequenceID: l.CommitSequenceID,
					LastEpochAuthenticator: last, CommitResult: ports.CommitResultApplied, AppliedEpochNumber: c.epoch,
					AppliedEpochAuthenticator: c.auth, AuthorInstallationKey: c.members[0].SignatureKey}
				if _, err := tx.RemoteCommitLog().Insert(ctx, r); err != nil {
					return err
				}
			}
			return tx.Groups().Update(ctx, keys.GroupID, func(g *ports.Group) error { g.Cursor = c.seq; return nil })
		}); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Tx(ctx, func(tx ports.Tx) error { return tx.RemoteCommitLog().SetReadPosition(ctx, keys.GroupID, c.seq) }); err != nil {
		b.Fatal(err)
	}
	c.view = c.viewNow()
	// The first pass computes the comparison from the whole history once
	// (a store written before comparisons were kept); later ones do not.
	if rep, err := c.log.Read(ctx, keys.GroupID); err != nil || rep.ForkState != ports.ForkNotForked {
		b.Fatalf("first pass %+v %v", rep, err)
	}
	return c
}

func (c *benchConv) viewNow() ports.GroupView {
	return ports.GroupView{GroupID: c.keys.GroupID, Epoch: c.epoch, EpochAuthenticator: c.auth, Extensions: c.ext,
		Members: c.members, OwnLeaf: 1, Active: true}
}

// next makes benchPage new commits: the reader records each, and the
// publisher's entries for them wait on the topic. It returns the
// signature checks of those envelopes, for the reference.
func (c *benchConv) next(b *testing.B) []func() bool {
	ctx := context.Background()
	var checks []func() bool
	c.mu.Lock()
	c.served = c.served[:0]
	c.mu.Unlock()
	for i := 0; i < benchPage; i++ {
		before := c.viewNow()
		last := c.auth
		c.seq++
		cs := c.seq
		c.epoch++
		c.auth = authOf(uint64(len(c.members)), 2, c.seq)
		c.view = c.viewNow()
		if err := c.store.Tx(ctx, func(tx ports.Tx) error {
			if _, err := c.log.RecordMerge(ctx, tx, commitlog.Merge{GroupID: c.keys.GroupID, CommitSequenceID: cs, Before: before, After: c.view, RoleEvidence: true}); err != nil {
				return err
			}
			return tx.Groups().Update(ctx, c.keys.GroupID, func(g *ports.Group) error { g.Cursor = cs; return nil })
		}); err != nil {
			b.Fatal(err)
		}
		e := &contentspb.PlaintextCommitLogEntry{GroupId: c.keys.GroupID, CommitSequenceId: cs, CommitResult: contentspb.CommitResult_COMMIT_RESULT_APPLIED,
			LastEpochAuthenticator: last, AppliedEpochNumber: c.epoch, AppliedEpochAuthenticator: c.auth}
		s, err := commitlog.Seal(c.keys, e, c.pub)
		if err != nil {
			b.Fatal(err)
		}
		c.seq++
		c.mu.Lock()
		c.served = append(c.served, &backendpb.OriginatorEnvelope{SequenceId: c.seq, Envelope: commitlog.Envelope(c.keys, s)})
		c.mu.Unlock()
		signed, err := commitlog.Open(c.keys, c.keys.GroupID, c.served[len(c.served)-1])
		if err != nil {
			b.Fatal(err)
		}
		unsigned := proto.Clone(signed).(*contentspb.PlaintextCommitLogEntry)
		unsigned.AuthorSignature = nil
		digest := sha512.Sum512(append(append([]byte{}, c.keys.Topic...), commitlog.EncodeEntry(unsigned)...))
		tbs := commitlog.EncodeTBS(c.keys.Topic, s.Nonce, s.Ciphertext)
		checks = append(checks,
			func() bool {
				return ed25519.VerifyWithOptions(c.keys.CommitLogID, tbs, s.Signature, &ed25519.Options{Context: commitlog.PublishContext}) == nil
			},
			func() bool {
				return ed25519.VerifyWithOptions(signed.AuthorInstallationKey, digest[:], signed.AuthorSignature,
					&ed25519.Options{Hash: crypto.SHA512, Context: commitlog.AuthorContext}) == nil
			})
	}
	return checks
}

// BenchmarkReadPass measures one read pass that evaluates benchPage new
// envelopes (query, verification, admission, storing the accepted entries,
// the fork state) in conversations with 10,000 and 100,000 stored local
// and accepted entries, in a SQLite store. ns/op is the pass; beside it,
// measured in the same iterations, sigcheck-ns is the cost of the page's
// 2×benchPage signature checks alone with crypto/ed25519, and
// pass/sigchecks their ratio. A pass that cost in proportion to history
// would grow tenfold from the first size to the second.
func BenchmarkReadPass(b *testing.B) {
	// Sub-benchmarks run more than once (b.N grows); the histories are built
	// once, in a directory that outlives them.
	dir := b.TempDir()
	convs := map[int]*benchConv{}
	b.Cleanup(func() {
		for _, c := range convs {
			c.store.Close()
		}
	})
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			c, ok := convs[n]
			if !ok {
				c = history(b, n, dir)
				convs[n] = c
			}
			ctx := context.Background()
			var ref time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				checks := c.next(b)
				t0 := time.Now()
				for _, ok := range checks {
					if !ok() {
						b.Fatal("reference signature check failed")
					}
				}
				ref += time.Since(t0)
				b.StartTimer()
				rep, err := c.log.Read(ctx, c.keys.GroupID)
				if err != nil || rep.Accepted != benchPage || rep.ForkState != ports.ForkNotForked {
					b.Fatalf("pass %+v %v (counters %v)", rep, err, c.log.Counters())
				}
			}
			b.StopTimer()
			perPass := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			refPerPass := float64(ref.Nanoseconds()) / float64(b.N)
			b.ReportMetric(refPerPass, "sigcheck-ns")
			b.ReportMetric(perPass/refPerPass, "pass/sigchecks")
		})
	}
}

// Group implements commitlog.Views.
func (c *benchConv) Group(context.Context, ports.Tx, []byte) (ports.GroupView, error) {
	return c.view, nil
}

// Query serves the page of new envelopes.
func (c *benchConv) Query(_ context.Context, _ []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*backendpb.OriginatorEnvelope
	for _, e := range c.served {
		if e.GetSequenceId() > after && (limit <= 0 || len(out) < limit) {
			out = append(out, e)
		}
	}
	return out, nil
}

// HighestSequenceID is the newest served id.
func (c *benchConv) HighestSequenceID(context.Context, []byte) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq, nil
}

func (c *benchConv) Publish(context.Context, []*backendpb.ClientEnvelope) ([]uint64, error) {
	return nil, errNotServed
}

func (c *benchConv) QueryNewest(context.Context, []byte) (*backendpb.OriginatorEnvelope, error) {
	return nil, errNotServed
}

func (c *benchConv) Subscribe(context.Context, []ports.TopicCursor) (ports.Subscription, error) {
	return nil, errNotServed
}
