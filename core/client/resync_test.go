package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"slices"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// The end-to-end cases of resync and recovery join run against a real
// regroupd process over gRPC (SQLite, and PostgreSQL when configured),
// with members built from the providers so that a test reaches their
// engines.

func rawMember(w *world.World, name string, recovery ed25519.PrivateKey) *world.Member {
	w.T.Helper()
	return w.Member(name, world.Config{RecoveryKey: recovery})
}

func groupInfoTopic(id []byte) []byte { return append([]byte{byte(ports.TopicGroupInfo)}, id...) }

// newestGroupInfoEpoch returns the epoch of the newest GroupInfo the
// delivery service holds for the group.
func newestGroupInfoEpoch(t *testing.T, m *world.Member, id []byte) uint64 {
	t.Helper()
	env, err := m.Transport.QueryNewest(m.W.Ctx, groupInfoTopic(id))
	if err != nil {
		t.Fatalf("newest group info: %v", err)
	}
	msg, err := framing.Decode(env.GetEnvelope().GetGroupMessage())
	if err != nil || msg.GroupInfo == nil {
		t.Fatalf("newest envelope on the GroupInfo topic is no GroupInfo: %v", err)
	}
	if !bytes.Equal(msg.GroupInfo.GroupContext.GroupID, id) {
		t.Fatalf("GroupInfo of group %x on the topic of %x", msg.GroupInfo.GroupContext.GroupID, id)
	}
	return msg.GroupInfo.GroupContext.Epoch
}

// COMP-395: the creator publishes the creation epoch's GroupInfo, and
// every commit carries the GroupInfo of the epoch it leads to, so the
// newest on the topic is always the group's epoch.
func TestCOMP395_EveryCommitPublishesItsGroupInfo(t *testing.T) {
	world.Each(t, world.Networked, func(t *testing.T, w *world.World) {
		alice, bob := rawMember(w, "alice", nil), rawMember(w, "bob", nil)
		g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := newestGroupInfoEpoch(t, alice, g.ID()); got != 0 {
			t.Fatalf("GroupInfo after creation at epoch %d, want 0", got)
		}
		if err := g.AddMembers(w.Ctx, bob.C.InboxID()); err != nil {
			t.Fatal(err)
		}
		bob.Sync()
		if err := bob.Conv(g.ID()).UpdateKeys(w.Ctx); err != nil {
			t.Fatal(err)
		}
		for _, m := range []*world.Member{alice, bob} {
			m.Sync()
			if got, want := newestGroupInfoEpoch(t, m, g.ID()), m.Info(g.ID()).Epoch; got != want {
				t.Fatalf("%s: newest GroupInfo at epoch %d, the group at %d", m.Name, got, want)
			}
		}
		// Nothing is missing, so nobody publishes another.
		if published, err := bob.Conv(g.ID()).PublishGroupInfo(w.Ctx); err != nil || published {
			t.Fatalf("PublishGroupInfo with the epoch's GroupInfo held: %v, %v", published, err)
		}
	})
}

// COMP-397: a member publishes the epoch's GroupInfo when the delivery
// service's newest is older, and only then.
func TestCOMP397_PublishMissingGroupInfo(t *testing.T) {
	world.Each(t, world.Networked[:1], func(t *testing.T, w *world.World) {
		alice, bob := rawMember(w, "alice", nil), rawMember(w, "bob", nil)
		g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
		if err != nil {
			t.Fatal(err)
		}
		bob.Sync()
		id := g.ID()
		// An older GroupInfo published last stands for a missing one.
		stale := creationGroupInfo(t, w, alice, id)
		if _, err := alice.Transport.Publish(w.Ctx, []*backendpb.ClientEnvelope{{TargetTopic: groupInfoTopic(id),
			Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: stale}}}); err != nil {
			t.Fatal(err)
		}
		if got := newestGroupInfoEpoch(t, bob, id); got != 0 {
			t.Fatalf("stale GroupInfo at epoch %d", got)
		}
		published, err := bob.Conv(id).PublishGroupInfo(w.Ctx)
		if err != nil || !published {
			t.Fatalf("PublishGroupInfo over a stale one: %v, %v", published, err)
		}
		if got, want := newestGroupInfoEpoch(t, bob, id), bob.Info(id).Epoch; got != want {
			t.Fatalf("newest GroupInfo at epoch %d, want %d", got, want)
		}
	})
}

// creationGroupInfo returns a GroupInfo of epoch 0 of the group, the
// oldest on its topic.
func creationGroupInfo(t *testing.T, w *world.World, m *world.Member, id []byte) []byte {
	t.Helper()
	envs, err := m.Transport.Query(w.Ctx, groupInfoTopic(id), 0, 1)
	if err != nil || len(envs) == 0 {
		t.Fatalf("first GroupInfo: %v", err)
	}
	return envs[0].GetEnvelope().GetGroupMessage()
}

// COMP-398: a member whose state diverged (it merged a commit nobody else
// saw) cannot read the group; it rejoins by Resync, reads and sends
// again, every member agrees on the epoch, and its commit log reads not
// forked.
func TestCOMP398_ResyncEndToEnd(t *testing.T) {
	world.Each(t, world.Networked, func(t *testing.T, w *world.World) {
		alice, bob := rawMember(w, "alice", nil), rawMember(w, "bob", nil)
		g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
		if err != nil {
			t.Fatal(err)
		}
		id := g.ID()
		bob.Sync()
		if err := bob.Conv(id).SetConsent(w.Ctx, ports.ConsentAllowed); err != nil {
			t.Fatal(err)
		}
		bob.Engine.Arm(id, mlsfault.DivergeAfterMerge)
		for _, name := range []string{"one", "two"} { // bob diverges at the first
			if err := g.SetName(w.Ctx, name); err != nil {
				t.Fatal(err)
			}
			syncAll(alice, bob)
		}
		if _, err := g.Send(w.Ctx, []byte("lost on bob")); err != nil {
			t.Fatal(err)
		}
		syncAll(alice, bob)
		if slices.Contains(texts(t, bob, id), "lost on bob") {
			t.Fatal("bob read the group after his state diverged")
		}
		seq, err := bob.Conv(id).Resync(w.Ctx)
		if err != nil {
			t.Fatalf("resync: %v", err)
		}
		syncAll(alice, bob)
		world.Agree(t, id, alice, bob)
		if _, err := bob.Conv(id).Send(w.Ctx, []byte("bob is back")); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Send(w.Ctx, []byte("welcome back")); err != nil {
			t.Fatal(err)
		}
		syncAll(alice, bob)
		if got := texts(t, alice, id); !slices.Contains(got, "bob is back") {
			t.Fatalf("alice holds %q", got)
		}
		if got := texts(t, bob, id); !slices.Contains(got, "welcome back") {
			t.Fatalf("bob holds %q", got)
		}
		bob.Tx(func(tx ports.Tx) error {
			gr, err := tx.Groups().Get(w.Ctx, id)
			if err == nil && gr.JoinAnchor != seq {
				t.Errorf("bob's membership anchored at %d, his external commit is %d", gr.JoinAnchor, seq)
			}
			return err
		})
		// One more commit after the resync gives the log something to
		// compare.
		if err := g.SetName(w.Ctx, "three"); err != nil {
			t.Fatal(err)
		}
		syncAll(alice, bob)
		if st := bob.ForkState(id); st != ports.ForkNotForked {
			t.Fatalf("bob's fork state after the resync: %v, want not forked", st)
		}
		if st := alice.ForkState(id); st != ports.ForkNotForked {
			t.Fatalf("alice's fork state: %v, want not forked", st)
		}
	})
}

// COMP-399: a user who lost every installation comes back on a new one of
// the same inbox, recovers the group by id, and reads and sends again;
// its lost installations are no longer members.
func TestCOMP399_RecoveryJoinEndToEnd(t *testing.T) {
	world.Each(t, world.Networked, func(t *testing.T, w *world.World) {
		_, bobKey, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		alice := rawMember(w, "alice", nil)
		bob1, bob2 := rawMember(w, "bob1", bobKey), rawMember(w, "bob2", bobKey)
		g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob1.C.InboxID()}})
		if err != nil {
			t.Fatal(err)
		}
		id := g.ID()
		syncAll(alice, bob1, bob2)
		if _, err := g.Send(w.Ctx, []byte("before the loss")); err != nil {
			t.Fatal(err)
		}
		// Both of bob's installations are lost.
		bob1.Close()
		bob2.Close()
		bob3 := rawMember(w, "bob3", bobKey)
		if _, err := bob3.C.Conversation(w.Ctx, id); !errors.Is(err, ports.ErrNotFound) {
			t.Fatalf("the new installation holds the group before recovering: %v", err)
		}
		cv, err := bob3.C.RecoverGroup(w.Ctx, id)
		if err != nil {
			t.Fatalf("recover: %v", err)
		}
		syncAll(alice, bob3)
		world.Agree(t, id, alice, bob3)
		ms, err := cv.Members(w.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		var bobs [][]byte
		for _, m := range ms {
			if m.InboxID == bob3.C.InboxID() {
				bobs = append(bobs, m.InstallationKey)
			}
		}
		if len(bobs) != 1 || !bytes.Equal(bobs[0], bob3.C.InstallationKey()) {
			t.Fatalf("bob's installations in the group: %x, want only the new one", bobs)
		}
		if _, err := cv.Send(w.Ctx, []byte("bob recovered")); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Send(w.Ctx, []byte("hello again")); err != nil {
			t.Fatal(err)
		}
		syncAll(alice, bob3)
		if got := texts(t, alice, id); !slices.Contains(got, "bob recovered") {
			t.Fatalf("alice holds %q", got)
		}
		if got := texts(t, bob3, id); !slices.Contains(got, "hello again") {
			t.Fatalf("bob3 holds %q", got)
		}
		if _, err := bob3.C.RecoverGroup(w.Ctx, id); !errors.Is(err, ports.ErrAlreadyExists) {
			t.Fatalf("recovering a group held active: %v", err)
		}
	})
}

// COMP-400: members refuse an external commit that is neither a resync
// nor a recovery join — an outsider's join — record its refusal, and the
// group goes on.
func TestCOMP400_MembersRefuseOtherExternalCommits(t *testing.T) {
	world.Each(t, world.Networked[:1], func(t *testing.T, w *world.World) {
		alice, bob, carol := rawMember(w, "alice", nil), rawMember(w, "bob", nil), rawMember(w, "carol", nil)
		g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
		if err != nil {
			t.Fatal(err)
		}
		id := g.ID()
		syncAll(alice, bob)
		epoch := alice.Info(id).Epoch
		env, err := carol.Transport.QueryNewest(w.Ctx, groupInfoTopic(id))
		if err != nil {
			t.Fatal(err)
		}
		kp := carolLeaf(t, carol)
		var out ports.CommitOutput
		carol.Tx(func(tx ports.Tx) (err error) {
			out, err = carol.Engine.JoinExternal(w.Ctx, tx, env.GetEnvelope().GetGroupMessage(), ports.ExternalJoinOptions{KeyPackage: kp})
			return err
		})
		if _, err := carol.Transport.Publish(w.Ctx, []*backendpb.ClientEnvelope{{TargetTopic: append([]byte{byte(ports.TopicGroupMessages)}, id...),
			Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: out.Commit}}}); err != nil {
			t.Fatal(err)
		}
		syncAll(alice, bob)
		refused(t, id, epoch, carol.C.InboxID(), alice, bob)
		// A key bob's inbox never associated, claiming bob's inbox and
		// replacing his leaf: a recovery join but for the association.
		mallory := memEngine(t)
		kp = memKeyPackage(t, mallory.eng, mallory.seed, bob.C.InboxID())
		if env, err = carol.Transport.QueryNewest(w.Ctx, groupInfoTopic(id)); err != nil {
			t.Fatal(err)
		}
		if out, err = mallory.eng.JoinExternal(w.Ctx, newMemTx(), env.GetEnvelope().GetGroupMessage(), ports.ExternalJoinOptions{KeyPackage: kp, Recover: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := carol.Transport.Publish(w.Ctx, []*backendpb.ClientEnvelope{{TargetTopic: append([]byte{byte(ports.TopicGroupMessages)}, id...),
			Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: out.Commit}}}); err != nil {
			t.Fatal(err)
		}
		syncAll(alice, bob)
		refused(t, id, epoch, "", alice, bob)
		if _, err := g.Send(w.Ctx, []byte("still here")); err != nil {
			t.Fatal(err)
		}
		syncAll(alice, bob)
		if got := texts(t, bob, id); !slices.Contains(got, "still here") {
			t.Fatalf("bob holds %q", got)
		}
	})
}

// refused fails the test unless every member stayed at epoch, does not
// list outsider (when set), and recorded its newest commit as invalid.
func refused(t *testing.T, id []byte, epoch uint64, outsider string, ms ...*world.Member) {
	t.Helper()
	for _, m := range ms {
		if info := m.Info(id); info.Epoch != epoch {
			t.Fatalf("%s moved to epoch %d on an external commit it must refuse", m.Name, info.Epoch)
		}
		members, err := m.Conv(id).Members(m.W.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		if outsider != "" && slices.ContainsFunc(members, func(x client.Member) bool { return x.InboxID == outsider }) {
			t.Fatalf("%s lists the outsider as a member", m.Name)
		}
		local, err := m.Conv(id).LocalEntries(m.W.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(local) == 0 || local[len(local)-1].CommitResult != ports.CommitResultInvalid {
			t.Fatalf("%s recorded no refusal of the external commit: %+v", m.Name, local)
		}
	}
}

// carolLeaf returns the key package carol published, as the leaf of an
// external commit: JoinExternal reads only its leaf node.
func carolLeaf(t *testing.T, carol *world.Member) ports.KeyPackageBundle {
	t.Helper()
	env, err := carol.Transport.QueryNewest(carol.W.Ctx, append([]byte{byte(ports.TopicKeyPackages)}, carol.C.InstallationKey()...))
	if err != nil {
		t.Fatalf("carol's key package: %v", err)
	}
	return ports.KeyPackageBundle{KeyPackage: env.GetEnvelope().GetKeyPackage().GetKeyPackageTlsSerialized()}
}

// publishHook runs before, once, ahead of the first Publish batch that
// carries a GroupInfo: between a resync's read of the GroupInfo and its
// commit reaching the delivery service.
type publishHook struct {
	ports.Transport
	before func()
}

func (h *publishHook) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	if f := h.before; f != nil && slices.ContainsFunc(envs, func(e *backendpb.ClientEnvelope) bool {
		return len(e.GetTargetTopic()) > 0 && e.GetTargetTopic()[0] == byte(ports.TopicGroupInfo)
	}) {
		h.before = nil
		f()
	}
	return h.Transport.Publish(ctx, envs)
}

// COMP-398: a resync that another commit of the same epoch beats is not
// merged: the member sees the other commit ahead of its own on the topic,
// clears its external commit and resyncs from the newer GroupInfo, and
// ends at the group's epoch.
func TestCOMP398_ResyncBeatenByACommitRetries(t *testing.T) {
	world.Each(t, world.Networked[:1], func(t *testing.T, w *world.World) {
		hook := &publishHook{}
		alice := rawMember(w, "alice", nil)
		bob := w.Member("bob", world.Config{Transport: func(tr ports.Transport) ports.Transport { hook.Transport = tr; return hook }})
		g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
		if err != nil {
			t.Fatal(err)
		}
		id := g.ID()
		bob.Sync()
		hook.before = func() {
			if err := g.SetName(w.Ctx, "first in the epoch"); err != nil {
				t.Error(err)
			}
		}
		if _, err := bob.Conv(id).Resync(w.Ctx); err != nil {
			t.Fatalf("resync: %v", err)
		}
		if hook.before != nil {
			t.Fatal("the resync published no GroupInfo")
		}
		syncAll(alice, bob)
		world.Agree(t, id, alice, bob)
		if _, err := bob.Conv(id).Send(w.Ctx, []byte("in step")); err != nil {
			t.Fatal(err)
		}
		syncAll(alice, bob)
		if got := texts(t, alice, id); !slices.Contains(got, "in step") {
			t.Fatalf("alice holds %q", got)
		}
	})
}
