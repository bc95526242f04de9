package recovery_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// requester is the policy of a member that asks to be readded: requests
// for every conversation, responses on.
var requester = &client.Options{Recovery: client.RecoveryPolicy{Mode: client.RecoverAll}}

// divergedRequester also accepts the opt-in repair of diverged secrets.
var divergedRequester = &client.Options{Recovery: client.RecoveryPolicy{Mode: client.RecoverAll, RepairDiverged: true}}

// group creates a group of creator (its only super admin) with the
// members' inboxes, syncs everyone and allows the conversation on every
// member, so that each reads its commit log (FORK-030).
func group(t testing.TB, creator *world.Member, ms ...*world.Member) []byte {
	t.Helper()
	var inboxes []string
	for _, m := range ms {
		if !slices.Contains(inboxes, m.C.InboxID()) && m.C.InboxID() != creator.C.InboxID() {
			inboxes = append(inboxes, m.C.InboxID())
		}
	}
	g, err := creator.C.CreateGroup(creator.W.Ctx, client.GroupOptions{Name: "g", Members: inboxes})
	if err != nil {
		t.Fatal(err)
	}
	world.Round(ms...) // each joins from its Welcome
	allow(t, g.ID(), ms...)
	return g.ID()
}

// dm creates a DM of a and b, syncs both and allows it on b.
func dm(t *testing.T, a, b *world.Member) []byte {
	t.Helper()
	cv, err := a.C.CreateDM(a.W.Ctx, b.C.InboxID())
	if err != nil {
		t.Fatal(err)
	}
	b.Sync()
	allow(t, cv.ID(), b)
	return cv.ID()
}

func allow(t testing.TB, id []byte, ms ...*world.Member) {
	t.Helper()
	for _, m := range ms {
		if err := m.Conv(id).SetConsent(m.W.Ctx, ports.ConsentAllowed); err != nil {
			t.Fatal(err)
		}
	}
}

// commit has m commit a key update and publish its commit-log entry at
// once, so that its entry is the first on the topic for that commit.
func commit(t *testing.T, m *world.Member, id []byte) {
	t.Helper()
	if err := m.Conv(id).UpdateKeys(m.W.Ctx); err != nil {
		t.Fatalf("%s: update keys: %v", m.Name, err)
	}
	m.Sync()
}

// fork has the victim catch up, arms fault on it and has committer
// commit: the victim merges (or refuses) that commit under the fault,
// reads committer's entry and reports forked. It returns once the victim
// is forked.
func fork(t *testing.T, id []byte, victim *world.Member, fault mlsfault.Fault, committer *world.Member) {
	t.Helper()
	victim.Sync()
	victim.Engine.Arm(id, fault)
	commit(t, committer, id)
	victim.Sync()
	if st := victim.ForkState(id); st != ports.ForkForked {
		t.Fatalf("%s after %v: fork state %v, want forked", victim.Name, fault, st)
	}
}

// readdsOf returns the sequence ids of the commits m merged that readded
// key, read from m's group-update records.
func readdsOf(t *testing.T, m *world.Member, id, key []byte) []uint64 {
	t.Helper()
	msgs, err := m.Conv(id).Messages(m.W.Ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, msg := range msgs {
		if msg.Kind != ports.MessageGroupUpdated {
			continue
		}
		u, err := client.DecodeGroupUpdate(msg.Content)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(u.Readded, func(k []byte) bool { return bytes.Equal(k, key) }) {
			out = append(out, msg.SequenceID)
		}
	}
	return out
}

// healthy commits once more, syncs everyone and checks the end state of
// every case: each member active at the same epoch and epoch
// authenticator, and not forked.
func healthy(t *testing.T, id []byte, committer *world.Member, ms ...*world.Member) {
	t.Helper()
	commit(t, committer, id)
	world.Round(ms...)
	world.Agree(t, id, ms...)
	for _, m := range ms {
		if st := m.ForkState(id); st != ports.ForkNotForked {
			t.Errorf("%s: fork state %v, want not forked", m.Name, st)
		}
	}
}

// stillForked checks the end state of a case that leaves forked, a
// member whose log alone diverged, unrepaired: every member at the same
// epoch and epoch authenticator, forked forked and the others not.
func stillForked(t *testing.T, id []byte, forked *world.Member, ms ...*world.Member) {
	t.Helper()
	world.Agree(t, id, ms...)
	for _, m := range ms {
		want := ports.ForkNotForked
		if m == forked {
			want = ports.ForkForked
		}
		if st := m.ForkState(id); st != want {
			t.Errorf("%s: %v, want %v", m.Name, st, want)
		}
	}
}

// status returns m's stored readd status of key in the group.
func status(t *testing.T, m *world.Member, id, key []byte) ports.ReaddStatus {
	t.Helper()
	var st ports.ReaddStatus
	m.Tx(func(tx ports.Tx) error {
		s, err := tx.Readds().Get(context.Background(), id, key)
		if err == nil {
			st = s
		}
		return nil
	})
	return st
}

// request sends, as from, a readd request for the group naming latest,
// to the inboxes, through from's one-shot path.
func request(t *testing.T, from *world.Member, id []byte, latest uint64, to ...*world.Member) {
	t.Helper()
	var inboxes []string
	for _, m := range to {
		inboxes = append(inboxes, m.C.InboxID())
	}
	msg := &contentspb.OneshotMessage{MessageType: &contentspb.OneshotMessage_ReaddRequest{
		ReaddRequest: &contentspb.ReaddRequest{GroupId: id, LatestCommitSequenceId: latest}}}
	if _, err := from.C.SendOneshot(from.W.Ctx, msg, inboxes...); err != nil {
		t.Fatalf("%s: send one-shot: %v", from.Name, err)
	}
}

// rejected returns the rules of the Welcomes m rejected.
func rejected(t *testing.T, m *world.Member) []string {
	t.Helper()
	rs, err := m.C.RejectedWelcomes(m.W.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		out = append(out, r.Rule)
	}
	return out
}

func key(m *world.Member) []byte { return m.C.InstallationKey() }

// hostileReadd has m build, with its engine alone and so without its
// client's permission checks, a commit that removes victim's leaf and
// adds victim back with its newest key package; m publishes the commit
// and sends victim its Welcome, as a readder would.
func hostileReadd(t *testing.T, m *world.Member, id []byte, victim *world.Member) {
	t.Helper()
	ctx := m.W.Ctx
	reg, err := regroup.ProvideAlgorithms()
	if err != nil {
		t.Fatal(err)
	}
	v := keypackage.Validator{Engine: m.Engine, Wrappers: reg}
	pk, err := v.FetchInbox(ctx, m.Transport, ports.AssociationState{InboxID: victim.C.InboxID(), InstallationKeys: [][]byte{key(victim)}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kp := pk.Usable[0]
	out, seq := rawCommit(t, m, id, func(view ports.GroupView) ports.CommitOptions {
		var leaf uint32
		for _, l := range view.Members {
			if bytes.Equal(l.SignatureKey, key(victim)) {
				leaf = l.LeafIndex
			}
		}
		return ports.CommitOptions{Remove: []uint32{leaf}, Add: [][]byte{kp.KeyPackage}}
	})
	envs, err := (&join.Sender{Algorithms: reg}).Envelopes(ctx, out.Welcome, seq, []join.Recipient{{InstallationKey: kp.InstallationKey,
		Wrapper: kp.WrapperAlgorithm, WrapperPublicKey: kp.WrapperPublicKey, PointeeAEADs: kp.PointeeAEADs}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Transport.Publish(ctx, envs); err != nil {
		t.Fatal(err)
	}
}

// rawCommit has m build a commit with its engine alone, without its
// client's permission checks, and publish it on the group's topic. It
// returns the commit and its sequence id.
func rawCommit(t *testing.T, m *world.Member, id []byte, opts func(view ports.GroupView) ports.CommitOptions) (ports.CommitOutput, uint64) {
	t.Helper()
	var out ports.CommitOutput
	m.Tx(func(tx ports.Tx) error {
		view, err := m.Engine.Group(m.W.Ctx, tx, id)
		if err != nil {
			return err
		}
		out, err = m.Engine.Commit(m.W.Ctx, tx, id, opts(view))
		return err
	})
	env := &backendpb.ClientEnvelope{TargetTopic: append([]byte{byte(ports.TopicGroupMessages)}, id...),
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: out.Commit}}
	seqs, err := m.Transport.Publish(m.W.Ctx, []*backendpb.ClientEnvelope{env})
	if err != nil {
		t.Fatal(err)
	}
	return out, seqs[0]
}
