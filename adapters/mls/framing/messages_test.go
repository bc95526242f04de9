package framing_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// messageFields maps each field of messages.json to a fresh value of the
// structure it holds.
var messageFields = []struct {
	name   string
	newVal func() codec.Unmarshaler
	wf     framing.WireFormat // expected wire format for MLSMessage fields, 0 otherwise
}{
	{"mls_welcome", func() codec.Unmarshaler { return new(framing.MLSMessage) }, framing.WireWelcome},
	{"mls_group_info", func() codec.Unmarshaler { return new(framing.MLSMessage) }, framing.WireGroupInfo},
	{"mls_key_package", func() codec.Unmarshaler { return new(framing.MLSMessage) }, framing.WireKeyPackage},
	{"ratchet_tree", func() codec.Unmarshaler { return new(message.RatchetTree) }, 0},
	{"group_secrets", func() codec.Unmarshaler { return new(message.GroupSecrets) }, 0},
	{"add_proposal", func() codec.Unmarshaler { return new(message.Add) }, 0},
	{"update_proposal", func() codec.Unmarshaler { return new(message.Update) }, 0},
	{"remove_proposal", func() codec.Unmarshaler { return new(message.Remove) }, 0},
	{"pre_shared_key_proposal", func() codec.Unmarshaler { return new(message.PreSharedKey) }, 0},
	{"re_init_proposal", func() codec.Unmarshaler { return new(message.ReInit) }, 0},
	{"external_init_proposal", func() codec.Unmarshaler { return new(message.ExternalInit) }, 0},
	{"group_context_extensions_proposal", func() codec.Unmarshaler { return new(message.GroupContextExtensions) }, 0},
	{"commit", func() codec.Unmarshaler { return new(message.Commit) }, 0},
	{"public_message_application", func() codec.Unmarshaler { return new(framing.MLSMessage) }, framing.WirePublicMessage},
	{"public_message_proposal", func() codec.Unmarshaler { return new(framing.MLSMessage) }, framing.WirePublicMessage},
	{"public_message_commit", func() codec.Unmarshaler { return new(framing.MLSMessage) }, framing.WirePublicMessage},
	{"private_message", func() codec.Unmarshaler { return new(framing.MLSMessage) }, framing.WirePrivateMessage},
}

// TestMessagesVectors decodes and re-encodes byte-exact every structure of
// every case of messages.json (§§6–12). Encodings are suite-independent, so
// all 300 cases run.
func TestMessagesVectors(t *testing.T) {
	var cases []map[string]vectors.Hex
	vectors.Load(t, "messages.json", &cases)
	if len(cases) == 0 {
		t.Fatal("messages.json has no cases")
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("messages/%d", i), func(t *testing.T) {
			for _, f := range messageFields {
				in, ok := c[f.name]
				if !ok {
					t.Fatalf("case lacks %s", f.name)
				}
				v := f.newVal()
				if err := codec.Unmarshal(in, v); err != nil {
					t.Fatalf("%s: decode: %v", f.name, err)
				}
				if m, ok := v.(*framing.MLSMessage); ok && m.WireFormat != f.wf {
					t.Fatalf("%s: wire format %d, want %d", f.name, m.WireFormat, f.wf)
				}
				out, err := codec.Marshal(v.(codec.Marshaler))
				if err != nil {
					t.Fatalf("%s: encode: %v", f.name, err)
				}
				if !bytes.Equal(out, in) {
					t.Fatalf("%s: re-encoding differs\n got %x\nwant %x", f.name, out, in)
				}
				// Every strict prefix must fail to decode, without panicking.
				if err := codec.Unmarshal(in[:len(in)-1], f.newVal()); err == nil && len(in) > 0 {
					t.Fatalf("%s: truncated input decoded", f.name)
				}
			}
		})
	}
}
