package group_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// sizedClient is a member whose basic credential has the size of
// regroup's: a serialized MlsCredential naming a 64-character inbox id
// (68 bytes).
func sizedClient(b testing.TB, s *ciphersuite.Suite) *client {
	b.Helper()
	c := newClient(b, s, "sized")
	c.kp.LeafNode.Credential.Identity = append([]byte{0x0a, 0x40}, bytes.Repeat([]byte{'f'}, 64)...)
	if err := c.kp.LeafNode.Sign(s, c.sigPriv, nil, 0); err != nil {
		b.Fatal(err)
	}
	if err := c.kp.Sign(s, c.sigPriv); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkPublicStateSize (COMP-312) reports the size of a group's
// public state (group.MarshalPublic, what a delivery service stores per
// group) at 100, 1,000 and 10,000 members in suite 1, and at 100 and
// 1,000 in suite 3 (regroup's; its keys have suite 1's sizes): state-B as the group stands after its creator added
// everyone in one commit and then committed with a path, and
// state-B-full-tree with every parent node of the tree set, the most a
// tree of that many leaves holds. The reference in the same run is the
// bytes of the members' leaf nodes alone (leaves-B). Each iteration
// encodes the state once.
func BenchmarkPublicStateSize(b *testing.B) {
	for _, id := range []ciphersuite.ID{ciphersuite.MLS128X25519AES128GCMSHA256Ed25519, ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519} {
		for _, n := range []int{100, 1000, 10000} {
			if n > 1000 && id != ciphersuite.MLS128X25519AES128GCMSHA256Ed25519 {
				continue // suites 1 and 3 have keys of the same sizes: one 10,000-member build is enough
			}
			b.Run(fmt.Sprintf("suite-%d/members-%d", id, n), func(b *testing.B) {
				s, _ := ciphersuite.Lookup(id)
				creator := sizedClient(b, s)
				leaf := creator.kp.LeafNode
				g, err := group.Create(s, &group.CreateOptions{GroupID: bytes.Repeat([]byte{7}, 16), Leaf: &leaf, EncryptionPriv: creator.encPriv, SignaturePriv: creator.sigPriv})
				if err != nil {
					b.Fatal(err)
				}
				adds := make([]*message.Proposal, 0, n-1)
				for range n - 1 {
					adds = append(adds, &message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *sizedClient(b, s).kp}})
				}
				for _, opts := range []*group.CommitOptions{{Proposals: adds}, {Path: true}} {
					p, err := g.Commit(opts)
					if err != nil {
						b.Fatal(err)
					}
					if err := g.MergePending(p); err != nil {
						b.Fatal(err)
					}
				}
				var state []byte
				for b.Loop() {
					if state, err = g.MarshalPublic(); err != nil {
						b.Fatal(err)
					}
				}
				tree := g.Tree()
				leaves := 0
				for _, l := range tree.Members() {
					lb, _ := codec.Marshal(tree.Leaf(l))
					leaves += len(lb)
				}
				before, _ := codec.Marshal(tree.Export())
				_, hpkePub, _ := s.GenerateHPKEKey()
				for x := 1; x < tree.Width(); x += 2 {
					if tree.Blank(treemath.NodeIndex(x)) {
						key, ph := make([]byte, len(hpkePub)), make([]byte, s.HashSize())
						_, _ = rand.Read(key)
						_, _ = rand.Read(ph)
						if err := tree.SetParent(treemath.NodeIndex(x), &message.ParentNode{EncryptionKey: key, ParentHash: ph, UnmergedLeaves: []uint32{}}); err != nil {
							b.Fatal(err)
						}
					}
				}
				after, _ := codec.Marshal(tree.Export())
				b.ReportMetric(float64(len(state)), "state-B")
				b.ReportMetric(float64(len(state)-len(before)+len(after)), "state-B-full-tree")
				b.ReportMetric(float64(leaves), "leaves-B")
			})
		}
	}
}
