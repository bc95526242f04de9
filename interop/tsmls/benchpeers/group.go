package main

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/keypackage"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// member is a key package with its private keys.
type member struct {
	kp        *keypackage.Bundle
	signature []byte
}

func newMember(s *ciphersuite.Suite, name string) (*member, error) {
	sig, _, err := s.GenerateSignatureKey()
	if err != nil {
		return nil, err
	}
	kp, err := keypackage.New(s, &keypackage.Options{Credential: message.Credential{Type: message.CredentialBasic, Identity: []byte(name)},
		SignaturePriv: sig, Lifetime: message.Lifetime{NotBefore: 0, NotAfter: 1 << 62}})
	if err != nil {
		return nil, err
	}
	return &member{kp: kp, signature: sig}, nil
}

// joinFrom decodes a Welcome from its bytes and joins the group.
func (m *member) joinFrom(s *ciphersuite.Suite, welcome []byte) (*group.Group, error) {
	msg, err := framing.Decode(welcome)
	if err != nil {
		return nil, err
	}
	if msg.Welcome == nil {
		return nil, fmt.Errorf("not a Welcome")
	}
	return group.Join(s, msg.Welcome, &group.JoinOptions{KeyPackage: m.kp.KeyPackage, InitPriv: m.kp.InitPriv,
		EncryptionPriv: m.kp.EncryptionPriv, SignaturePriv: m.signature})
}

func welcomeBytes(w *message.Welcome) ([]byte, error) {
	return codec.Marshal(&framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireWelcome, Welcome: w})
}

// groupTimes times the operations on package group in memory, in a group
// of n: the commit travels as bytes, and the member's state is copied
// before each run (untimed) since processing moves it to the next epoch.
func groupTimes(n, runs int) (map[string][]float64, error) {
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		return nil, err
	}
	creator, err := newMember(s, "member-0")
	if err != nil {
		return nil, err
	}
	leaf := creator.kp.KeyPackage.LeafNode
	ga, err := group.Create(s, &group.CreateOptions{GroupID: []byte("peer-bench"), Leaf: &leaf, EncryptionPriv: creator.kp.EncryptionPriv, SignaturePriv: creator.signature})
	if err != nil {
		return nil, err
	}
	var first *member
	var adds []*message.Proposal
	for i := 1; i < n; i++ {
		m, err := newMember(s, fmt.Sprintf("member-%d", i))
		if err != nil {
			return nil, err
		}
		if first == nil {
			first = m
		}
		adds = append(adds, &message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *m.kp.KeyPackage}})
	}
	p, err := ga.Commit(&group.CommitOptions{Proposals: adds, TreeInWelcome: true})
	if err != nil {
		return nil, err
	}
	if err := ga.MergePending(p); err != nil {
		return nil, err
	}
	w, err := welcomeBytes(p.Welcome)
	if err != nil {
		return nil, err
	}
	gm, err := first.joinFrom(s, w)
	if err != nil {
		return nil, err
	}
	times := map[string][]float64{}
	var commit []byte
	if times["create"], err = timeRuns(runs, func() error {
		p, err := ga.Commit(&group.CommitOptions{Path: true})
		if err == nil {
			commit, err = codec.Marshal(p.Message)
		}
		return err
	}); err != nil {
		return nil, err
	}
	var copies []*group.Group
	for range runs + 1 {
		copies = append(copies, gm.Clone())
	}
	if times["process"], err = timeRuns(runs, func() error {
		g := copies[0]
		copies = copies[1:]
		msg, err := framing.Decode(commit)
		if err != nil {
			return err
		}
		staged, err := g.StageCommit(msg)
		if err != nil {
			return err
		}
		return g.MergePending(staged)
	}); err != nil {
		return nil, err
	}
	joiner, err := newMember(s, "joiner")
	if err != nil {
		return nil, err
	}
	p, err = ga.Commit(&group.CommitOptions{TreeInWelcome: true,
		Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *joiner.kp.KeyPackage}}}})
	if err != nil {
		return nil, err
	}
	if w, err = welcomeBytes(p.Welcome); err != nil {
		return nil, err
	}
	if times["join"], err = timeRuns(runs, func() error { _, err := joiner.joinFrom(s, w); return err }); err != nil {
		return nil, err
	}
	return times, nil
}
