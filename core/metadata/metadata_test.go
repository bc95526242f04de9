package metadata

import (
	"bytes"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

func TestRoundTrip(t *testing.T) {
	var d Dictionary
	d = d.Set(ComponentGroupRootKey, bytes.Repeat([]byte{7}, 32))
	d = d.Set(ComponentSuperAdminList, EncodeInboxList([]string{"a", "b"}))
	d = d.Set(ComponentConversationType, EncodeConversationType(ports.ConversationGroup))
	d = d.Set(ComponentDMMembers, EncodeDMMembers("x", "y"))
	d = d.Set(ComponentName, bytes.Repeat([]byte{1}, 300)) // two-byte length
	ext, err := d.Extension()
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromExtensions([]ports.Extension{{Type: 1, Data: []byte{9}}, ext})
	if err != nil {
		t.Fatal(err)
	}
	if admins, err := got.SuperAdmins(); err != nil || len(admins) != 2 || admins[1] != "b" {
		t.Fatalf("super admins %v %v", admins, err)
	}
	if ct, err := got.ConversationType(); err != nil || ct != ports.ConversationGroup {
		t.Fatalf("type %v %v", ct, err)
	}
	if a, b, err := got.DMMembers(); err != nil || a != "x" || b != "y" {
		t.Fatalf("dm %v %v %v", a, b, err)
	}
	if r, err := got.GroupRootKey(); err != nil || r[0] != 7 {
		t.Fatalf("root %v", err)
	}
	for i := 1; i < len(got.Components); i++ {
		if got.Components[i-1].ID >= got.Components[i].ID {
			t.Fatal("components not sorted")
		}
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"truncated vector", []byte{5, 0x80}},
		{"trailing bytes", []byte{0, 0}},
		{"non-minimal length", []byte{0x40, 0x00}},
		{"prefix 0b11", []byte{0xc0}},
		{"component id truncated", []byte{1, 0x80}},
		{"out of order", []byte{6, 0x80, 0x02, 0, 0x80, 0x01, 0}},
		{"repeated", []byte{6, 0x80, 0x01, 0, 0x80, 0x01, 0}},
	}
	for _, c := range cases {
		if _, err := Parse(c.data); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", c.name, err)
		}
	}
	if _, err := FromExtensions(nil); !errors.Is(err, ErrMissing) {
		t.Errorf("absent extension: %v", err)
	}
	d, _ := Parse([]byte{0})
	if _, err := d.SuperAdmins(); !errors.Is(err, ErrMissing) {
		t.Errorf("absent component: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{6, 0x80, 0x01, 3, 1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data)
		if err != nil {
			return
		}
		out, err := Encode(d)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("re-encoding differs: %x vs %x", out, data)
		}
	})
}
