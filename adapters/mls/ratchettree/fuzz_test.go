package ratchettree_test

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// FuzzImportValidate imports hostile ratchet trees and runs every query
// and the full validation on them: errors are fine, panics are not.
func FuzzImportValidate(f *testing.F) {
	if p, ok := vectors.Path("tree-validation.json"); ok {
		if data, err := os.ReadFile(p); err == nil {
			var cases []map[string]any
			if json.Unmarshal(data, &cases) == nil {
				for i, c := range cases {
					if s, ok := c["tree"].(string); ok && i%4 == 0 && len(s) < 8000 {
						if b, err := hex.DecodeString(s); err == nil {
							f.Add(b)
						}
					}
				}
			}
		}
	}
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	f.Fuzz(func(t *testing.T, in []byte) {
		var rt message.RatchetTree
		if codec.Unmarshal(in, &rt) != nil {
			return
		}
		tree, err := ratchettree.Import(s, rt)
		if err != nil || tree.Width() > 31 { // bound the work per input
			return
		}
		for x := 0; x < tree.Width(); x++ {
			_ = tree.Resolution(treemath.NodeIndex(x))
			_, _ = tree.NodeHash(treemath.NodeIndex(x))
		}
		for _, l := range tree.Members() {
			_ = tree.FilteredDirectPath(l)
		}
		_ = tree.Validate(&ratchettree.ValidateOptions{GroupID: []byte("g")})
		_ = tree.VerifyParentHashes()
		c := tree.Clone()
		if m := c.Members(); len(m) > 0 {
			_ = c.RemoveLeaf(m[len(m)-1])
		}
		_, _ = c.AddLeaf(&message.LeafNode{})
	})
}
