package group_test

import (
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// scaleGroup builds a group of n members in suite 3: the creator adds
// everyone in one commit, then the first member of each subtree on the
// creator's copath commits with a path, so that the creator's copath nodes
// are set as in a group that has been in use. It returns the creator and
// the member at leaf 1.
func scaleGroup(b testing.TB, n int) (*ciphersuite.Suite, *group.Group, *group.Group) {
	b.Helper()
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	creator := newClient(b, s, "member-0")
	leaf := creator.kp.LeafNode
	ga, err := group.Create(s, &group.CreateOptions{GroupID: []byte("scale"), Leaf: &leaf, EncryptionPriv: creator.encPriv, SignaturePriv: creator.sigPriv})
	if err != nil {
		b.Fatal(err)
	}
	clients := make([]*client, n)
	var adds []*message.Proposal
	for i := 1; i < n; i++ {
		clients[i] = newClient(b, s, fmt.Sprintf("member-%d", i))
		adds = append(adds, &message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *clients[i].kp}})
	}
	p, err := ga.Commit(&group.CommitOptions{Proposals: adds, TreeInWelcome: true})
	if err != nil {
		b.Fatal(err)
	}
	_ = ga.MergePending(p)
	members := []*group.Group{ga}
	for i := 1; i < n; i *= 2 { // leaves 1, 2, 4, ...: one per copath subtree of leaf 0
		members = append(members, clients[i].join(b, s, p.Welcome))
	}
	for _, committer := range members[1:] {
		c, err := committer.Commit(&group.CommitOptions{Path: true})
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range members {
			if m != committer {
				if err := m.HandleCommit(c.Message); err != nil {
					b.Fatal(err)
				}
			}
		}
		_ = committer.MergePending(c)
	}
	if len(members) < 2 {
		b.Fatal("group too small")
	}
	return s, ga, members[1]
}

// BenchmarkScale reports, for groups of 10, 100 and 1,000 members, commit
// creation (with a path), commit processing by another member (staged,
// without merging), joining from a Welcome and one application message
// round trip; the reference is one HPKE seal of a path secret.
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("members-%d", n), func(b *testing.B) {
			s, ga, gb := scaleGroup(b, n)
			b.Run("commit-create", func(b *testing.B) {
				for b.Loop() {
					if _, err := ga.Commit(&group.CommitOptions{Path: true}); err != nil {
						b.Fatal(err)
					}
				}
			})
			p, err := ga.Commit(&group.CommitOptions{Path: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Run("commit-process", func(b *testing.B) {
				for b.Loop() {
					if _, err := gb.StageCommit(p.Message); err != nil {
						b.Fatal(err)
					}
				}
			})
			joiner := newClient(b, s, "joiner")
			add, err := ga.Commit(&group.CommitOptions{TreeInWelcome: true,
				Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *joiner.kp}}}})
			if err != nil {
				b.Fatal(err)
			}
			b.Run("join", func(b *testing.B) {
				for b.Loop() {
					joiner.join(b, s, add.Welcome)
				}
			})
			b.Run("message-round-trip", func(b *testing.B) {
				for b.Loop() {
					m, err := ga.Protect([]byte("hello, group"))
					if err != nil {
						b.Fatal(err)
					}
					if _, _, err := gb.Unprotect(m); err != nil {
						b.Fatal(err)
					}
				}
			})
			_, pub, _ := s.GenerateHPKEKey()
			b.Run("reference-hpke-seal", func(b *testing.B) {
				for b.Loop() {
					if _, _, err := s.EncryptWithLabel(pub, "UpdatePathNode", nil, make([]byte, 32)); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
