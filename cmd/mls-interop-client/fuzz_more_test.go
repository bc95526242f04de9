package main

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/proto/mlsinteroppb"
)

// FuzzServerResumeInputs feeds arbitrary bytes to the methods of external
// senders, joiner-signed proposals, ReInit and branches that decode MLS
// objects (an ExternalSender, GroupInfos, ratchet trees, key packages,
// Welcomes): none panics, and each failure is a classified gRPC status.
func FuzzServerResumeInputs(f *testing.F) {
	s := newServer()
	alice, _, commit, _ := fuzzGroup(f, s)
	gi, err := s.GroupInfo(context.Background(), &mlsinteroppb.GroupInfoRequest{StateId: alice, ExternalTree: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(gi.GroupInfo)
	f.Add(gi.RatchetTree)
	f.Add(commit)
	f.Add([]byte{0x20})
	f.Fuzz(func(t *testing.T, in []byte) {
		s := newServer()
		alice, bob, _, _ := fuzzGroup(t, s)
		ctx := context.Background()
		check := func(what string, err error) {
			if err == nil {
				return
			}
			switch status.Code(err) {
			case codes.InvalidArgument, codes.FailedPrecondition, codes.NotFound, codes.Unimplemented:
			default:
				t.Fatalf("%s: unclassified error %v", what, err)
			}
		}
		_, err := s.AddExternalSigner(ctx, &mlsinteroppb.AddExternalSignerRequest{StateId: alice, ExternalSender: in})
		check("AddExternalSigner", err)
		_, err = s.NewMemberAddProposal(ctx, &mlsinteroppb.NewMemberAddProposalRequest{GroupInfo: in, Identity: []byte("eve")})
		check("NewMemberAddProposal", err)
		sg, err := s.CreateExternalSigner(ctx, &mlsinteroppb.CreateExternalSignerRequest{CipherSuite: suite3, Identity: []byte("ds")})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.ExternalSignerProposal(ctx, &mlsinteroppb.ExternalSignerProposalRequest{SignerId: sg.SignerId, GroupInfo: in, RatchetTree: in,
			Description: &mlsinteroppb.ProposalDescription{ProposalType: []byte("remove"), RemovedId: []byte("bob")}})
		check("ExternalSignerProposal", err)
		_, err = s.CreateBranch(ctx, &mlsinteroppb.CreateBranchRequest{StateId: alice, GroupId: []byte("b"), KeyPackages: [][]byte{in}})
		check("CreateBranch", err)
		kp, err := s.CreateKeyPackage(ctx, &mlsinteroppb.CreateKeyPackageRequest{CipherSuite: suite3, Identity: []byte("bob")})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.HandleBranch(ctx, &mlsinteroppb.HandleBranchRequest{StateId: bob, TransactionId: kp.TransactionId, Welcome: in, RatchetTree: in})
		check("HandleBranch", err)
	})
}
