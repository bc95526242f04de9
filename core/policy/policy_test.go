package policy

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// groupState builds a group view for the permission rules: members are
// "inbox/n" installations, metadata as given.
type groupState struct {
	ct          ports.ConversationType
	superAdmins []string
	admins      []string
	dm          [2]string
	name        string
	members     []ports.Member
	extra       func(metadata.Dictionary) metadata.Dictionary
}

func (s groupState) view() ports.GroupView {
	d := metadata.Dictionary{}.Set(metadata.ComponentConversationType, metadata.EncodeConversationType(s.ct)).
		Set(metadata.ComponentGroupRootKey, make([]byte, 32))
	if s.ct == ports.ConversationDM {
		d = d.Set(metadata.ComponentDMMembers, metadata.EncodeDMMembers(s.dm[0], s.dm[1]))
	} else {
		d = d.Set(metadata.ComponentSuperAdminList, metadata.EncodeInboxList(s.superAdmins)).
			Set(metadata.ComponentAdminList, metadata.EncodeInboxList(s.admins)).
			Set(metadata.ComponentName, []byte(s.name))
	}
	mem := map[string]*contentspb.GroupMembershipEntry_V1{}
	for _, m := range s.members {
		mem[m.InboxID] = &contentspb.GroupMembershipEntry_V1{SequenceId: 1}
	}
	d = d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(mem))
	if s.extra != nil {
		d = s.extra(d)
	}
	ext, err := d.Extension()
	if err != nil {
		panic(err)
	}
	return ports.GroupView{Extensions: []ports.Extension{ext}, Members: s.members, Active: true}
}

func leaf(i uint32, inbox string) ports.Member {
	return ports.Member{LeafIndex: i, InboxID: inbox, SignatureKey: []byte(inbox + "/" + string(rune('0'+i)))}
}

func check(t *testing.T, before, after groupState, by ports.Member, proposals ...ports.Proposal) error {
	t.Helper()
	b, a := before.view(), after.view()
	ch, err := Diff(b, a, proposals)
	if err != nil {
		t.Fatalf("diff: %v", err)
	}
	return Check(b, a, by, ports.SenderMember, ch)
}

// readdOf is the Remove and Add proposals of a readd of m.
func readdOf(m ports.Member) []ports.Proposal {
	return []ports.Proposal{{Type: ports.ProposalRemove, Removed: m}, {Type: ports.ProposalAdd, Added: m}}
}

// COMP-180: who may change what in a group; COMP-012: 0xBFxx components
// never change; COMP-182: GROUP_MEMBERSHIP names exactly the inboxes with
// a leaf.
func TestCOMP180_GroupPermissions(t *testing.T) {
	sa, ad, mb, nw := leaf(0, "super"), leaf(1, "admin"), leaf(2, "member"), leaf(3, "new")
	base := groupState{ct: ports.ConversationGroup, superAdmins: []string{"super"}, admins: []string{"admin"}, name: "g",
		members: []ports.Member{sa, ad, mb}}
	with := func(f func(*groupState)) groupState {
		s := base
		s.members = append([]ports.Member(nil), base.members...)
		f(&s)
		return s
	}
	added := with(func(s *groupState) { s.members = append(s.members, nw) })
	ownDevice := leaf(4, "member")
	for _, c := range []struct {
		name      string
		after     groupState
		by        ports.Member
		permit    bool
		proposals []ports.Proposal
	}{
		{"a super admin adds a member", added, sa, true, nil},
		{"an admin adds a member", added, ad, true, nil},
		{"a member may not add another inbox", added, mb, false, nil},
		{"a member adds its own inbox's installation", with(func(s *groupState) { s.members = append(s.members, ownDevice) }), mb, true, nil},
		{"an admin removes a member", with(func(s *groupState) { s.members = s.members[:2] }), ad, true, nil},
		{"a member may not remove another", with(func(s *groupState) {
			s.members = []ports.Member{sa, mb}
			s.admins = nil
		}), mb, false, nil},
		{"an admin may not remove a super admin", with(func(s *groupState) {
			s.members = s.members[1:]
			s.superAdmins = nil
		}), ad, false, nil},
		{"an admin renames the group", with(func(s *groupState) { s.name = "h" }), ad, true, nil},
		{"a member may not rename the group", with(func(s *groupState) { s.name = "h" }), mb, false, nil},
		{"a super admin changes the admin list", with(func(s *groupState) { s.admins = []string{"member"} }), sa, true, nil},
		{"an admin may not change the admin list", with(func(s *groupState) { s.admins = []string{"member"} }), ad, false, nil},
		{"an admin may not change the super admin list", with(func(s *groupState) { s.superAdmins = []string{"admin"} }), ad, false, nil},
		{"a super admin readds an installation", base, sa, true, readdOf(mb)},
		{"an admin may not readd", base, ad, false, readdOf(mb)},
		{"a member may not readd", base, mb, false, readdOf(sa)},
		{"a member updates its own leaf", base, mb, true, nil},
		{"COMP-012: the conversation type never changes", with(func(s *groupState) {
			s.extra = func(d metadata.Dictionary) metadata.Dictionary {
				return d.Set(metadata.ComponentConversationType, metadata.EncodeConversationType(ports.ConversationSync))
			}
		}), sa, false, nil},
		{"COMP-012: the group root never changes", with(func(s *groupState) {
			s.extra = func(d metadata.Dictionary) metadata.Dictionary {
				return d.Set(metadata.ComponentGroupRootKey, make([]byte, 31))
			}
		}), sa, false, nil},
		{"COMP-012: an immutable component cannot be added", with(func(s *groupState) {
			s.extra = func(d metadata.Dictionary) metadata.Dictionary { return d.Set(0xBF00, []byte{1}) }
		}), sa, false, nil},
		{"COMP-182: a new leaf's inbox needs a GROUP_MEMBERSHIP entry", with(func(s *groupState) {
			s.members = append(s.members, nw)
			s.extra = func(d metadata.Dictionary) metadata.Dictionary {
				return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(map[string]*contentspb.GroupMembershipEntry_V1{
					"super": {SequenceId: 1}, "admin": {SequenceId: 1}, "member": {SequenceId: 1}}))
			}
		}), sa, false, nil},
		{"COMP-182: a removed inbox leaves GROUP_MEMBERSHIP", with(func(s *groupState) {
			s.members = s.members[:2]
			s.extra = func(d metadata.Dictionary) metadata.Dictionary {
				return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(map[string]*contentspb.GroupMembershipEntry_V1{
					"super": {SequenceId: 1}, "admin": {SequenceId: 1}, "member": {SequenceId: 1}}))
			}
		}), sa, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := check(t, base, c.after, c.by, c.proposals...)
			if c.permit && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.permit && !errors.Is(err, ErrNotPermitted) {
				t.Fatalf("permitted (err %v); want a refusal", err)
			}
		})
	}
}

// COMP-181: in a DM only the two inboxes hold leaves, nobody removes the
// other, and both may readd (GMOD-052) and raise the minimum version
// (FORK-063).
func TestCOMP181_DMPermissions(t *testing.T) {
	a, b := leaf(0, "a"), leaf(1, "b")
	base := groupState{ct: ports.ConversationDM, dm: [2]string{"a", "b"}, members: []ports.Member{a, b}}
	third := base
	third.members = []ports.Member{a, b, leaf(2, "c")}
	if err := check(t, base, third, a); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("a third inbox joined a DM: %v", err)
	}
	second := base
	second.members = []ports.Member{a, b, leaf(2, "b")}
	if err := check(t, base, second, a); err != nil {
		t.Errorf("adding the other member's second installation refused: %v", err)
	}
	removed := base
	removed.members = []ports.Member{a}
	if err := check(t, base, removed, a); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("a DM member removed the other: %v", err)
	}
	if err := check(t, base, base, a, readdOf(b)...); err != nil {
		t.Errorf("a DM member's readd refused: %v", err)
	}
	raised := base
	raised.extra = func(d metadata.Dictionary) metadata.Dictionary {
		return d.Set(metadata.ComponentMinProtocol, []byte("1.6.0"))
	}
	if err := check(t, base, raised, b); err != nil {
		t.Errorf("a DM member raising the minimum version refused: %v", err)
	}
}

// COMP-180: only members commit; an external or new-member commit is
// refused.
func TestCOMP180_ExternalSenderRefused(t *testing.T) {
	s := groupState{ct: ports.ConversationGroup, superAdmins: []string{"a"}, members: []ports.Member{leaf(0, "a")}}
	v := s.view()
	ch, _ := Diff(v, v, nil)
	if err := Check(v, v, leaf(0, "a"), ports.SenderNewMemberCommit, ch); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("external commit = %v", err)
	}
}
