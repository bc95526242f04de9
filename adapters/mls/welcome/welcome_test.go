package welcome_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
	"github.com/regroup-mls/regroup/adapters/mls/welcome"
)

// TestWelcomeVectors runs every case of welcome.json (§12.4.3.1): find and
// decrypt the GroupSecrets, decrypt the GroupInfo, verify its signature and
// confirmation tag; then re-seal it and open the result again.
func TestWelcomeVectors(t *testing.T) {
	var cases []struct {
		Suite      uint16      `json:"cipher_suite"`
		InitPriv   vectors.Hex `json:"init_priv"`
		SignerPub  vectors.Hex `json:"signer_pub"`
		KeyPackage vectors.Hex `json:"key_package"`
		Welcome    vectors.Hex `json:"welcome"`
	}
	vectors.Load(t, "welcome.json", &cases)
	for i, c := range cases {
		t.Run(fmt.Sprintf("welcome/%d", i), func(t *testing.T) {
			s, err := ciphersuite.Lookup(ciphersuite.ID(c.Suite))
			if err != nil {
				t.Skipf("suite %d not implemented by regroup: %v", c.Suite, err)
			}
			kpm, err := framing.Decode(c.KeyPackage)
			if err != nil || kpm.KeyPackage == nil {
				t.Fatalf("key package: %v", err)
			}
			wm, err := framing.Decode(c.Welcome)
			if err != nil || wm.Welcome == nil {
				t.Fatalf("welcome: %v", err)
			}
			kp := kpm.KeyPackage
			if err := kp.Verify(s); err != nil {
				t.Fatalf("key package signature: %v", err)
			}
			gs, err := welcome.OpenSecrets(s, wm.Welcome, kp, c.InitPriv)
			if err != nil {
				t.Fatal(err)
			}
			if len(gs.PSKs) != 0 {
				t.Fatalf("vector uses %d PSKs the file does not give", len(gs.PSKs))
			}
			gi, err := welcome.OpenGroupInfo(s, wm.Welcome, gs.JoinerSecret, nil)
			if err != nil {
				t.Fatal(err)
			}
			e, err := welcome.VerifyGroupInfo(s, gi, c.SignerPub, gs.JoinerSecret, nil)
			if err != nil {
				t.Fatal(err)
			}
			bad := *gi
			bad.ConfirmationTag = append([]byte{^gi.ConfirmationTag[0]}, gi.ConfirmationTag[1:]...)
			if _, err := welcome.VerifyGroupInfo(s, &bad, c.SignerPub, gs.JoinerSecret, nil); !errors.Is(err, welcome.ErrInvalid) {
				t.Fatalf("altered confirmation tag: %v", err)
			}
			// Seal the same GroupInfo again and open it.
			w2, err := welcome.Seal(s, gi, gs.JoinerSecret, e.WelcomeSecret, nil, []welcome.Recipient{{KeyPackage: kp}})
			if err != nil {
				t.Fatal(err)
			}
			gs2, err := welcome.OpenSecrets(s, w2, kp, c.InitPriv)
			if err != nil || !bytes.Equal(gs2.JoinerSecret, gs.JoinerSecret) {
				t.Fatalf("re-sealed secrets: %v", err)
			}
			gi2, err := welcome.OpenGroupInfo(s, w2, gs2.JoinerSecret, nil)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := codec.Marshal(gi)
			b, _ := codec.Marshal(gi2)
			if !bytes.Equal(a, b) {
				t.Fatal("re-sealed group info differs")
			}
			other := *kp
			other.InitKey = append([]byte{}, kp.InitKey...)
			other.InitKey[0] ^= 1
			if _, err := welcome.OpenSecrets(s, w2, &other, c.InitPriv); !errors.Is(err, welcome.ErrNotForMe) {
				t.Fatalf("other key package: %v", err)
			}
		})
	}
}
