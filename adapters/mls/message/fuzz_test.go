package message_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// messageCases holds messages.json, read once for all fuzz targets.
var messageCases = sync.OnceValue(func() []map[string]string {
	p, ok := vectors.Path("messages.json")
	if !ok {
		return nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	var cases []map[string]string
	if json.Unmarshal(data, &cases) != nil {
		return nil
	}
	return cases
})

// seeds returns the hex values of field in messages.json (first 30 cases),
// with skip bytes cut from the front; none when the vectors are absent.
func seeds(field string, skip int) [][]byte {
	var out [][]byte
	for i, c := range messageCases() {
		if i >= 30 {
			break
		}
		if b, err := hex.DecodeString(c[field]); err == nil && len(b) >= skip {
			out = append(out, b[skip:])
		}
	}
	return out
}

// fuzzRoundTrip checks that decoding never panics and that whatever decodes
// re-encodes to the same bytes (strict decoding leaves no freedom), with a
// copying Reader and a view Reader alike.
func fuzzRoundTrip[T any, P interface {
	*T
	codec.Marshaler
	codec.Unmarshaler
}](f *testing.F, seed [][]byte) {
	for _, s := range seed {
		f.Add(s)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		v, view := P(new(T)), P(new(T))
		err := codec.Unmarshal(in, v)
		// A view decoding accepts exactly the same inputs.
		if verr := codec.UnmarshalView(in, view); (err == nil) != (verr == nil) {
			t.Fatalf("copying decoder: %v; view decoder: %v", err, verr)
		}
		if err != nil {
			return
		}
		out, err := codec.Marshal(v)
		if err != nil {
			t.Fatalf("decoded value does not encode: %v", err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", in, out)
		}
		if vout, err := codec.Marshal(view); err != nil || !bytes.Equal(vout, in) {
			t.Fatalf("view decoding re-encodes differently: %v", err)
		}
	})
}

// FuzzKeyPackage fuzzes the KeyPackage decoder (§10).
func FuzzKeyPackage(f *testing.F) {
	fuzzRoundTrip[message.KeyPackage](f, append(seeds("add_proposal", 0), seeds("mls_key_package", 4)...))
}

// FuzzLeafNode fuzzes the LeafNode decoder (§7.2).
func FuzzLeafNode(f *testing.F) { fuzzRoundTrip[message.LeafNode](f, seeds("update_proposal", 0)) }

// FuzzGroupInfo fuzzes the GroupInfo decoder (§12.4.3).
func FuzzGroupInfo(f *testing.F) { fuzzRoundTrip[message.GroupInfo](f, seeds("mls_group_info", 4)) }

// FuzzGroupContext fuzzes the GroupContext decoder (§8.1).
func FuzzGroupContext(f *testing.F) {
	var gcs [][]byte
	for _, gi := range seeds("mls_group_info", 4) {
		var g message.GroupInfo
		if codec.Unmarshal(gi, &g) == nil {
			if b, err := codec.Marshal(&g.GroupContext); err == nil {
				gcs = append(gcs, b)
			}
		}
	}
	fuzzRoundTrip[message.GroupContext](f, gcs)
}

// FuzzWelcome fuzzes the Welcome decoder (§12.4.3.1).
func FuzzWelcome(f *testing.F) { fuzzRoundTrip[message.Welcome](f, seeds("mls_welcome", 4)) }

// FuzzGroupSecrets fuzzes the GroupSecrets decoder (§12.4.3.1).
func FuzzGroupSecrets(f *testing.F) {
	fuzzRoundTrip[message.GroupSecrets](f, seeds("group_secrets", 0))
}

// FuzzRatchetTree fuzzes the ratchet_tree extension decoder (§12.4.3.3).
func FuzzRatchetTree(f *testing.F) { fuzzRoundTrip[message.RatchetTree](f, seeds("ratchet_tree", 0)) }

// FuzzCommit fuzzes the Commit and UpdatePath decoders (§12.4, §7.6).
func FuzzCommit(f *testing.F) { fuzzRoundTrip[message.Commit](f, seeds("commit", 0)) }

// FuzzProposal fuzzes the Proposal decoder with every proposal type (§12.1).
func FuzzProposal(f *testing.F) {
	var all [][]byte
	for typ, field := range map[message.ProposalType]string{
		message.ProposalAdd: "add_proposal", message.ProposalUpdate: "update_proposal",
		message.ProposalRemove: "remove_proposal", message.ProposalPreSharedKey: "pre_shared_key_proposal",
		message.ProposalReInit: "re_init_proposal", message.ProposalExternalInit: "external_init_proposal",
		message.ProposalGroupContextExtensions: "group_context_extensions_proposal",
	} {
		for _, s := range seeds(field, 0) {
			all = append(all, append(binary.BigEndian.AppendUint16(nil, uint16(typ)), s...))
		}
	}
	fuzzRoundTrip[message.Proposal](f, all)
}
