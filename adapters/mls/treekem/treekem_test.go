package treekem_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treekem"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

type treekemCase struct {
	Suite                   uint16      `json:"cipher_suite"`
	GroupID                 vectors.Hex `json:"group_id"`
	Epoch                   uint64      `json:"epoch"`
	ConfirmedTranscriptHash vectors.Hex `json:"confirmed_transcript_hash"`
	RatchetTree             vectors.Hex `json:"ratchet_tree"`
	LeavesPrivate           []struct {
		Index          uint32      `json:"index"`
		EncryptionPriv vectors.Hex `json:"encryption_priv"`
		SignaturePriv  vectors.Hex `json:"signature_priv"`
		PathSecrets    []struct {
			Node       uint32      `json:"node"`
			PathSecret vectors.Hex `json:"path_secret"`
		} `json:"path_secrets"`
	} `json:"leaves_private"`
	UpdatePaths []struct {
		Sender        uint32        `json:"sender"`
		UpdatePath    vectors.Hex   `json:"update_path"`
		PathSecrets   []vectors.Hex `json:"path_secrets"`
		CommitSecret  vectors.Hex   `json:"commit_secret"`
		TreeHashAfter vectors.Hex   `json:"tree_hash_after"`
	} `json:"update_paths"`
}

type fixture struct {
	t     *testing.T
	c     *treekemCase
	suite *ciphersuite.Suite
	tree  *ratchettree.Tree
	privs map[treemath.LeafIndex]*treekem.PrivateState
	sigs  map[treemath.LeafIndex][]byte
}

func (f *fixture) groupContext(treeHash []byte) ([]byte, error) {
	return codec.Marshal(&message.GroupContext{
		Version: message.MLS10, CipherSuite: ciphersuite.ID(f.c.Suite), GroupID: f.c.GroupID, Epoch: f.c.Epoch,
		TreeHash: treeHash, ConfirmedTranscriptHash: f.c.ConfirmedTranscriptHash,
	})
}

func newFixture(t *testing.T, c *treekemCase, s *ciphersuite.Suite) *fixture {
	var rt message.RatchetTree
	if err := codec.Unmarshal(c.RatchetTree, &rt); err != nil {
		t.Fatal(err)
	}
	tree, err := ratchettree.Import(s, rt)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, c: c, suite: s, tree: tree, privs: map[treemath.LeafIndex]*treekem.PrivateState{}, sigs: map[treemath.LeafIndex][]byte{}}
	for _, lp := range c.LeavesPrivate {
		l := treemath.LeafIndex(lp.Index)
		ps := treekem.NewPrivateState(s, l, lp.EncryptionPriv)
		for _, p := range lp.PathSecrets {
			if err := ps.SetPathSecret(treemath.NodeIndex(p.Node), p.PathSecret); err != nil {
				t.Fatal(err)
			}
		}
		if err := ps.Consistent(tree); err != nil {
			t.Fatalf("leaf %d private state: %v", l, err)
		}
		f.privs[l], f.sigs[l] = ps, lp.SignaturePriv
	}
	return f
}

// process merges path into a copy of the tree and has every other member
// decrypt it; it returns the tree after the merge and each member's
// commit secret and path secret.
func (f *fixture) process(sender treemath.LeafIndex, path *message.UpdatePath) (*ratchettree.Tree, map[treemath.LeafIndex][2][]byte) {
	t := f.t
	tree := f.tree.Clone()
	if err := treekem.Merge(tree, sender, path); err != nil {
		t.Fatalf("merge path of %d: %v", sender, err)
	}
	if err := path.LeafNode.Verify(f.suite, f.c.GroupID, uint32(sender)); err != nil {
		t.Fatalf("leaf of %d: %v", sender, err)
	}
	th, err := tree.TreeHash()
	if err != nil {
		t.Fatal(err)
	}
	gc, _ := f.groupContext(th)
	out := map[treemath.LeafIndex][2][]byte{}
	for l, ps := range f.privs {
		if l == sender {
			continue
		}
		cs, sec, err := ps.Clone().Decrypt(tree, sender, path, nil, gc)
		if err != nil {
			t.Fatalf("leaf %d decrypting path of %d: %v", l, sender, err)
		}
		out[l] = [2][]byte{cs, sec}
	}
	return tree, out
}

// TestTreeKEMVectors runs every case of treekem.json (§7.4–7.9): each
// member merges and decrypts each given UpdatePath, checking path secret,
// commit secret and tree hash; then the sender creates a new UpdatePath
// that every other member processes to the same commit secret.
func TestTreeKEMVectors(t *testing.T) {
	var cases []treekemCase
	vectors.Load(t, "treekem.json", &cases)
	for i := range cases {
		c := &cases[i]
		t.Run(fmt.Sprintf("treekem/%d", i), func(t *testing.T) {
			s, err := ciphersuite.Lookup(ciphersuite.ID(c.Suite))
			if err != nil {
				t.Skipf("suite %d not implemented by regroup: %v", c.Suite, err)
			}
			f := newFixture(t, c, s)
			for _, up := range c.UpdatePaths {
				sender := treemath.LeafIndex(up.Sender)
				var path message.UpdatePath
				if err := codec.Unmarshal(up.UpdatePath, &path); err != nil {
					t.Fatal(err)
				}
				tree, got := f.process(sender, &path)
				th, _ := tree.TreeHash()
				if !bytes.Equal(th, up.TreeHashAfter) {
					t.Fatalf("tree hash after path of %d = %x, want %x", sender, th, up.TreeHashAfter)
				}
				for l, r := range got {
					if !bytes.Equal(r[0], up.CommitSecret) {
						t.Fatalf("leaf %d: commit secret %x, want %x", l, r[0], up.CommitSecret)
					}
					if want := up.PathSecrets[l]; !bytes.Equal(r[1], want) {
						t.Fatalf("leaf %d: path secret %x, want %x", l, r[1], want)
					}
				}
				// Create a fresh path from the same sender and process it.
				senderTree := f.tree.Clone()
				ps := f.privs[sender].Clone()
				template := *senderTree.Leaf(sender)
				created, err := ps.CreatePath(senderTree, &template, f.sigs[sender], c.GroupID, nil, f.groupContext)
				if err != nil {
					t.Fatalf("create path for %d: %v", sender, err)
				}
				newPath, commit := created.Path, created.CommitSecret
				tree2, got2 := f.process(sender, newPath)
				h1, _ := senderTree.TreeHash()
				h2, _ := tree2.TreeHash()
				if !bytes.Equal(h1, h2) {
					t.Fatalf("sender and receivers disagree on the tree after the new path")
				}
				for l, r := range got2 {
					if !bytes.Equal(r[0], commit) {
						t.Fatalf("leaf %d: commit secret of new path differs", l)
					}
				}
				if err := ps.Consistent(senderTree); err != nil {
					t.Fatalf("sender state after create: %v", err)
				}
			}
		})
	}
}
