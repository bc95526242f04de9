package main

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/proto/mlsinteroppb"
)

// fuzzGroup makes a two-member group on one server: alice's and bob's
// state ids, and a commit and an application message of alice's for bob.
func fuzzGroup(t testing.TB, s *server) (alice, bob uint32, commit, app []byte) {
	ctx := context.Background()
	a, err := s.CreateGroup(ctx, &mlsinteroppb.CreateGroupRequest{GroupId: []byte("fuzz"), CipherSuite: suite3, Identity: []byte("alice")})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := s.CreateKeyPackage(ctx, &mlsinteroppb.CreateKeyPackageRequest{CipherSuite: suite3, Identity: []byte("bob")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Commit(ctx, &mlsinteroppb.CommitRequest{StateId: a.StateId, ByValue: []*mlsinteroppb.ProposalDescription{{ProposalType: []byte("add"), KeyPackage: kp.KeyPackage}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.HandlePendingCommit(ctx, &mlsinteroppb.HandlePendingCommitRequest{StateId: a.StateId}); err != nil {
		t.Fatal(err)
	}
	b, err := s.JoinGroup(ctx, &mlsinteroppb.JoinGroupRequest{TransactionId: kp.TransactionId, Welcome: c.Welcome})
	if err != nil {
		t.Fatal(err)
	}
	c, err = s.Commit(ctx, &mlsinteroppb.CommitRequest{StateId: a.StateId, ForcePath: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Protect(ctx, &mlsinteroppb.ProtectRequest{StateId: a.StateId, Plaintext: []byte("hi")})
	if err != nil {
		t.Fatal(err)
	}
	return a.StateId, b.StateId, c.Commit, p.Ciphertext
}

// FuzzServerInputs feeds arbitrary bytes to every method that takes an
// encoded MLS object (HandleCommit, Unprotect, JoinGroup, ExternalJoin,
// AddProposal, the proposals of a Commit): none panics, and each failure
// is a gRPC status naming a class (InvalidArgument, FailedPrecondition,
// NotFound or Unimplemented), never an unclassified one.
func FuzzServerInputs(f *testing.F) {
	s := newServer()
	_, _, commit, app := fuzzGroup(f, s)
	f.Add(commit)
	f.Add(app)
	f.Add([]byte{0, 1, 0, 3})
	f.Add([]byte{0, 1, 0, 4, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		s := newServer()
		_, bob, _, _ := fuzzGroup(t, s)
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
		_, err := s.Unprotect(ctx, &mlsinteroppb.UnprotectRequest{StateId: bob, Ciphertext: in})
		check("Unprotect", err)
		_, err = s.HandleCommit(ctx, &mlsinteroppb.HandleCommitRequest{StateId: bob, Commit: in})
		check("HandleCommit", err)
		_, err = s.HandleCommit(ctx, &mlsinteroppb.HandleCommitRequest{StateId: bob, Proposal: [][]byte{in}, Commit: in})
		check("HandleCommit proposal", err)
		_, err = s.AddProposal(ctx, &mlsinteroppb.AddProposalRequest{StateId: bob, KeyPackage: in})
		check("AddProposal", err)
		_, err = s.ExternalJoin(ctx, &mlsinteroppb.ExternalJoinRequest{GroupInfo: in, Identity: []byte("eve")})
		check("ExternalJoin", err)
		kp, err := s.CreateKeyPackage(ctx, &mlsinteroppb.CreateKeyPackageRequest{CipherSuite: suite3, Identity: []byte("carol")})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.JoinGroup(ctx, &mlsinteroppb.JoinGroupRequest{TransactionId: kp.TransactionId, Welcome: in, RatchetTree: in})
		check("JoinGroup", err)
	})
}
