//go:build regroupd_private_validator

package main

// A private validator for the commit-acceptance tests: the built-in
// engine's public view (adapters/mls/group.NewPublic) behind
// ports.PublicGroups, compiled into regroupd only with the build tag
// regroupd_private_validator, until adapters/mls exposes its own. Its
// reason classes come from the engine's error texts.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

func init() {
	publicValidator = func() (ports.PublicGroups, error) { return privateValidator{}, nil }
}

type privateValidator struct{}

var (
	_ ports.PublicGroups      = privateValidator{}
	_ ports.PublicStateViewer = privateValidator{}
)

func refuse(reason string, err error) error { return &ports.PublicRefusal{Reason: reason, Err: err} }

// classify maps an engine error to a reason class.
func classify(err error) error {
	var ee *group.EpochError
	if errors.As(err, &ee) {
		rel := ports.EpochOlder
		if ee.MessageEpoch > ee.GroupEpoch {
			rel = ports.EpochFuture
		}
		return refuse(ports.RefusedEpoch, &ports.WrongEpochError{Relation: rel, MessageEpoch: ee.MessageEpoch, GroupEpoch: ee.GroupEpoch})
	}
	t := strings.ToLower(err.Error())
	switch {
	case strings.Contains(t, "parent hash"):
		return refuse(ports.RefusedParentHash, err)
	case strings.Contains(t, "tree hash"):
		return refuse(ports.RefusedTreeHash, err)
	case strings.Contains(t, "group id"):
		return refuse(ports.RefusedGroup, err)
	case strings.Contains(t, "leaf"), strings.Contains(t, "lifetime"), strings.Contains(t, "capabilit"), strings.Contains(t, "credential"):
		if strings.Contains(t, "sender leaf") || strings.Contains(t, "blank") {
			return refuse(ports.RefusedSender, err)
		}
		return refuse(ports.RefusedLeafNode, err)
	case strings.Contains(t, "signature"):
		return refuse(ports.RefusedSignature, err)
	case strings.Contains(t, "sender"), strings.Contains(t, "wire format"), strings.Contains(t, "content type"):
		return refuse(ports.RefusedSender, err)
	case strings.Contains(t, "decode"), strings.Contains(t, "truncat"), strings.Contains(t, "malformed"):
		return refuse(ports.RefusedMalformed, err)
	}
	return refuse(ports.RefusedProposal, err)
}

func decode(b []byte, wf framing.WireFormat) (*framing.MLSMessage, error) {
	var m framing.MLSMessage
	if err := codec.Unmarshal(b, &m); err != nil {
		return nil, refuse(ports.RefusedMalformed, err)
	}
	if m.WireFormat != wf {
		return nil, refuse(ports.RefusedSender, fmt.Errorf("wire format %d, want %d", m.WireFormat, wf))
	}
	return &m, nil
}

func openInfo(b []byte) (*group.Group, *message.GroupInfo, error) {
	m, err := decode(b, framing.WireGroupInfo)
	if err != nil {
		return nil, nil, err
	}
	gi := m.GroupInfo
	s, err := ciphersuite.Lookup(gi.GroupContext.CipherSuite)
	if err != nil {
		return nil, nil, refuse(ports.RefusedMalformed, err)
	}
	g, err := group.NewPublic(s, gi, nil)
	if err != nil {
		return nil, nil, classify(err)
	}
	return g, gi, nil
}

func (privateValidator) Open(_ context.Context, groupInfo []byte) (ports.PublicState, error) {
	g, _, err := openInfo(groupInfo)
	if err != nil {
		return ports.PublicState{}, err
	}
	return stateOf(g)
}

func stateOf(g *group.Group) (ports.PublicState, error) {
	b, err := g.Marshal()
	if err != nil {
		return ports.PublicState{}, err
	}
	return ports.PublicState{State: b, View: viewOf(g)}, nil
}

func (privateValidator) Apply(_ context.Context, state, commit []byte) (ports.PublicCommit, error) {
	g, err := group.Load(state, nil)
	if err != nil {
		return ports.PublicCommit{}, fmt.Errorf("load public state: %w", err)
	}
	m, err := decode(commit, framing.WirePublicMessage)
	if err != nil {
		return ports.PublicCommit{}, err
	}
	if m.Public.Content.ContentType != framing.ContentCommit {
		return ports.PublicCommit{}, refuse(ports.RefusedSender, errors.New("not a commit"))
	}
	if !bytes.Equal(m.Public.Content.GroupID, g.GroupContext().GroupID) {
		return ports.PublicCommit{}, refuse(ports.RefusedGroup, errors.New("commit of another group id"))
	}
	before := g.Clone()
	r, err := g.Process(m)
	if err != nil {
		return ports.PublicCommit{}, classify(err)
	}
	cps, err := g.PendingProposals(r.Pending)
	if err != nil {
		return ports.PublicCommit{}, classify(err)
	}
	if err := g.MergePending(r.Pending); err != nil {
		return ports.PublicCommit{}, classify(err)
	}
	next, err := stateOf(g)
	if err != nil {
		return ports.PublicCommit{}, err
	}
	pc := ports.PublicCommit{Epoch: before.Epoch(), SenderType: ports.SenderType(r.Sender.Type), Next: next,
		Proposals: proposalsOf(before, &next.View, cps)}
	if r.Sender.Type == framing.SenderMember {
		pc.Sender = member(r.Sender.LeafIndex, before.LeafNode(treeLeaf(r.Sender.LeafIndex)))
	}
	return pc, nil
}

func (privateValidator) CheckGroupInfo(_ context.Context, state, groupInfo []byte) error {
	g, err := group.Load(state, nil)
	if err != nil {
		return fmt.Errorf("load public state: %w", err)
	}
	m, err := decode(groupInfo, framing.WireGroupInfo)
	if err != nil {
		return err
	}
	want, _ := codec.Marshal(addr(g.GroupContext()))
	got, _ := codec.Marshal(&m.GroupInfo.GroupContext)
	if !bytes.Equal(want, got) {
		return refuse(ports.RefusedGroupInfo, fmt.Errorf("group context of epoch %d, the state is at %d", m.GroupInfo.GroupContext.Epoch, g.Epoch()))
	}
	signer := g.LeafNode(treeLeaf(m.GroupInfo.Signer))
	if signer == nil {
		return refuse(ports.RefusedGroupInfo, fmt.Errorf("signer %d is not a member", m.GroupInfo.Signer))
	}
	s, _ := ciphersuite.Lookup(m.GroupInfo.GroupContext.CipherSuite)
	if err := m.GroupInfo.Verify(s, signer.SignatureKey); err != nil {
		return refuse(ports.RefusedSignature, err)
	}
	return nil
}

func (privateValidator) View(_ context.Context, state []byte) (ports.GroupView, error) {
	g, err := group.Load(state, nil)
	if err != nil {
		return ports.GroupView{}, err
	}
	return viewOf(g), nil
}

func addr[T any](v T) *T { return &v }

func viewOf(g *group.Group) ports.GroupView {
	gc := g.GroupContext()
	v := ports.GroupView{GroupID: gc.GroupID, Epoch: gc.Epoch, TreeHash: gc.TreeHash, Extensions: extensions(gc.Extensions),
		OwnLeaf: ports.NoLeaf}
	for _, l := range g.Members() {
		v.Members = append(v.Members, member(uint32(l), g.LeafNode(l)))
	}
	return v
}

func extensions(in message.Extensions) []ports.Extension {
	out := make([]ports.Extension, 0, len(in))
	for _, e := range in {
		out = append(out, ports.Extension{Type: uint16(e.Type), Data: e.Data})
	}
	return out
}

func member(l uint32, leaf *message.LeafNode) ports.Member {
	m := ports.Member{LeafIndex: l}
	if leaf == nil {
		return m
	}
	m.SignatureKey, m.EncryptionKey = leaf.SignatureKey, leaf.EncryptionKey
	m.CredentialType, m.Credential = uint16(leaf.Credential.Type), leaf.Credential.Identity
	var mc contentspb.MlsCredential
	if leaf.Credential.Type == message.CredentialBasic && proto.Unmarshal(leaf.Credential.Identity, &mc) == nil {
		m.InboxID = mc.GetInboxId()
	}
	m.Extensions = extensions(leaf.Extensions)
	return m
}

func proposalsOf(old *group.Group, staged *ports.GroupView, cps []group.CommitProposal) []ports.Proposal {
	out := make([]ports.Proposal, 0, len(cps))
	for _, cp := range cps {
		pr := cp.Proposal
		p := ports.Proposal{Type: uint16(pr.Type), SenderType: ports.SenderType(cp.Sender.Type), ByReference: cp.ByReference,
			Sender: ports.Member{LeafIndex: cp.Sender.LeafIndex}}
		if cp.Sender.Type == framing.SenderMember {
			p.Sender = member(cp.Sender.LeafIndex, old.LeafNode(treeLeaf(cp.Sender.LeafIndex)))
		}
		switch {
		case pr.Type == message.ProposalAdd && pr.Add != nil:
			kp := &pr.Add.KeyPackage
			p.KeyPackage, _ = codec.Marshal(kp)
			p.Added = member(ports.NoLeaf, &kp.LeafNode)
			for _, m := range staged.Members {
				if bytes.Equal(m.SignatureKey, kp.LeafNode.SignatureKey) && bytes.Equal(m.EncryptionKey, kp.LeafNode.EncryptionKey) {
					p.Added = m
				}
			}
		case pr.Type == message.ProposalRemove && pr.Remove != nil:
			p.Removed = member(pr.Remove.Removed, old.LeafNode(treeLeaf(pr.Remove.Removed)))
		case pr.Type == message.ProposalSelfRemove && cp.Sender.Type == framing.SenderMember:
			p.Removed = member(cp.Sender.LeafIndex, old.LeafNode(treeLeaf(cp.Sender.LeafIndex)))
		case pr.Type == message.ProposalUpdate && pr.Update != nil:
			p.Updated = member(cp.Sender.LeafIndex, &pr.Update.LeafNode)
		case pr.Type == message.ProposalGroupContextExtensions && pr.GroupContextExtensions != nil:
			p.Extensions = extensions(pr.GroupContextExtensions.Extensions)
		}
		out = append(out, p)
	}
	return out
}

func treeLeaf(i uint32) treemath.LeafIndex { return treemath.LeafIndex(i) }
