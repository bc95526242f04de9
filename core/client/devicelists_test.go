package client_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// COMP-514 (ADR-0030 amendment rule 1): a catch-up upload publishes the
// identity updates the client holds for the group's inboxes before its
// merged commits. alice holds a revocation of bob's phone that the
// delivery service never received (a restore lost it); her upload puts
// it on bob's identity topic, at a sequence id below every commit the
// upload published, and publishing her list again stores nothing new.
func TestCOMP514_UploadPublishesDeviceListsFirst(t *testing.T) {
	w := world.New(t, "embedded")
	alice, bob := w.Member("alice", world.Config{}), w.Member("bob", world.Config{})
	phone := w.Member("bobphone", world.Config{RecoveryKey: bob.C.Identity().RecoveryKey})
	cv, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := cv.ID()
	world.SyncAll(alice, bob, phone)
	if err := alice.Conv(id).SetName(w.Ctx, "merged"); err != nil {
		t.Fatal(err)
	}
	u, err := identity.NewRevoke(bob.C.Identity().RecoveryKey, phone.C.InstallationKey(), time.Now().UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := proto.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	alice.Tx(func(tx ports.Tx) error {
		_, err := tx.IdentityCache().Put(w.Ctx, ports.IdentityUpdateRecord{InboxID: bob.C.InboxID(), SequenceID: 1 << 40, Update: raw})
		return err
	})
	groupTopic := append([]byte{byte(ports.TopicGroupMessages)}, id...)
	before, err := alice.Transport.HighestSequenceID(w.Ctx, groupTopic)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.C.UploadMerged(w.Ctx, id); err != nil {
		t.Fatal(err)
	}
	bobTopic, _ := identity.Topic(bob.C.InboxID())
	revokeAt := func() (seq uint64, n int) {
		es, err := alice.Transport.Query(w.Ctx, bobTopic, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.GetEnvelope().GetIdentityUpdate().GetRevokeInstallation() != nil {
				seq = e.GetSequenceId()
			}
		}
		return seq, len(es)
	}
	seq, n := revokeAt()
	if seq == 0 {
		t.Fatal("alice's upload did not publish the revocation of bob's phone she holds")
	}
	es, err := alice.Transport.Query(w.Ctx, groupTopic, before, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) == 0 {
		t.Fatal("the upload published no commit")
	}
	if es[0].GetSequenceId() < seq {
		t.Fatalf("a merged commit uploaded at %d, before the device list at %d", es[0].GetSequenceId(), seq)
	}
	if _, err := alice.C.UploadMerged(w.Ctx, id); err != nil {
		t.Fatal(err)
	}
	if again, m := revokeAt(); again != seq || m != n {
		t.Fatalf("the list uploaded again: revocation at %d (was %d), %d updates (were %d)", again, seq, m, n)
	}
}
