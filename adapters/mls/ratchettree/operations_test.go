package ratchettree_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// TestTreeOperationsVectors runs every case of tree-operations.json
// (§7.7, §7.8, §12.1.1–12.1.3): it applies the Add, Update or Remove to
// the tree and compares the resulting tree and tree hashes. The Update's
// leaf signature cannot be checked there (the file has no group_id).
func TestTreeOperationsVectors(t *testing.T) {
	var cases []struct {
		Suite          uint16      `json:"cipher_suite"`
		TreeBefore     vectors.Hex `json:"tree_before"`
		Proposal       vectors.Hex `json:"proposal"`
		ProposalSender uint32      `json:"proposal_sender"`
		TreeHashBefore vectors.Hex `json:"tree_hash_before"`
		TreeAfter      vectors.Hex `json:"tree_after"`
		TreeHashAfter  vectors.Hex `json:"tree_hash_after"`
	}
	vectors.Load(t, "tree-operations.json", &cases)
	for i, c := range cases {
		t.Run(fmt.Sprintf("tree-operations/%d", i), func(t *testing.T) {
			s, err := ciphersuite.Lookup(ciphersuite.ID(c.Suite))
			if err != nil {
				t.Skipf("suite %d not implemented by regroup: %v", c.Suite, err)
			}
			tree := loadTree(t, s, c.TreeBefore)
			if h, _ := tree.TreeHash(); !bytes.Equal(h, c.TreeHashBefore) {
				t.Fatalf("tree hash before = %x, want %x", h, c.TreeHashBefore)
			}
			var p message.Proposal
			if err := codec.Unmarshal(c.Proposal, &p); err != nil {
				t.Fatal(err)
			}
			switch p.Type {
			case message.ProposalAdd:
				_, err = tree.AddLeaf(&p.Add.KeyPackage.LeafNode)
			case message.ProposalUpdate:
				err = tree.UpdateLeaf(treemath.LeafIndex(c.ProposalSender), &p.Update.LeafNode)
			case message.ProposalRemove:
				err = tree.RemoveLeaf(treemath.LeafIndex(p.Remove.Removed))
			default:
				t.Fatalf("unexpected proposal type %d", p.Type)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := mustEncode(t, tree.Export()); !bytes.Equal(got, c.TreeAfter) {
				t.Fatalf("tree after differs\n got %x\nwant %x", got, c.TreeAfter)
			}
			if h, _ := tree.TreeHash(); !bytes.Equal(h, c.TreeHashAfter) {
				t.Fatalf("tree hash after = %x, want %x", h, c.TreeHashAfter)
			}
		})
	}
}
