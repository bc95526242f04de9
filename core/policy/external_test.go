package policy

import (
	"errors"
	"slices"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// externalCommit builds an external commit on a group of alice/0, alice/1
// and bob/2: the joiner takes leaf 3 and props are the commit's
// proposals.
func externalCommit(joiner ports.Member, props ...ports.Proposal) Commit {
	before := groupState{ct: ports.ConversationGroup, superAdmins: []string{"alice"},
		members: []ports.Member{leaf(0, "alice"), leaf(1, "alice"), leaf(2, "bob")}}
	b := before.view()
	after := b
	after.Members = append(slices.Clone(b.Members), joiner)
	return Commit{Before: b, After: after, Sender: joiner, SenderType: ports.SenderNewMemberCommit, Proposals: props}
}

func removeOf(m ports.Member) ports.Proposal {
	return ports.Proposal{Type: ports.ProposalRemove, SenderType: ports.SenderNewMemberCommit, Removed: m}
}

// associatedOnly associates exactly the given installation keys.
func associatedOnly(keys ...[]byte) Associated {
	return func(inbox string, key []byte) (bool, error) {
		return slices.ContainsFunc(keys, func(k []byte) bool { return string(k) == string(key) }), nil
	}
}

// COMP-396: the two external commits regroup accepts, and a refusal,
// naming its reason, of every other.
func TestCOMP396_External(t *testing.T) {
	alice1 := leaf(1, "alice")
	resynced := alice1
	resynced.LeafIndex = 3
	fresh := ports.Member{LeafIndex: 3, InboxID: "alice", SignatureKey: []byte("alice/new")}
	bobKey := leaf(2, "bob").SignatureKey
	outsider := ports.Member{LeafIndex: 3, InboxID: "carol", SignatureKey: []byte("carol/0")}
	all := associatedOnly(alice1.SignatureKey, fresh.SignatureKey, bobKey, outsider.SignatureKey, leaf(0, "alice").SignatureKey)
	selfRemove := ports.Proposal{Type: ports.ProposalSelfRemove, SenderType: ports.SenderMember, ByReference: true,
		Sender: leaf(2, "bob"), Removed: leaf(2, "bob")}
	for _, c := range []struct {
		name   string
		commit Commit
		assoc  Associated
		want   ExternalKind
		reason string
	}{
		{"resync: alice/1 removes its own old leaf", externalCommit(resynced, removeOf(alice1)), all, Resync, ""},
		{"resync beside bob's own SelfRemove, which any commit may carry", externalCommit(resynced, removeOf(alice1), selfRemove), all, Resync, ""},
		{"recovery join: a new installation of alice removes a lost one", externalCommit(fresh, removeOf(alice1)), all, RecoveryJoin, ""},
		{"a member commit is no external commit", func() Commit {
			c := externalCommit(resynced, removeOf(alice1))
			c.SenderType = ports.SenderMember
			return c
		}(), all, 0, ExternalNotExternal},
		{"a plain external join removes nothing", externalCommit(fresh), all, 0, ExternalRemoves},
		{"an external commit that removes two leaves", externalCommit(fresh, removeOf(alice1), removeOf(leaf(0, "alice"))), all, 0, ExternalRemoves},
		{"an outsider's inbox is no member", externalCommit(outsider, removeOf(leaf(2, "bob"))), all, 0, ExternalInbox},
		{"alice's new installation removes bob's leaf", externalCommit(fresh, removeOf(leaf(2, "bob"))), all, 0, ExternalInbox},
		{"alice/0, a member, removes alice/1 instead of itself", externalCommit(func() ports.Member {
			m := leaf(0, "alice")
			m.LeafIndex = 3
			return m
		}(), removeOf(alice1)), all, 0, ExternalKey},
		{"a recovery join by an installation alice never associated", externalCommit(fresh, removeOf(alice1)), associatedOnly(alice1.SignatureKey), 0, ExternalAssociation},
		{"a resync by an installation alice revoked", externalCommit(resynced, removeOf(alice1)), associatedOnly(fresh.SignatureKey), 0, ExternalAssociation},
		{"an Add in an external commit", externalCommit(fresh, removeOf(alice1), ports.Proposal{Type: ports.ProposalAdd, Added: outsider}), all, 0, ExternalProposal},
		{"a Remove by reference", externalCommit(fresh, ports.Proposal{Type: ports.ProposalRemove, ByReference: true, SenderType: ports.SenderMember, Removed: alice1}), all, 0, ExternalProposal},
		{"bob's SelfRemove naming alice", externalCommit(resynced, removeOf(alice1), ports.Proposal{Type: ports.ProposalSelfRemove,
			SenderType: ports.SenderMember, ByReference: true, Sender: leaf(2, "bob"), Removed: leaf(0, "alice")}), all, 0, ExternalProposal},
		{"group context changed", func() Commit {
			c := externalCommit(resynced, removeOf(alice1))
			c.After.Extensions = append(slices.Clone(c.After.Extensions), ports.Extension{Type: 0xf000})
			return c
		}(), all, 0, ExternalGroupContext},
		{"a joiner whose leaf names no inbox", externalCommit(ports.Member{LeafIndex: 3, SignatureKey: []byte("x")}, removeOf(alice1)), all, 0, ExternalInbox},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := External(c.commit, c.assoc)
			if c.reason == "" {
				if err != nil || got != c.want {
					t.Fatalf("External = %v, %v; want %v", got, err, c.want)
				}
				return
			}
			var xe *ExternalError
			if !errors.As(err, &xe) || xe.Reason != c.reason {
				t.Fatalf("External = %v, %v; want a refusal for %q", got, err, c.reason)
			}
			if !errors.Is(err, ErrNotPermitted) || !errors.Is(err, ErrExternalRefused) {
				t.Fatalf("refusal %v does not wrap ErrNotPermitted and ErrExternalRefused", err)
			}
		})
	}
}

// COMP-396: a resolver that cannot answer is not a refusal: the caller
// retries, and no resolver at all is the caller's mistake.
func TestCOMP396_External_ResolverFailure(t *testing.T) {
	alice1 := leaf(1, "alice")
	c := externalCommit(ports.Member{LeafIndex: 3, InboxID: "alice", SignatureKey: []byte("alice/new")}, removeOf(alice1))
	down := errors.New("identity service down")
	_, err := External(c, func(string, []byte) (bool, error) { return false, down })
	if !errors.Is(err, down) || errors.Is(err, ErrExternalRefused) {
		t.Fatalf("resolver failure: %v", err)
	}
	if _, err := External(c, nil); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("nil resolver: %v", err)
	}
}
