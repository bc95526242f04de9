package commitlog_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// flaky is a transport whose publishes fail on demand: fail makes the
// next call return ErrUnavailable after storing nothing; zeroAt makes the
// next call store the batch but report sequence id 0 from that index on.
type flaky struct {
	ports.Transport
	mu       sync.Mutex
	fail     int
	zeroAt   int
	zeroOnly int // when >= 0, the next call reports 0 for that index only
	sent     [][]byte
}

func (f *flaky) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range envs {
		b, _ := proto.Marshal(e)
		f.sent = append(f.sent, b)
	}
	if f.fail > 0 {
		f.fail--
		return nil, fmt.Errorf("publish: %w", ports.ErrUnavailable)
	}
	seqs, err := f.Transport.Publish(ctx, envs)
	if err == nil && f.zeroAt >= 0 && f.zeroAt < len(seqs) {
		for i := f.zeroAt; i < len(seqs); i++ {
			seqs[i] = 0
		}
		f.zeroAt = -1
	}
	if err == nil && f.zeroOnly >= 0 && f.zeroOnly < len(seqs) {
		seqs[f.zeroOnly] = 0
		f.zeroOnly = -1
	}
	return seqs, err
}

func commitLogSeqs(w *world) []uint64 { return entrySeqs(w.topicEntries()) }

// FORK-021: entries go out in ascending order; an entry whose publish
// failed or was not confirmed is published again (identical bytes) before
// anything later; progress survives a restart.
func TestFORK021_PublishesInOrderAndRetriesFirstUnconfirmed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, ports.ConversationGroup)
	w.g.admins = []string{"inbox-a"}
	var fl *flaky
	a := w.newClient("a", "inbox-a", func(o *commitlog.Options) {
		fl = &flaky{Transport: o.Transport, zeroAt: -1, zeroOnly: -1}
		o.Transport, o.PublishBatch = fl, 2
	})
	w.g.members = []member{{a.inbox, a.pub}}
	a.join(0)
	w.pad(20)
	var want []uint64
	for i := 0; i < 6; i++ {
		s := w.commit(nil)
		a.merge(s)
		want = append(want, s)
	}
	fl.zeroAt = 1 // second entry of the first page is stored but unconfirmed
	if _, err := a.log.Publish(w.ctx, w.g.keys.GroupID); !errors.Is(err, commitlog.ErrPublish) {
		t.Fatalf("unconfirmed entry not reported: %v", err)
	}
	if got := commitLogSeqs(w); !eq(got, want[:2]) {
		t.Fatalf("topic %v after first pass", got)
	}
	fl.fail = 1
	if _, err := a.log.Publish(w.ctx, w.g.keys.GroupID); !errors.Is(err, ports.ErrUnavailable) {
		t.Fatalf("failed publish not reported: %v", err)
	}
	a.restart()
	rep := a.publish()
	if rep.Published != 5 {
		t.Fatalf("published %d after restart, want 5 (entry 2 again, then 3..6)", rep.Published)
	}
	// The retried entry was stored by the unconfirmed attempt; the
	// delivery service keeps an entry once per topic (COMP-144).
	got := commitLogSeqs(w)
	if !eq(got, want) {
		t.Fatalf("topic %v: want every entry once, in order", got)
	}
	// The retried entry is the same bytes each time: a duplicate (API-222).
	first := -1
	for i, b := range fl.sent {
		var env backendpb.ClientEnvelope
		_ = proto.Unmarshal(b, &env)
		if p, err := commitlog.Open(w.g.keys, w.g.keys.GroupID, &backendpb.OriginatorEnvelope{SequenceId: 1 << 40, Envelope: &env}); err == nil && p.CommitSequenceId == want[1] {
			if first < 0 {
				first = i
			} else if !bytes.Equal(fl.sent[first], b) {
				t.Fatal("retried entry is not byte-identical")
			}
		}
	}
	if again := a.publish(); again.Published != 0 {
		t.Fatal("confirmed entries published again")
	}
}

// FORK-085: only a current publisher publishes, only entries recorded
// since it last became one (the promoting commit's entry included), never
// removal entries, and only while consent is allowed.
func TestFORK085_PublishesFromTheCurrentRole(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	a, b := cs[0], cs[1]
	both := func(change func(*groupModel)) uint64 {
		s := w.commit(change)
		a.merge(s)
		b.merge(s)
		return s
	}
	s1, s2 := both(nil), both(nil)
	if rep := b.publish(); rep.Eligible || rep.Published != 0 {
		t.Fatal("a non-publisher published")
	}
	a.publish()
	s3 := both(func(g *groupModel) { g.admins = append(g.admins, "inbox-b") }) // promotes b
	s4 := both(nil)
	b.publish()
	byAuthor := func(key []byte) []uint64 {
		var out []uint64
		for _, e := range w.topicEntries() {
			if bytes.Equal(e.AuthorInstallationKey, key) {
				out = append(out, e.CommitSequenceId)
			}
		}
		return out
	}
	if got := byAuthor(b.pub); !eq(got, []uint64{s3, s4}) {
		t.Fatalf("promoted publisher published %v, want %v (not %d, %d)", got, []uint64{s3, s4}, s1, s2)
	}
	both(func(g *groupModel) { g.admins = []string{"inbox-b"} }) // demotes a
	a.publish()
	if got := byAuthor(a.pub); !eq(got, []uint64{s1, s2}) {
		t.Fatalf("demoted publisher published %v, want only %v", got, []uint64{s1, s2})
	}
	b.tx(func(tx ports.Tx) error {
		return tx.Groups().Update(w.ctx, w.g.keys.GroupID, func(g *ports.Group) error { g.Consent = ports.ConsentDenied; return nil })
	})
	s6 := both(nil)
	if rep := b.publish(); rep.Published != 0 {
		t.Fatal("published without consent")
	}
	b.tx(func(tx ports.Tx) error {
		return tx.Groups().Update(w.ctx, w.g.keys.GroupID, func(g *ports.Group) error { g.Consent = ports.ConsentAllowed; return nil })
	})
	b.publish()
	s7 := both(func(g *groupModel) { g.members = g.members[:1] }) // removes b
	if rep := b.publish(); rep.Published != 0 {
		t.Fatal("a removed member published")
	}
	if got := byAuthor(b.pub); !eq(got, []uint64{s3, s4, s4 + 1, s6}) {
		t.Fatalf("b published %v; the removal entry %d must never be", got, s7)
	}
}

// FORK-086: legacy local history (no recorded eligibility) publishes
// exactly the connected suffix from the recovery boundary, and the
// recovered eligibility and progress survive a restart.
func TestFORK086_RecoversLegacyEligibility(t *testing.T) {
	t.Parallel()
	w := newWorld(t, ports.ConversationGroup)
	w.g.admins = []string{"inbox-a"}
	var fl *flaky
	a := w.newClient("a", "inbox-a", func(o *commitlog.Options) {
		fl = &flaky{Transport: o.Transport, zeroAt: -1, zeroOnly: -1}
		o.Transport, o.PublishBatch = fl, 1
	})
	w.g.members = []member{{a.inbox, a.pub}}
	w.pad(20)
	// Legacy history: five applied commits recorded by an older client,
	// with a gap (an unrecorded commit) after the first and an unresolved
	// role commit at the third.
	auth := [][]byte{randAuth(), randAuth(), randAuth(), randAuth(), randAuth(), randAuth(), randAuth()}
	type rec struct {
		cs    uint64
		epoch uint64
		class ports.ChangeClass
		ev    bool
	}
	recs := []rec{{2, 1, ports.ChangeKeyUpdate, true}, {4, 3, ports.ChangeKeyUpdate, true}, {5, 4, ports.ChangeMembership, false},
		{6, 5, ports.ChangeKeyUpdate, true}, {7, 6, ports.ChangeMetadata, true}}
	w.g.epoch, w.g.auth, w.g.seq = 6, auth[6], 7
	a.view, a.joined = w.g.viewFor(a), true
	a.tx(func(tx ports.Tx) error {
		if err := tx.Groups().Insert(w.ctx, ports.Group{ID: w.g.keys.GroupID, ConversationType: ports.ConversationGroup,
			Consent: ports.ConsentAllowed, Active: true, Cursor: 7, GroupRoot: w.g.root, Membership: 1}); err != nil {
			return err
		}
		for _, r := range recs {
			if _, _, err := tx.LocalCommitLog().Append(w.ctx, ports.LocalCommitLogEntry{GroupID: w.g.keys.GroupID, Membership: 1,
				CommitSequenceID: r.cs, CommitResult: ports.CommitResultApplied, LastEpochAuthenticator: auth[r.epoch-1],
				AppliedEpochNumber: r.epoch, AppliedEpochAuthenticator: auth[r.epoch], Legacy: true, ChangeClass: r.class, RoleEvidence: r.ev}); err != nil {
				return err
			}
		}
		return nil
	})
	fl.fail = 0
	fl.zeroAt = 0 // the first legacy entry is stored but unconfirmed
	if _, err := a.log.Publish(w.ctx, w.g.keys.GroupID); !errors.Is(err, commitlog.ErrPublish) {
		t.Fatalf("want an unconfirmed publish, got %v", err)
	}
	a.restart()
	a.publish()
	// Suffix: commits 4..7 connect (2 is cut off by the gap); boundary: the
	// unresolved role commit 5, included.
	if got := commitLogSeqs(w); !eq(got, []uint64{5, 6, 7}) {
		t.Fatalf("legacy publication %v, want 5 (retried, stored once), 6, 7", got)
	}
	s := w.commit(nil)
	a.merge(s)
	a.restart()
	a.publish()
	if got := commitLogSeqs(w); !eq(got, []uint64{5, 6, 7, s}) {
		t.Fatalf("after restart %v: recovery must not run again or move progress back", got)
	}
}

// FORK-086 for a DM: the boundary is the start of the connected suffix,
// whatever the change classes say.
func TestFORK086_DMBoundaryIsSuffixStart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, ports.ConversationDM)
	w.g.dm = [2]string{"inbox-a", "inbox-b"}
	a := w.newClient("a", "inbox-a")
	w.g.members = []member{{a.inbox, a.pub}, {"inbox-b", make([]byte, 32)}}
	w.pad(10)
	auth := [][]byte{randAuth(), randAuth(), randAuth()}
	w.g.epoch, w.g.auth, w.g.seq = 2, auth[2], 3
	a.view, a.joined = w.g.viewFor(a), true
	a.tx(func(tx ports.Tx) error {
		if err := tx.Groups().Insert(w.ctx, ports.Group{ID: w.g.keys.GroupID, ConversationType: ports.ConversationDM,
			Consent: ports.ConsentAllowed, Active: true, Cursor: 3, GroupRoot: w.g.root}); err != nil {
			return err
		}
		for i, cs := range []uint64{2, 3} {
			if _, _, err := tx.LocalCommitLog().Append(w.ctx, ports.LocalCommitLogEntry{GroupID: w.g.keys.GroupID,
				CommitSequenceID: cs, CommitResult: ports.CommitResultApplied, LastEpochAuthenticator: auth[i],
				AppliedEpochNumber: uint64(i + 1), AppliedEpochAuthenticator: auth[i+1], Legacy: true, ChangeClass: ports.ChangeUnknown}); err != nil {
				return err
			}
		}
		return nil
	})
	a.publish()
	if got := commitLogSeqs(w); !eq(got, []uint64{2, 3}) {
		t.Fatalf("DM legacy publication %v, want 2, 3", got)
	}
}

// FORK-074: the delivery service's admission check (API-230, API-300)
// accepts a sealed entry and refuses it under another topic.
func TestFORK074_DeliveryAdmitsTheSeal(t *testing.T) {
	t.Parallel()
	k, _ := commitlog.DeriveKeys(bytes.Repeat([]byte{3}, 32))
	other, _ := commitlog.DeriveKeys(bytes.Repeat([]byte{4}, 32))
	_, author, _ := ed25519.GenerateKey(nil)
	s, err := commitlog.Seal(k, entryFor(&world{g: &groupModel{keys: k}}, 3, nil, []byte{1}, 2), author)
	if err != nil {
		t.Fatal(err)
	}
	if !delivery.VerifyPublishSignature(k.Topic, s) || !commitlog.VerifyPublishSignature(s) {
		t.Fatal("publish signature refused")
	}
	if delivery.VerifyPublishSignature(other.Topic, s) {
		t.Fatal("publish signature accepted on another topic")
	}
}
