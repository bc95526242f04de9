package policy

import (
	"errors"
	"slices"
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
	return Check(Commit{Before: b, After: a, Sender: by, SenderType: ports.SenderMember, Proposals: proposals}, ch)
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
	if err := Check(Commit{Before: v, After: v, Sender: leaf(0, "a"), SenderType: ports.SenderNewMemberCommit}, ch); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("external commit = %v", err)
	}
}

// The two removal rules of COMP-180, each alone: in these commits nothing
// else than the removal breaks a rule, so each case fails when its rule is
// removed. A super admin is removed by a non-super-admin; a member is
// removed by a non-admin.
func TestCOMP180_RemovalRules(t *testing.T) {
	sa, sa2, ad := leaf(0, "super"), leaf(1, "super2"), leaf(2, "admin")
	mb, mb2 := leaf(3, "member"), leaf(4, "member2")
	base := groupState{ct: ports.ConversationGroup, superAdmins: []string{"super", "super2"}, admins: []string{"admin"}, name: "g",
		members: []ports.Member{sa, sa2, ad, mb, mb2}}
	// super's second installation goes; the super admin list stays.
	twice := base
	twice.members = append(slices.Clone(base.members), leaf(5, "super"))
	noSuper := twice
	noSuper.members = base.members
	if err := check(t, twice, noSuper, ad); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("an admin removed a super admin's installation: %v", err)
	}
	if err := check(t, twice, noSuper, sa2); err != nil {
		t.Errorf("a super admin may remove another's installation: %v", err)
	}
	noMember := base
	noMember.members = []ports.Member{sa, sa2, ad, mb}
	if err := check(t, base, noMember, mb); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("a member removed another member: %v", err)
	}
	if err := check(t, base, noMember, ad); err != nil {
		t.Errorf("an admin may remove a member: %v", err)
	}
}

// COMP-182: a GROUP_MEMBERSHIP entry whose identity sequence id is 0
// asserts nothing (JOIN-050) and is refused, though every other rule
// holds.
func TestCOMP182_MembershipSequenceIDZero(t *testing.T) {
	sa, mb := leaf(0, "super"), leaf(1, "member")
	base := groupState{ct: ports.ConversationGroup, superAdmins: []string{"super"}, name: "g", members: []ports.Member{sa}}
	zero := base
	zero.members = []ports.Member{sa, mb} // the super admin adds member, with an entry at 0
	zero.extra = func(d metadata.Dictionary) metadata.Dictionary {
		return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(map[string]*contentspb.GroupMembershipEntry_V1{
			"super": {SequenceId: 1}, "member": {SequenceId: 0}}))
	}
	if err := check(t, base, zero, sa); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("an entry with sequence id 0 = %v", err)
	}
}

// COMP-244: a proposal a commit includes by reference is judged by its
// proposer's role: a member's Remove of another member, rename, change of
// the super admin list or Add of an outsider, carried by a super admin's
// commit, is refused; the same changes proposed by a super admin, and a
// member's Update or SelfRemove, are accepted.
func TestCOMP244_ProposalsByReferenceJudgedByProposer(t *testing.T) {
	sa, mb, mb2, out := leaf(0, "super"), leaf(1, "member"), leaf(2, "member2"), leaf(3, "outsider")
	base := groupState{ct: ports.ConversationGroup, superAdmins: []string{"super"}, name: "g", members: []ports.Member{sa, mb, mb2}}
	v := base.view()
	renamed := base
	renamed.name = "h"
	promoted := base
	promoted.superAdmins = []string{"super", "member"}
	for _, c := range []struct {
		name   string
		p      ports.Proposal
		permit bool
	}{
		{"a member's Remove of another", ports.Proposal{Type: ports.ProposalRemove, Removed: mb2}, false},
		{"a member's rename", ports.Proposal{Type: ports.ProposalGroupContextExtensions, Extensions: renamed.view().Extensions}, false},
		{"a member makes itself super admin", ports.Proposal{Type: ports.ProposalGroupContextExtensions, Extensions: promoted.view().Extensions}, false},
		{"a member adds an outsider", ports.Proposal{Type: ports.ProposalAdd, Added: out}, false},
		{"a member's PreSharedKey", ports.Proposal{Type: ports.ProposalPreSharedKey}, false},
		{"a member's Update", ports.Proposal{Type: ports.ProposalUpdate, Updated: mb}, true},
		{"a member's SelfRemove", ports.Proposal{Type: ports.ProposalSelfRemove, Removed: mb}, true},
		{"a member removes its own inbox's other installation", ports.Proposal{Type: ports.ProposalRemove, Removed: leaf(5, "member")}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.p
			p.ByReference, p.SenderType, p.Sender = true, ports.SenderMember, mb
			err := checkByReference(mustRoles(t, v), v, []ports.Proposal{p})
			if c.permit != (err == nil) || (err != nil && !errors.Is(err, ErrNotPermitted)) {
				t.Fatalf("by reference from a member: %v, want permitted %v", err, c.permit)
			}
			if got := AllowedByReference(v, p); got != c.permit {
				t.Fatalf("AllowedByReference = %v, want %v", got, c.permit)
			}
			p.Sender = sa
			if c.p.Type != ports.ProposalPreSharedKey && c.p.Type != ports.ProposalSelfRemove && c.p.Type != ports.ProposalUpdate {
				if err := checkByReference(mustRoles(t, v), v, []ports.Proposal{p}); err != nil {
					t.Fatalf("the same proposal by the super admin refused: %v", err)
				}
			}
		})
	}
	// Through Check: the super admin's commit carrying the member's Remove.
	after := base
	after.members = []ports.Member{sa, mb}
	err := check(t, base, after, sa, ports.Proposal{Type: ports.ProposalRemove, Removed: mb2, ByReference: true, SenderType: ports.SenderMember, Sender: mb})
	if !errors.Is(err, ErrNotPermitted) {
		t.Fatalf("a super admin's commit carrying a member's Remove by reference = %v", err)
	}
	p := ports.Proposal{Type: ports.ProposalRemove, Removed: mb2, ByReference: true, SenderType: ports.SenderExternal}
	if err := check(t, base, after, sa, p); !errors.Is(err, ErrNotPermitted) {
		t.Fatalf("an external sender's proposal by reference = %v", err)
	}
}

func mustRoles(t *testing.T, v ports.GroupView) Roles {
	t.Helper()
	r, err := RolesOf(v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// COMP-246: a key update never changes a leaf's credential: the path's
// or an Update's leaf that names another inbox, or another signature key,
// at the same leaf index is refused; a leaf a Remove freed and an Add
// filled may hold another.
func TestCOMP246_LeafKeepsItsCredential(t *testing.T) {
	sa, mb := leaf(0, "super"), leaf(1, "member")
	base := groupState{ct: ports.ConversationGroup, superAdmins: []string{"super"}, name: "g", members: []ports.Member{sa, mb}}
	stolen := base
	stolen.members = []ports.Member{sa, {LeafIndex: 1, InboxID: "super", SignatureKey: mb.SignatureKey}}
	if err := check(t, base, stolen, mb); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("a member's path leaf naming the super admin's inbox = %v", err)
	}
	rekeyed := base
	rekeyed.members = []ports.Member{sa, {LeafIndex: 1, InboxID: "member", SignatureKey: []byte("other key")}}
	if err := check(t, base, rekeyed, mb, ports.Proposal{Type: ports.ProposalUpdate, Updated: rekeyed.members[1]}); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("an Update leaf with another signature key = %v", err)
	}
	refilled := base
	refilled.members = []ports.Member{sa, leaf(1, "member2")}
	err := check(t, base, refilled, sa, ports.Proposal{Type: ports.ProposalRemove, Removed: mb}, ports.Proposal{Type: ports.ProposalAdd, Added: leaf(1, "member2")})
	if err != nil {
		t.Errorf("a leaf freed by a Remove and filled by an Add = %v", err)
	}
}

// COMP-247: a commit changes an inbox's GROUP_MEMBERSHIP entry only when
// it changes that inbox's installations or the inbox is the committer's;
// an entry never moves back, and it names an identity update before the
// commit.
func TestCOMP247_MembershipEntriesFollowTheOperation(t *testing.T) {
	sa, mb, mb2 := leaf(0, "super"), leaf(1, "member"), leaf(2, "member2")
	entries := func(seqs map[string]uint64) func(metadata.Dictionary) metadata.Dictionary {
		return func(d metadata.Dictionary) metadata.Dictionary {
			m := map[string]*contentspb.GroupMembershipEntry_V1{}
			for inbox, s := range seqs {
				m[inbox] = &contentspb.GroupMembershipEntry_V1{SequenceId: s}
			}
			return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(m))
		}
	}
	base := groupState{ct: ports.ConversationGroup, superAdmins: []string{"super"}, name: "g", members: []ports.Member{sa, mb, mb2},
		extra: entries(map[string]uint64{"super": 5, "member": 5, "member2": 5})}
	with := func(seqs map[string]uint64) groupState { s := base; s.extra = entries(seqs); return s }
	commit := func(after groupState, by ports.Member, seq uint64, ps ...ports.Proposal) error {
		b, a := base.view(), after.view()
		ch, err := Diff(b, a, ps)
		if err != nil {
			t.Fatal(err)
		}
		return Check(Commit{Before: b, After: a, Sender: by, SenderType: ports.SenderMember, Proposals: ps, SequenceID: seq}, ch)
	}
	if err := commit(with(map[string]uint64{"super": 5, "member": 9, "member2": 5}), mb2, 100); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("a member rewrote another inbox's entry: %v", err)
	}
	if err := commit(with(map[string]uint64{"super": 5, "member": 5, "member2": 9}), mb2, 100); err != nil {
		t.Errorf("a member refreshed its own entry: %v", err)
	}
	if err := commit(with(map[string]uint64{"super": 5, "member": 5, "member2": 4}), mb2, 100); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("an entry moved back: %v", err)
	}
	if err := commit(with(map[string]uint64{"super": 5, "member": 5, "member2": 1 << 40}), mb2, 100); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("an entry at 2^40 past the commit's id: %v", err)
	}
	readd := []ports.Proposal{{Type: ports.ProposalRemove, Removed: mb}, {Type: ports.ProposalAdd, Added: mb}}
	if err := commit(with(map[string]uint64{"super": 5, "member": 7, "member2": 5}), sa, 100, readd...); err != nil {
		t.Errorf("a readd refreshed the readded inbox's entry: %v", err)
	}
}

// COMP-248: after a commit the super admin list is not empty and names
// only members, so roles can still change and joiners accept Welcomes
// (JOIN-060).
func TestCOMP248_SuperAdminListStaysGovernable(t *testing.T) {
	sa, mb := leaf(0, "super"), leaf(1, "member")
	base := groupState{ct: ports.ConversationGroup, superAdmins: []string{"super"}, name: "g", members: []ports.Member{sa, mb}}
	empty := base
	empty.superAdmins = nil
	if err := check(t, base, empty, sa); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("a super admin emptied the list: %v", err)
	}
	foreign := base
	foreign.superAdmins = []string{"super", "stranger"}
	if err := check(t, base, foreign, sa); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("a super admin listed a non-member: %v", err)
	}
	shared := base
	shared.superAdmins = []string{"super", "member"}
	if err := check(t, base, shared, sa); err != nil {
		t.Errorf("a super admin made a member super admin: %v", err)
	}
}
