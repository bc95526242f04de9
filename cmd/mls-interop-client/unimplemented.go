package main

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/proto/mlsinteroppb"
)

// The methods below need engine capabilities adapters/mls/group lacks;
// each answers codes.Unimplemented naming the capability.

var (
	errReInit = status.Error(codes.Unimplemented,
		"reinit: adapters/mls/group supports no ReInit proposal (§12.1.5) nor reinit resumption PSKs yet")
	errBranch = status.Error(codes.Unimplemented,
		"branch: adapters/mls/group cannot create subgroups with a branch resumption PSK (§11.3) yet")
	errExternalSender = status.Error(codes.Unimplemented,
		"external proposals: adapters/mls/group accepts no new_member_proposal or external senders (§12.1.8) yet")
)

// ReInitProposal needs ReInit.
func (s *server) ReInitProposal(context.Context, *mlsinteroppb.ReInitProposalRequest) (*mlsinteroppb.ProposalResponse, error) {
	return nil, errReInit
}

// ReInitCommit needs ReInit.
func (s *server) ReInitCommit(context.Context, *mlsinteroppb.CommitRequest) (*mlsinteroppb.CommitResponse, error) {
	return nil, errReInit
}

// HandlePendingReInitCommit needs ReInit.
func (s *server) HandlePendingReInitCommit(context.Context, *mlsinteroppb.HandlePendingCommitRequest) (*mlsinteroppb.HandleReInitCommitResponse, error) {
	return nil, errReInit
}

// HandleReInitCommit needs ReInit.
func (s *server) HandleReInitCommit(context.Context, *mlsinteroppb.HandleCommitRequest) (*mlsinteroppb.HandleReInitCommitResponse, error) {
	return nil, errReInit
}

// ReInitWelcome needs ReInit.
func (s *server) ReInitWelcome(context.Context, *mlsinteroppb.ReInitWelcomeRequest) (*mlsinteroppb.CreateSubgroupResponse, error) {
	return nil, errReInit
}

// HandleReInitWelcome needs ReInit.
func (s *server) HandleReInitWelcome(context.Context, *mlsinteroppb.HandleReInitWelcomeRequest) (*mlsinteroppb.JoinGroupResponse, error) {
	return nil, errReInit
}

// CreateBranch needs branch resumption PSKs.
func (s *server) CreateBranch(context.Context, *mlsinteroppb.CreateBranchRequest) (*mlsinteroppb.CreateSubgroupResponse, error) {
	return nil, errBranch
}

// HandleBranch needs branch resumption PSKs.
func (s *server) HandleBranch(context.Context, *mlsinteroppb.HandleBranchRequest) (*mlsinteroppb.HandleBranchResponse, error) {
	return nil, errBranch
}

// NewMemberAddProposal needs new_member_proposal senders.
func (s *server) NewMemberAddProposal(context.Context, *mlsinteroppb.NewMemberAddProposalRequest) (*mlsinteroppb.NewMemberAddProposalResponse, error) {
	return nil, errExternalSender
}

// CreateExternalSigner needs external senders.
func (s *server) CreateExternalSigner(context.Context, *mlsinteroppb.CreateExternalSignerRequest) (*mlsinteroppb.CreateExternalSignerResponse, error) {
	return nil, errExternalSender
}

// AddExternalSigner needs external senders.
func (s *server) AddExternalSigner(context.Context, *mlsinteroppb.AddExternalSignerRequest) (*mlsinteroppb.ProposalResponse, error) {
	return nil, errExternalSender
}

// ExternalSignerProposal needs external senders.
func (s *server) ExternalSignerProposal(context.Context, *mlsinteroppb.ExternalSignerProposalRequest) (*mlsinteroppb.ProposalResponse, error) {
	return nil, errExternalSender
}
