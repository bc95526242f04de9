package group_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
)

type passiveCase struct {
	Suite        uint16 `json:"cipher_suite"`
	ExternalPSKs []struct {
		ID  vectors.Hex `json:"psk_id"`
		PSK vectors.Hex `json:"psk"`
	} `json:"external_psks"`
	KeyPackage                vectors.Hex `json:"key_package"`
	SignaturePriv             vectors.Hex `json:"signature_priv"`
	EncryptionPriv            vectors.Hex `json:"encryption_priv"`
	InitPriv                  vectors.Hex `json:"init_priv"`
	Welcome                   vectors.Hex `json:"welcome"`
	RatchetTree               vectors.Hex `json:"ratchet_tree"`
	InitialEpochAuthenticator vectors.Hex `json:"initial_epoch_authenticator"`
	Epochs                    []struct {
		Proposals          []vectors.Hex `json:"proposals"`
		Commit             vectors.Hex   `json:"commit"`
		EpochAuthenticator vectors.Hex   `json:"epoch_authenticator"`
	} `json:"epochs"`
}

// passiveFiles lists every passive-client-*.json file of the vectors.
func passiveFiles(t *testing.T) []string {
	dir, err := vectors.Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "passive-client-*.json"))
	if len(files) == 0 {
		var none []passiveCase
		vectors.Load(t, "passive-client-welcome.json", &none) // skips, or fails under CI
	}
	return files
}

func decode(t *testing.T, b []byte) *framing.MLSMessage {
	t.Helper()
	m, err := framing.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPassiveClientVectors runs every case of every passive-client-*.json
// file (§12.4.2, §12.4.3.1): join from the Welcome, then for each epoch
// cache its proposals and process its commit, comparing the epoch
// authenticator after each step.
func TestPassiveClientVectors(t *testing.T) {
	for _, path := range passiveFiles(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		var cases []passiveCase
		vectors.Load(t, filepath.Base(path), &cases)
		for i := range cases {
			c := &cases[i]
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
				s, err := ciphersuite.Lookup(ciphersuite.ID(c.Suite))
				if err != nil {
					t.Skipf("suite %d not implemented by regroup: %v", c.Suite, err)
				}
				runPassive(t, s, c)
			})
		}
	}
}

func runPassive(t *testing.T, s *ciphersuite.Suite, c *passiveCase) {
	kpm := decode(t, c.KeyPackage)
	wm := decode(t, c.Welcome)
	if kpm.KeyPackage == nil || wm.Welcome == nil {
		t.Fatal("key package or welcome has the wrong wire format")
	}
	psks := group.MapPSKStore{}
	for _, p := range c.ExternalPSKs {
		psks[string(p.ID)] = p.PSK
	}
	opts := &group.JoinOptions{
		KeyPackage: kpm.KeyPackage, InitPriv: c.InitPriv, EncryptionPriv: c.EncryptionPriv,
		SignaturePriv: c.SignaturePriv, PSKs: psks,
	}
	if c.RatchetTree != nil {
		if err := codec.Unmarshal(c.RatchetTree, &opts.Tree); err != nil {
			t.Fatal(err)
		}
	}
	g, err := group.Join(s, wm.Welcome, opts)
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	if !bytes.Equal(g.EpochAuthenticator(), c.InitialEpochAuthenticator) {
		t.Fatalf("epoch authenticator after join differs")
	}
	for n, e := range c.Epochs {
		for k, p := range e.Proposals {
			if err := g.HandleProposal(decode(t, p)); err != nil {
				t.Fatalf("epoch %d proposal %d: %v", n, k, err)
			}
		}
		if err := g.HandleCommit(decode(t, e.Commit)); err != nil {
			t.Fatalf("epoch %d commit: %v", n, err)
		}
		if !bytes.Equal(g.EpochAuthenticator(), e.EpochAuthenticator) {
			t.Fatalf("epoch %d: epoch authenticator differs", n)
		}
	}
}
