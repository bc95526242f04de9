package main

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/keypackage"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/proto/mlsinteroppb"
)

// reinit is a member's ended group with the key package it offers the
// successor (§11.2).
type reinit struct {
	old     *state
	suite   *ciphersuite.Suite
	kp      *keypackage.Bundle
	sigPriv []byte
}

// reinitProposal is the ReInit to group id and suite with extensions.
func reinitProposal(groupID []byte, suite uint32, exts []*mlsinteroppb.Extension) (*message.Proposal, error) {
	if _, err := suiteOf(suite); err != nil {
		return nil, err
	}
	return &message.Proposal{Type: message.ProposalReInit, ReInit: &message.ReInit{GroupID: groupID, Version: message.MLS10,
		CipherSuite: ciphersuite.ID(suite), Extensions: extensions(exts)}}, nil
}

// ReInitProposal proposes reinitializing the group (§12.1.5).
func (s *server) ReInitProposal(_ context.Context, req *mlsinteroppb.ReInitProposalRequest) (*mlsinteroppb.ProposalResponse, error) {
	return s.propose(req.StateId, func(*state) (*message.Proposal, error) {
		return reinitProposal(req.GroupId, req.CipherSuite, req.Extensions)
	})
}

// ReInitCommit commits the cached ReInit proposal (or one described by
// value): an ordinary commit whose proposal list holds only the ReInit.
func (s *server) ReInitCommit(ctx context.Context, req *mlsinteroppb.CommitRequest) (*mlsinteroppb.CommitResponse, error) {
	return s.Commit(ctx, req)
}

// HandlePendingReInitCommit merges this member's own ReInit commit and
// prepares its key package for the successor.
func (s *server) HandlePendingReInitCommit(ctx context.Context, req *mlsinteroppb.HandlePendingCommitRequest) (*mlsinteroppb.HandleReInitCommitResponse, error) {
	res, err := s.HandlePendingCommit(ctx, req)
	if err != nil {
		return nil, err
	}
	return s.afterReInit(res.StateId)
}

// HandleReInitCommit processes another member's ReInit commit and
// prepares this member's key package for the successor.
func (s *server) HandleReInitCommit(ctx context.Context, req *mlsinteroppb.HandleCommitRequest) (*mlsinteroppb.HandleReInitCommitResponse, error) {
	res, err := s.HandleCommit(ctx, req)
	if err != nil {
		return nil, err
	}
	return s.afterReInit(res.StateId)
}

// afterReInit checks that the state's group ended with a ReInit and makes
// a key package in the ReInit's suite under the member's identity.
func (s *server) afterReInit(id uint32) (*mlsinteroppb.HandleReInitCommitResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(id)
	if err != nil {
		return nil, err
	}
	ri := st.g.ReInit()
	if ri == nil {
		return nil, status.Error(codes.FailedPrecondition, "the commit carried no ReInit")
	}
	cs, err := suiteOf(uint32(ri.CipherSuite))
	if err != nil {
		return nil, err
	}
	kp, sigPriv, err := newKeyPackage(cs, st.identity())
	if err != nil {
		return nil, engineErr("reinit key package", err)
	}
	b, err := encode(&framing.MLSMessage{WireFormat: framing.WireKeyPackage, KeyPackage: kp.KeyPackage})
	if err != nil {
		return nil, err
	}
	rid := s.id()
	s.reinits[rid] = &reinit{old: st, suite: cs, kp: kp, sigPriv: sigPriv}
	return &mlsinteroppb.HandleReInitCommitResponse{ReinitId: rid, KeyPackage: b, EpochAuthenticator: st.g.EpochAuthenticator()}, nil
}

// identity is the member's own credential identity.
func (st *state) identity() []byte {
	return st.g.LeafNode(st.g.Leaf()).Credential.Identity
}

// keyPackages decodes the other members' key packages.
func keyPackages(in [][]byte) ([]*message.KeyPackage, error) {
	out := make([]*message.KeyPackage, 0, len(in))
	for _, b := range in {
		kp, err := keyPackage(b)
		if err != nil {
			return nil, err
		}
		out = append(out, kp)
	}
	return out, nil
}

// subgroup answers a successor this member created.
func (s *server) subgroup(st *state, w *message.Welcome, externalTree bool) (*mlsinteroppb.CreateSubgroupResponse, error) {
	res := &mlsinteroppb.CreateSubgroupResponse{EpochAuthenticator: st.g.EpochAuthenticator()}
	var err error
	if w != nil {
		if res.Welcome, err = encode(&framing.MLSMessage{WireFormat: framing.WireWelcome, Welcome: w}); err != nil {
			return nil, err
		}
	}
	if externalTree {
		if res.RatchetTree, err = marshalTree(st.g); err != nil {
			return nil, err
		}
	}
	res.StateId = s.addState(st)
	return res, nil
}

// ReInitWelcome creates the successor of an ended group with the others'
// key packages and returns its Welcome.
func (s *server) ReInitWelcome(_ context.Context, req *mlsinteroppb.ReInitWelcomeRequest) (*mlsinteroppb.CreateSubgroupResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ri, ok := s.reinits[req.ReinitId]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no reinit %d", req.ReinitId)
	}
	kps, err := keyPackages(req.KeyPackage)
	if err != nil {
		return nil, err
	}
	psks := group.MapPSKStore{}
	g, w, err := ri.old.g.Reinitialize(&group.SuccessorOptions{Leaf: &ri.kp.KeyPackage.LeafNode, EncryptionPriv: ri.kp.EncryptionPriv,
		SignaturePriv: ri.sigPriv, KeyPackages: kps, Path: req.ForcePath, TreeInWelcome: !req.ExternalTree, PSKs: psks})
	if err != nil {
		return nil, engineErr("reinit welcome", err)
	}
	delete(s.reinits, req.ReinitId)
	return s.subgroup(&state{suite: ri.suite, g: g, wf: ri.old.wf, psks: psks, own: map[string]bool{}}, w, req.ExternalTree)
}

// HandleReInitWelcome joins the successor of an ended group.
func (s *server) HandleReInitWelcome(_ context.Context, req *mlsinteroppb.HandleReInitWelcomeRequest) (*mlsinteroppb.JoinGroupResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ri, ok := s.reinits[req.ReinitId]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no reinit %d", req.ReinitId)
	}
	psks := group.MapPSKStore{}
	st, err := joinSuccessor(ri.suite, req.Welcome, req.RatchetTree, &group.JoinOptions{KeyPackage: ri.kp.KeyPackage, InitPriv: ri.kp.InitPriv,
		EncryptionPriv: ri.kp.EncryptionPriv, SignaturePriv: ri.sigPriv, Predecessor: ri.old.g}, psks, ri.old.wf)
	if err != nil {
		return nil, err
	}
	delete(s.reinits, req.ReinitId)
	id := s.addState(st)
	return &mlsinteroppb.JoinGroupResponse{StateId: id, EpochAuthenticator: st.g.EpochAuthenticator()}, nil
}

// joinSuccessor joins a reinitialized group or a branch from its Welcome.
func joinSuccessor(cs *ciphersuite.Suite, welcome, tree []byte, opts *group.JoinOptions, psks group.MapPSKStore, wf framing.WireFormat) (*state, error) {
	opts.PSKs = psks
	w, err := decode("welcome", welcome, framing.WireWelcome)
	if err != nil {
		return nil, err
	}
	if len(tree) > 0 {
		if err := codec.Unmarshal(tree, &opts.Tree); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "ratchet tree: %v", err)
		}
	}
	g, err := group.Join(cs, w.Welcome, opts)
	if err != nil {
		return nil, engineErr("join successor", err)
	}
	return &state{suite: cs, g: g, wf: wf, psks: psks, own: map[string]bool{}}, nil
}

// CreateBranch creates a subgroup of the state's group (§11.3) with the
// given members' key packages, under a fresh key package of this member.
func (s *server) CreateBranch(_ context.Context, req *mlsinteroppb.CreateBranchRequest) (*mlsinteroppb.CreateSubgroupResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(req.StateId)
	if err != nil {
		return nil, err
	}
	kps, err := keyPackages(req.KeyPackages)
	if err != nil {
		return nil, err
	}
	kp, sigPriv, err := newKeyPackage(st.suite, st.identity())
	if err != nil {
		return nil, engineErr("branch key package", err)
	}
	psks := group.MapPSKStore{}
	g, w, err := st.g.Branch(&group.SuccessorOptions{GroupID: req.GroupId, Extensions: extensions(req.Extensions),
		Leaf: &kp.KeyPackage.LeafNode, EncryptionPriv: kp.EncryptionPriv, SignaturePriv: sigPriv, KeyPackages: kps,
		Path: req.ForcePath, TreeInWelcome: !req.ExternalTree, PSKs: psks})
	if err != nil {
		return nil, engineErr("branch", err)
	}
	return s.subgroup(&state{suite: st.suite, g: g, wf: st.wf, psks: psks, own: map[string]bool{}}, w, req.ExternalTree)
}

// HandleBranch joins a subgroup branched from the state's group with the
// key package of a transaction.
func (s *server) HandleBranch(_ context.Context, req *mlsinteroppb.HandleBranchRequest) (*mlsinteroppb.HandleBranchResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(req.StateId)
	if err != nil {
		return nil, err
	}
	tx, ok := s.txs[req.TransactionId]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no transaction %d", req.TransactionId)
	}
	nst, err := joinSuccessor(tx.suite, req.Welcome, req.RatchetTree, &group.JoinOptions{KeyPackage: tx.kp.KeyPackage, InitPriv: tx.kp.InitPriv,
		EncryptionPriv: tx.kp.EncryptionPriv, SignaturePriv: tx.sigPriv, Predecessor: st.g}, tx.psks, st.wf)
	if err != nil {
		return nil, err
	}
	delete(s.txs, req.TransactionId)
	id := s.addState(nst)
	return &mlsinteroppb.HandleBranchResponse{StateId: id, EpochAuthenticator: nst.g.EpochAuthenticator()}, nil
}
