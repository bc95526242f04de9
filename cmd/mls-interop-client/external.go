package main

import (
	"context"
	"crypto/rand"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/proto/mlsinteroppb"
)

// signer is an external sender's key (§12.1.8.1).
type signer struct {
	suite  *ciphersuite.Suite
	priv   []byte
	sender message.ExternalSender
}

// NewMemberAddProposal makes a key package for identity in the suite of
// the group of group_info and signs the joiner's own Add of it (sender
// type new_member_proposal); its private keys wait under a transaction id
// for the Welcome.
func (s *server) NewMemberAddProposal(_ context.Context, req *mlsinteroppb.NewMemberAddProposalRequest) (*mlsinteroppb.NewMemberAddProposalResponse, error) {
	m, err := decode("group info", req.GroupInfo, framing.WireGroupInfo)
	if err != nil {
		return nil, err
	}
	gc := m.GroupInfo.GroupContext
	cs, err := suiteOf(uint32(gc.CipherSuite))
	if err != nil {
		return nil, err
	}
	kp, sigPriv, err := newKeyPackage(cs, req.Identity)
	if err != nil {
		return nil, engineErr("new member proposal", err)
	}
	p, err := group.NewMemberProposal(cs, gc.GroupID, gc.Epoch, kp.KeyPackage, sigPriv)
	if err != nil {
		return nil, engineErr("new member proposal", err)
	}
	b, err := encode(p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.id()
	s.txs[id] = &transaction{suite: cs, kp: kp, sigPriv: sigPriv, psks: group.MapPSKStore{}}
	return &mlsinteroppb.NewMemberAddProposalResponse{TransactionId: id, Proposal: b,
		InitPriv: kp.InitPriv, EncryptionPriv: kp.EncryptionPriv, SignaturePriv: sigPriv}, nil
}

// CreateExternalSigner makes an external sender's signature key with a
// basic credential and returns its ExternalSender encoding.
func (s *server) CreateExternalSigner(_ context.Context, req *mlsinteroppb.CreateExternalSignerRequest) (*mlsinteroppb.CreateExternalSignerResponse, error) {
	cs, err := suiteOf(req.CipherSuite)
	if err != nil {
		return nil, err
	}
	priv, pub, err := cs.GenerateSignatureKey()
	if err != nil {
		return nil, engineErr("external signer", err)
	}
	sg := &signer{suite: cs, priv: priv, sender: message.ExternalSender{SignatureKey: pub,
		Credential: message.Credential{Type: message.CredentialBasic, Identity: req.Identity}}}
	b, err := codec.Marshal(&sg.sender)
	if err != nil {
		return nil, engineErr("external signer", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.id()
	s.signers[id] = sg
	return &mlsinteroppb.CreateExternalSignerResponse{SignerId: id, ExternalSender: b}, nil
}

// AddExternalSigner proposes a GroupContextExtensions that keeps the
// group's extensions and appends the given ExternalSender to its
// external_senders (creating the extension when absent); the new signer's
// index is the extension's former length.
func (s *server) AddExternalSigner(_ context.Context, req *mlsinteroppb.AddExternalSignerRequest) (*mlsinteroppb.ProposalResponse, error) {
	var es message.ExternalSender
	if err := codec.Unmarshal(req.ExternalSender, &es); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "external sender: %v", err)
	}
	return s.propose(req.StateId, func(st *state) (*message.Proposal, error) {
		senders, err := st.g.ExternalSenders()
		if err != nil {
			return nil, engineErr("external senders", err)
		}
		data, err := codec.Marshal(append(senders, es))
		if err != nil {
			return nil, engineErr("external senders", err)
		}
		exts := message.Extensions{}
		for _, e := range st.g.GroupContext().Extensions {
			if e.Type != message.ExtExternalSenders {
				exts = append(exts, e)
			}
		}
		exts = append(exts, message.Extension{Type: message.ExtExternalSenders, Data: data})
		return &message.Proposal{Type: message.ProposalGroupContextExtensions,
			GroupContextExtensions: &message.GroupContextExtensions{Extensions: exts}}, nil
	})
}

// ExternalSignerProposal signs the described proposal as external sender
// signer_index of the group of group_info (§12.1.8). A Remove names its
// member by identity, found in the ratchet tree of the request or of the
// GroupInfo.
func (s *server) ExternalSignerProposal(_ context.Context, req *mlsinteroppb.ExternalSignerProposalRequest) (*mlsinteroppb.ProposalResponse, error) {
	s.mu.Lock()
	sg, ok := s.signers[req.SignerId]
	s.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no external signer %d", req.SignerId)
	}
	m, err := decode("group info", req.GroupInfo, framing.WireGroupInfo)
	if err != nil {
		return nil, err
	}
	gc := m.GroupInfo.GroupContext
	if gc.CipherSuite != sg.suite.ID() {
		return nil, status.Errorf(codes.InvalidArgument, "signer of suite %#04x for a group of suite %#04x", uint16(sg.suite.ID()), uint16(gc.CipherSuite))
	}
	d := req.Description
	if d == nil {
		return nil, status.Error(codes.InvalidArgument, "no proposal description")
	}
	var p *message.Proposal
	switch string(d.ProposalType) {
	case "remove":
		tree, err := groupInfoTree(m.GroupInfo, req.RatchetTree)
		if err != nil {
			return nil, err
		}
		l, ok := leafWithIdentity(tree, d.RemovedId)
		if !ok {
			return nil, status.Errorf(codes.NotFound, "no member with identity %q", d.RemovedId)
		}
		p = &message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: uint32(l)}}
	case "resumptionPSK":
		p, err = pskProposal(sg.suite, message.PreSharedKeyID{Type: message.PSKResumption, Usage: message.UsageApplication, GroupID: gc.GroupID, Epoch: d.EpochId})
	default:
		p, err = describedProposal(sg.suite, d)
	}
	if err != nil {
		return nil, err
	}
	out, err := group.ExternalProposal(sg.suite, gc.GroupID, gc.Epoch, req.SignerIndex, sg.priv, p)
	if err != nil {
		return nil, engineErr("external proposal", err)
	}
	b, err := encode(out)
	if err != nil {
		return nil, err
	}
	return &mlsinteroppb.ProposalResponse{Proposal: b}, nil
}

// groupInfoTree is the ratchet tree sent beside a GroupInfo, or the one in
// its ratchet_tree extension.
func groupInfoTree(gi *message.GroupInfo, beside []byte) (message.RatchetTree, error) {
	var tree message.RatchetTree
	data, ok := gi.Extensions.Find(message.ExtRatchetTree)
	if len(beside) > 0 {
		data, ok = beside, true
	}
	if !ok {
		return nil, status.Error(codes.InvalidArgument, "no ratchet tree beside or inside the group info")
	}
	if err := codec.Unmarshal(data, &tree); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "ratchet tree: %v", err)
	}
	return tree, nil
}

// pskProposal is a PreSharedKey proposal of id with a fresh Nh-byte nonce.
func pskProposal(cs *ciphersuite.Suite, id message.PreSharedKeyID) (*message.Proposal, error) {
	id.Nonce = make([]byte, cs.HashSize())
	if _, err := rand.Read(id.Nonce); err != nil {
		return nil, status.Errorf(codes.Internal, "psk nonce: %v", err)
	}
	return &message.Proposal{Type: message.ProposalPreSharedKey, PreSharedKey: &message.PreSharedKey{PSK: id}}, nil
}
