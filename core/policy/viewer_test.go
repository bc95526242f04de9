package policy

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

func viewers(inboxes ...string) func(metadata.Dictionary) metadata.Dictionary {
	return func(d metadata.Dictionary) metadata.Dictionary {
		return d.Set(metadata.ComponentViewerList, metadata.EncodeInboxList(inboxes))
	}
}

// viewerGroup is a group with a super admin, an admin, a member and a
// viewer.
func viewerGroup() (groupState, ports.Member, ports.Member, ports.Member, ports.Member) {
	sa, ad, mb, vw := leaf(0, "super"), leaf(1, "admin"), leaf(2, "member"), leaf(3, "viewer")
	return groupState{ct: ports.ConversationGroup, superAdmins: []string{"super"}, admins: []string{"admin"}, name: "g",
		members: []ports.Member{sa, ad, mb, vw}, extra: viewers("viewer")}, sa, ad, mb, vw
}

// TestCOMP389_ViewerCommitsOnlyItsOwnLeaf: a viewer's commit updates its
// own leaf (an empty or path-only commit) and nothing else: no add, not
// even of its own installation, no removal, no metadata, no proposal by
// reference.
func TestCOMP389_ViewerCommitsOnlyItsOwnLeaf(t *testing.T) {
	base, sa, _, mb, vw := viewerGroup()
	with := func(f func(*groupState)) groupState {
		s := base
		s.members = append([]ports.Member(nil), base.members...)
		f(&s)
		return s
	}
	if err := check(t, base, base, vw); err != nil {
		t.Fatalf("a viewer's self-update: %v", err)
	}
	newLeaf := vw
	newLeaf.EncryptionKey = []byte("fresh")
	if err := check(t, base, with(func(s *groupState) { s.members[3] = newLeaf }), vw); err != nil {
		t.Fatalf("a viewer's path: %v", err)
	}
	for _, c := range []struct {
		name      string
		after     groupState
		proposals []ports.Proposal
	}{
		{"renames the group", with(func(s *groupState) { s.name = "mine" }), nil},
		{"adds its own installation", with(func(s *groupState) { s.members = append(s.members, leaf(4, "viewer")) }), nil},
		{"adds another inbox", with(func(s *groupState) { s.members = append(s.members, leaf(4, "new")) }), nil},
		{"removes a member", with(func(s *groupState) {
			s.members = []ports.Member{sa, s.members[1], vw}
		}), nil},
		{"commits another member's update by reference", base, []ports.Proposal{{Type: ports.ProposalUpdate, ByReference: true,
			SenderType: ports.SenderMember, Sender: mb, Updated: mb}}},
		{"drops itself from the viewer list", with(func(s *groupState) { s.extra = viewers() }), nil},
	} {
		err := check(t, base, c.after, vw, c.proposals...)
		if !errors.Is(err, ErrNotPermitted) {
			t.Errorf("a viewer %s: %v, want ErrNotPermitted", c.name, err)
		}
	}
	// A viewer's own proposals ride on nobody's commit but as the
	// update of its leaf or its leaving.
	before := base.view()
	for _, p := range []struct {
		p     ports.Proposal
		allow bool
	}{
		{ports.Proposal{Type: ports.ProposalUpdate, Updated: vw}, true},
		{ports.Proposal{Type: ports.ProposalSelfRemove, Removed: vw}, true},
		{ports.Proposal{Type: ports.ProposalAdd, Added: leaf(4, "viewer")}, false},
		{ports.Proposal{Type: ports.ProposalRemove, Removed: mb}, false},
	} {
		p.p.SenderType, p.p.Sender, p.p.ByReference = ports.SenderMember, vw, true
		if got := AllowedByReference(before, p.p); got != p.allow {
			t.Errorf("a viewer's proposal of type %d by reference: allowed %v, want %v", p.p.Type, got, p.allow)
		}
	}
}

// TestCOMP387_ViewerListChanges: super admins change roles; an admin
// lists an inbox it adds as a viewer and drops a viewer it removes, and
// nothing else; the viewer list names members only, none of them an
// admin; a DM has none.
func TestCOMP387_ViewerListChanges(t *testing.T) {
	base, sa, ad, mb, _ := viewerGroup()
	with := func(f func(*groupState)) groupState {
		s := base
		s.members = append([]ports.Member(nil), base.members...)
		f(&s)
		return s
	}
	nw := leaf(4, "new")
	for _, c := range []struct {
		name   string
		after  groupState
		by     ports.Member
		permit bool
	}{
		{"a super admin makes a member a viewer", with(func(s *groupState) { s.extra = viewers("viewer", "member") }), sa, true},
		{"a super admin makes a viewer a member", with(func(s *groupState) { s.extra = viewers() }), sa, true},
		{"a super admin makes a viewer an admin", with(func(s *groupState) {
			s.extra, s.admins = viewers(), []string{"admin", "viewer"}
		}), sa, true},
		{"an admin adds an inbox as a viewer", with(func(s *groupState) {
			s.members, s.extra = append(s.members, nw), viewers("viewer", "new")
		}), ad, true},
		{"an admin removes a viewer", with(func(s *groupState) { s.members, s.extra = s.members[:3], viewers() }), ad, true},
		{"an admin may not make a member a viewer", with(func(s *groupState) { s.extra = viewers("viewer", "member") }), ad, false},
		{"an admin may not make a viewer a member", with(func(s *groupState) { s.extra = viewers() }), ad, false},
		{"a member may not make another a viewer", with(func(s *groupState) { s.extra = viewers("viewer", "admin") }), mb, false},
		{"a member may not add an inbox as a viewer", with(func(s *groupState) {
			s.members, s.extra = append(s.members, nw), viewers("viewer", "new")
		}), mb, false},
		{"a viewer stays listed after its removal", with(func(s *groupState) { s.members = s.members[:3] }), ad, false},
		{"a viewer may not also be an admin", with(func(s *groupState) { s.admins = []string{"admin", "viewer"} }), sa, false},
		{"a non-member may not be listed", with(func(s *groupState) { s.extra = viewers("viewer", "outsider") }), sa, false},
	} {
		err := check(t, base, c.after, c.by)
		if (err == nil) != c.permit {
			t.Errorf("%s: %v, permitted want %v", c.name, err, c.permit)
		}
		if err != nil && !errors.Is(err, ErrNotPermitted) {
			t.Errorf("%s: %v does not wrap ErrNotPermitted", c.name, err)
		}
	}
	one, two := leaf(0, "one"), leaf(1, "two")
	dm := groupState{ct: ports.ConversationDM, dm: [2]string{"one", "two"}, members: []ports.Member{one, two}}
	dmv := dm
	dmv.extra = viewers("two")
	if err := check(t, dm, dmv, one); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("a DM member lists the other as a viewer: %v", err)
	}
	if r, _ := RolesOf(dmv.view()); r.Viewer("two") {
		t.Error("a DM has no viewers")
	}
}

// TestCOMP388_ViewersSendOnlyLeaveRequests: MaySend refuses a viewer's
// application message and lets its leave request and every other
// member's message through.
func TestCOMP388_ViewersSendOnlyLeaveRequests(t *testing.T) {
	base, _, _, _, _ := viewerGroup()
	r, err := RolesOf(base.view())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Viewer("viewer") || r.Viewer("member") {
		t.Fatalf("viewers %v", r.Viewers)
	}
	if err := MaySend(r, "viewer", ports.MessageApplication); !errors.Is(err, ErrMessageNotPermitted) {
		t.Errorf("a viewer's message: %v", err)
	}
	for _, c := range []struct {
		inbox string
		kind  ports.MessageKind
	}{{"viewer", ports.MessageLeaveRequest}, {"member", ports.MessageApplication}, {"super", ports.MessageApplication}} {
		if err := MaySend(r, c.inbox, c.kind); err != nil {
			t.Errorf("%s sends kind %d: %v", c.inbox, c.kind, err)
		}
	}
}
