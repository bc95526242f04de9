package metadata

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

func TestMembershipRoundTripAndMalformed(t *testing.T) {
	in := map[string]*contentspb.GroupMembershipEntry_V1{
		"a": {SequenceId: 7, FailedInstallations: [][]byte{{1, 2}}},
		"b": {SequenceId: 9},
	}
	d := Dictionary{}.Set(ComponentGroupMembership, EncodeMembership(in))
	got, err := d.Membership()
	if err != nil || len(got) != 2 || got["a"].GetSequenceId() != 7 || len(got["a"].GetFailedInstallations()) != 1 || got["b"].GetSequenceId() != 9 {
		t.Fatalf("Membership = %v, %v", got, err)
	}
	// Deterministic: the same map always encodes to the same bytes, and
	// maps are iterated in random order.
	first := EncodeMembership(in)
	for i := 0; i < 20; i++ {
		if again := EncodeMembership(in); string(again) != string(first) {
			t.Fatal("EncodeMembership is not deterministic")
		}
	}
	if _, err := (Dictionary{}).Membership(); !errors.Is(err, ErrMissing) {
		t.Errorf("absent = %v, want ErrMissing", err)
	}
	// An entry without V1 is malformed, not an empty entry.
	noV1 := Dictionary{}.Set(ComponentGroupMembership, []byte{0x0a, 0x05, 0x0a, 0x01, 'x', 0x12, 0x00})
	if _, err := noV1.Membership(); !errors.Is(err, ErrMalformed) {
		t.Errorf("entry without V1 = %v, want ErrMalformed", err)
	}
	if _, err := (Dictionary{}.Set(ComponentGroupMembership, []byte{0xff})).Membership(); !errors.Is(err, ErrMalformed) {
		t.Errorf("garbage = %v, want ErrMalformed", err)
	}
}

// CONF-050: versions compare numerically part by part, so 1.10.0 is later
// than 1.6.0 although it sorts before it as a string.
func TestVersionCompare(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"1.6.0", "1.6.0", 0},
		{"1.10.0", "1.6.0", 1},
		{"1.5.9", "1.6.0", -1},
		{"2.0.0", "1.99.99", 1},
		{"1.6.1", "1.6.0", 1},
	} {
		a, err := ParseVersion(c.a)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := ParseVersion(c.b)
		if got := a.Compare(b); got != c.want {
			t.Errorf("%s vs %s = %d, want %d", c.a, c.b, got, c.want)
		}
		if a.String() != c.a {
			t.Errorf("String = %q, want %q", a.String(), c.a)
		}
	}
	for _, bad := range []string{"", "1.6", "1.6.0.0", "01.6.0", "1.-6.0", "1.6.x", "1.+6.0", "99999999999.0.0"} {
		if _, err := ParseVersion(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseVersion(%q) = %v, want ErrMalformed", bad, err)
		}
	}
	v, ok, err := Dictionary{}.Set(ComponentMinProtocol, []byte("1.6.0")).MinProtocolVersion()
	if err != nil || !ok || v != (Version{1, 6, 0}) {
		t.Errorf("MinProtocolVersion = %v, %v, %v", v, ok, err)
	}
	if _, ok, err := (Dictionary{}).MinProtocolVersion(); ok || err != nil {
		t.Errorf("absent MinProtocolVersion = %v, %v", ok, err)
	}
}

// COMP-021: the dm id does not depend on who created the DM.
func TestDMIDIsSymmetric(t *testing.T) {
	if DMID("b", "a") != "dm:a:b" || DMID("a", "b") != "dm:a:b" {
		t.Errorf("DMID = %q, %q", DMID("b", "a"), DMID("a", "b"))
	}
}

// Apply replaces the app_data_dictionary in place, keeps every other
// extension where it was, and appends the dictionary when there is none.
func TestApplyReplacesInPlace(t *testing.T) {
	d := Dictionary{}.Set(ComponentName, []byte("n"))
	want, _ := d.Extension()
	other := ports.Extension{Type: 0x000a, Data: []byte{1}}
	old := ports.Extension{Type: ExtensionAppDataDictionary, Data: []byte{0}}
	got, err := d.Apply([]ports.Extension{other, old, {Type: 0x000b}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Type != 0x000a || got[2].Type != 0x000b || string(got[1].Data) != string(want.Data) {
		t.Fatalf("Apply = %+v", got)
	}
	got, _ = d.Apply([]ports.Extension{other})
	if len(got) != 2 || got[1].Type != ExtensionAppDataDictionary {
		t.Fatalf("Apply without a dictionary = %+v; want it appended", got)
	}
}

// TestCOMP385_PolicyVersionComponent: the role policy version is two
// bytes, big-endian, never 0; absent is reported, not an error.
func TestCOMP385_PolicyVersionComponent(t *testing.T) {
	if _, ok, err := (Dictionary{}).PolicyVersion(); ok || err != nil {
		t.Fatalf("absent = %v, %v", ok, err)
	}
	for _, v := range []uint16{1, 2, 0x0102, 0xffff} {
		got, ok, err := Dictionary{}.Set(ComponentPolicyVersion, EncodePolicyVersion(v)).PolicyVersion()
		if !ok || err != nil || got != v {
			t.Fatalf("%d round-trips to %d, %v, %v", v, got, ok, err)
		}
	}
	for _, bad := range [][]byte{{}, {1}, {0, 0}, {0, 1, 0}} {
		if _, ok, err := (Dictionary{}.Set(ComponentPolicyVersion, bad)).PolicyVersion(); !ok || !errors.Is(err, ErrMalformed) {
			t.Errorf("%x = %v, %v, want ErrMalformed", bad, ok, err)
		}
	}
}

// TestCOMP387_ViewerList: the viewer list is an InboxList like the
// admin lists.
func TestCOMP387_ViewerList(t *testing.T) {
	d := Dictionary{}.Set(ComponentViewerList, EncodeInboxList([]string{"v1", "v2"}))
	if got, err := d.Viewers(); err != nil || len(got) != 2 || got[1] != "v2" {
		t.Fatalf("Viewers = %v, %v", got, err)
	}
	if _, err := (Dictionary{}).Viewers(); !errors.Is(err, ErrMissing) {
		t.Fatalf("absent = %v, want ErrMissing", err)
	}
	if _, err := (Dictionary{}.Set(ComponentViewerList, []byte{0xff})).Viewers(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("garbage = %v, want ErrMalformed", err)
	}
}

// FuzzRoleComponents: the role policy version and the viewer list decode
// any bytes a commit or Welcome carries without panicking, and a version
// that decodes re-encodes to the same bytes.
func FuzzRoleComponents(f *testing.F) {
	f.Add([]byte{0, 1})
	f.Add(EncodeInboxList([]string{"v"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := Dictionary{}.Set(ComponentPolicyVersion, data).Set(ComponentViewerList, data)
		if v, ok, err := d.PolicyVersion(); ok && err == nil && string(EncodePolicyVersion(v)) != string(data) {
			t.Fatalf("version %d from %x re-encodes to %x", v, data, EncodePolicyVersion(v))
		}
		_, _ = d.Viewers()
	})
}
