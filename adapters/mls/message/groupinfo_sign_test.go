package message_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// GroupInfoSignContent is the SignContent "GroupInfoTBS" (§5.1.2,
// §12.4.3) that encoding the GroupInfo again gives, for a GroupInfo whose
// extensions need each length header size (the ratchet tree of a large
// group is over 16 KiB), and for the GroupInfos of messages.json; a
// signature over it verifies, and one over another TBS does not.
func TestGroupInfoSignContentIsTheTBS(t *testing.T) {
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	priv, pub, err := s.GenerateSignatureKey()
	if err != nil {
		t.Fatal(err)
	}
	var encoded [][]byte
	for _, size := range []int{0, 63, 64, 16383, 16384, 200_000} {
		gi := &message.GroupInfo{
			GroupContext: message.GroupContext{Version: message.MLS10, CipherSuite: s.ID(), GroupID: []byte("g"), Epoch: 3,
				TreeHash: bytes.Repeat([]byte{1}, 32), ConfirmedTranscriptHash: bytes.Repeat([]byte{2}, 32)},
			Extensions:      message.Extensions{{Type: message.ExtRatchetTree, Data: bytes.Repeat([]byte{7}, size)}},
			ConfirmationTag: bytes.Repeat([]byte{3}, 32), Signer: 5,
		}
		if err := gi.Sign(s, priv); err != nil {
			t.Fatal(err)
		}
		b, err := codec.Marshal(gi)
		if err != nil {
			t.Fatal(err)
		}
		encoded = append(encoded, b)
	}
	encoded = append(encoded, seeds("mls_group_info", 4)...)
	for i, enc := range encoded {
		buf := append(make([]byte, message.GroupInfoHeadroom), enc...)
		var gi message.GroupInfo
		if err := codec.UnmarshalView(buf[message.GroupInfoHeadroom:], &gi); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		got, err := message.GroupInfoSignContent(buf, message.GroupInfoHeadroom, &gi)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		tbs, err := gi.TBS()
		if err != nil {
			t.Fatal(err)
		}
		want, err := ciphersuite.Labeled("GroupInfoTBS", len(tbs), func(w *codec.Writer) { w.Raw(tbs) })
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d: sign content differs from the labeled TBS", i)
		}
		if !bytes.Equal(buf[message.GroupInfoHeadroom:], enc) {
			t.Fatalf("case %d: the encoded GroupInfo changed", i)
		}
		if i < 6 { // signed here: the signature verifies over it, not over another TBS
			if err := gi.VerifySignContent(s, pub, got); err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			other := append([]byte{}, got...)
			other[len(other)-1] ^= 1
			if err := gi.VerifySignContent(s, pub, other); !errors.Is(err, ciphersuite.ErrBadSignature) {
				t.Fatalf("case %d: altered content: %v", i, err)
			}
		}
	}
	if _, err := message.GroupInfoSignContent(make([]byte, 40), message.GroupInfoHeadroom-1, &message.GroupInfo{}); err == nil {
		t.Fatal("too little headroom accepted")
	}
}
