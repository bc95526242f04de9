package policy

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

func withVersion(v uint16) func(metadata.Dictionary) metadata.Dictionary {
	return func(d metadata.Dictionary) metadata.Dictionary {
		return d.Set(metadata.ComponentPolicyVersion, metadata.EncodePolicyVersion(v))
	}
}

// knowing makes the package know the versions vs for the test.
func knowing(t *testing.T, vs ...uint16) {
	old := Versions
	Versions = vs
	t.Cleanup(func() { Versions = old })
}

// TestCOMP386_UnknownPolicyVersionRefused: a commit whose state before or
// after it states a role policy version this package does not know is
// refused with an *UnknownVersionError naming the version, whoever
// commits it; a malformed version is refused as not permitted.
func TestCOMP386_UnknownPolicyVersionRefused(t *testing.T) {
	sa, mb := leaf(0, "super"), leaf(1, "member")
	base := groupState{ct: ports.ConversationGroup, superAdmins: []string{"super"}, name: "g", members: []ports.Member{sa, mb}}
	v := func(n uint16) groupState { s := base; s.extra = withVersion(n); return s }
	for _, c := range []struct {
		name          string
		before, after groupState
		want          uint16
	}{
		{"a super admin moves the group to version 2", v(1), v(2), 2},
		{"a self-update in a group at version 7", v(7), v(7), 7},
		{"a move from an unknown version back to 1", v(9), v(1), 9},
	} {
		err := check(t, c.before, c.after, sa)
		var u *UnknownVersionError
		if !errors.As(err, &u) || u.Version != c.want || !errors.Is(err, ErrUnknownVersion) {
			t.Errorf("%s: %v, want an UnknownVersionError for %d", c.name, err, c.want)
		}
	}
	malformed := base
	malformed.extra = func(d metadata.Dictionary) metadata.Dictionary {
		return d.Set(metadata.ComponentPolicyVersion, []byte{0, 0})
	}
	if err := check(t, base, malformed, sa); !errors.Is(err, ErrNotPermitted) || !errors.Is(err, metadata.ErrMalformed) {
		t.Errorf("version 0: %v, want ErrNotPermitted wrapping ErrMalformed", err)
	}
	if err := check(t, v(1), v(1), mb); err != nil {
		t.Errorf("a self-update at version 1: %v", err)
	}
}

// TestCOMP385_VersionChangeIsSuperAdmins: only a super admin (in a DM,
// either member) changes the role policy version — states it, moves it to
// another known version or drops it.
func TestCOMP385_VersionChangeIsSuperAdmins(t *testing.T) {
	knowing(t, 1, 2)
	sa, ad, mb := leaf(0, "super"), leaf(1, "admin"), leaf(2, "member")
	base := groupState{ct: ports.ConversationGroup, superAdmins: []string{"super"}, admins: []string{"admin"}, name: "g",
		members: []ports.Member{sa, ad, mb}}
	v := func(n uint16) groupState { s := base; s.extra = withVersion(n); return s }
	for _, c := range []struct {
		name          string
		before, after groupState
		by            ports.Member
		permit        bool
	}{
		{"a super admin states version 1", base, v(1), sa, true},
		{"a super admin moves to version 2", v(1), v(2), sa, true},
		{"a super admin drops the component", v(1), base, sa, true},
		{"an admin may not move to version 2", v(1), v(2), ad, false},
		{"an admin may not state version 1", base, v(1), ad, false},
		{"a member may not move to version 2", v(1), v(2), mb, false},
		{"a member may not drop the component", v(2), base, mb, false},
	} {
		err := check(t, c.before, c.after, c.by)
		if (err == nil) != c.permit {
			t.Errorf("%s: %v, permitted want %v", c.name, err, c.permit)
		}
		if err != nil && !errors.Is(err, ErrNotPermitted) {
			t.Errorf("%s: %v does not wrap ErrNotPermitted", c.name, err)
		}
	}
	one, two := leaf(0, "one"), leaf(1, "two")
	dm := groupState{ct: ports.ConversationDM, dm: [2]string{"one", "two"}, members: []ports.Member{one, two}}
	dm2 := dm
	dm2.extra = withVersion(2)
	if err := check(t, dm, dm2, two); err != nil {
		t.Errorf("a DM member moves the DM to version 2: %v", err)
	}
}

// recordedCommit is a commit as a member processed it, recorded with the
// client of the build before the role policy version existed.
type recordedCommit struct {
	Before, After ports.GroupView
	Sender        ports.Member
	SenderType    ports.SenderType
	Proposals     []ports.Proposal
}

// TestCOMP386_GroupsWithoutVersionAreVersion1 loads the states of a group
// recorded before the component existed (testdata: created by one
// client, renamed, a member added, the admin list set, a member's key
// update, as a member processed them): every state reads as version 1
// and every commit passes Check as it did then.
func TestCOMP386_GroupsWithoutVersionAreVersion1(t *testing.T) {
	b, err := os.ReadFile("testdata/commits-without-policy-version.json")
	if err != nil {
		t.Fatal(err)
	}
	var commits []recordedCommit
	if err := json.Unmarshal(b, &commits); err != nil {
		t.Fatal(err)
	}
	if len(commits) < 4 {
		t.Fatalf("%d recorded commits", len(commits))
	}
	for _, c := range commits {
		for _, v := range []ports.GroupView{c.Before, c.After} {
			d, err := metadata.FromExtensions(v.Extensions)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := d.Get(metadata.ComponentPolicyVersion); ok {
				t.Fatal("the recorded state carries a policy version component")
			}
			if got, err := VersionOf(v); err != nil || got != LegacyVersion || LegacyVersion != 1 {
				t.Fatalf("epoch %d reads version %d, %v", v.Epoch, got, err)
			}
		}
		ch, err := Diff(c.Before, c.After, c.Proposals)
		if err == nil {
			err = Check(Commit{Before: c.Before, After: c.After, Sender: c.Sender, SenderType: c.SenderType, Proposals: c.Proposals}, ch)
		}
		if err != nil {
			t.Fatalf("recorded commit from epoch %d: %v", c.Before.Epoch, err)
		}
	}
}

// FuzzVersionAndRoles: a group context's app_data_dictionary, as a
// Welcome or a commit carries it, never makes the version and role
// readers panic, and an unknown version is always reported as one.
func FuzzVersionAndRoles(f *testing.F) {
	base, _, _, _, _ := viewerGroup()
	f.Add(base.view().Extensions[0].Data)
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, data []byte) {
		v := ports.GroupView{Extensions: []ports.Extension{{Type: metadata.ExtensionAppDataDictionary, Data: data}}}
		got, err := VersionOf(v)
		var u *UnknownVersionError
		if errors.As(err, &u) && (Known(got) || u.Version != got) {
			t.Fatalf("version %d reported unknown as %d", got, u.Version)
		}
		if r, err := RolesOf(v); err == nil {
			for _, inbox := range r.Viewers {
				if MaySend(r, inbox, ports.MessageApplication) == nil && r.ConversationType != ports.ConversationDM {
					t.Fatalf("viewer %q may send", inbox)
				}
			}
		}
	})
}
