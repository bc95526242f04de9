package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/proto/mlsinteroppb"
)

// suite3 is MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519.
const suite3 = 3

// startClient runs the command on 127.0.0.1 with a free port, as the
// harness would launch it, and returns a gRPC client of it. The server
// stops when the test ends.
func startClient(t *testing.T) mlsinteroppb.MLSClientClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-port", "0"}, pw) }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	addr := strings.TrimSpace(strings.TrimPrefix(line, "mls-interop-client listening on "))
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		cancel()
		t.Fatalf("listening on %q, want 127.0.0.1", addr)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
		pw.Close()
	})
	return mlsinteroppb.NewMLSClientClient(conn)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantCode(t *testing.T, what string, err error, code codes.Code, text string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), text) {
		t.Fatalf("%s: %v, want %v mentioning %q", what, err, code, text)
	}
}

// TestWelcomeJoinGRPC plays welcome_join between two clients over gRPC:
// alice creates a group, bob makes a key package, alice adds it by an
// AddProposal and a Commit, bob joins from the Welcome; their
// authenticators and exporters agree and application messages go both
// ways, in every suite the client lists, with the commit sent as a
// PublicMessage and as a PrivateMessage.
func TestWelcomeJoinGRPC(t *testing.T) {
	a, b := startClient(t), startClient(t)
	ctx := testCtx(t)
	name, err := a.Name(ctx, &mlsinteroppb.NameRequest{})
	if err != nil || name.Name != "regroup" {
		t.Fatalf("Name: %v %v", name, err)
	}
	cs, err := a.SupportedCiphersuites(ctx, &mlsinteroppb.SupportedCiphersuitesRequest{})
	if err != nil || !containsSuite(cs.Ciphersuites, suite3) || !containsSuite(cs.Ciphersuites, 1) {
		t.Fatalf("SupportedCiphersuites: %v %v", cs, err)
	}
	t.Logf("suites: %v", cs.Ciphersuites)
	for _, encrypt := range []bool{false, true} {
		for _, suite := range cs.Ciphersuites {
			alice, err := a.CreateGroup(ctx, &mlsinteroppb.CreateGroupRequest{GroupId: []byte("wj"), CipherSuite: suite, EncryptHandshake: encrypt, Identity: []byte("alice")})
			if err != nil {
				t.Fatal(err)
			}
			kp, err := b.CreateKeyPackage(ctx, &mlsinteroppb.CreateKeyPackageRequest{CipherSuite: suite, Identity: []byte("bob")})
			if err != nil {
				t.Fatal(err)
			}
			prop, err := a.AddProposal(ctx, &mlsinteroppb.AddProposalRequest{StateId: alice.StateId, KeyPackage: kp.KeyPackage})
			if err != nil {
				t.Fatal(err)
			}
			commit, err := a.Commit(ctx, &mlsinteroppb.CommitRequest{StateId: alice.StateId, ByReference: [][]byte{prop.Proposal}, ForcePath: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(commit.Welcome) == 0 || len(commit.RatchetTree) != 0 {
				t.Fatalf("commit: welcome %d bytes, ratchet tree %d bytes", len(commit.Welcome), len(commit.RatchetTree))
			}
			if wf := uint16(commit.Commit[2])<<8 | uint16(commit.Commit[3]); (wf == 2) != encrypt {
				t.Fatalf("commit wire format %d with encrypt_handshake %v", wf, encrypt)
			}
			ah, err := a.HandlePendingCommit(ctx, &mlsinteroppb.HandlePendingCommitRequest{StateId: alice.StateId})
			if err != nil {
				t.Fatal(err)
			}
			bob, err := b.JoinGroup(ctx, &mlsinteroppb.JoinGroupRequest{TransactionId: kp.TransactionId, Welcome: commit.Welcome, EncryptHandshake: encrypt, Identity: []byte("bob")})
			if err != nil {
				t.Fatalf("JoinGroup: %v", err)
			}
			if !bytes.Equal(ah.EpochAuthenticator, bob.EpochAuthenticator) {
				t.Fatal("epoch authenticators differ after the join")
			}
			members := []member{{a, alice.StateId}, {b, bob.StateId}}
			verifyGroup(t, ctx, "welcome_join", members)
		}
	}
}

// member is one state on one client.
type member struct {
	c  mlsinteroppb.MLSClientClient
	id uint32
}

// verifyGroup is the harness's "verify group state": equal StateAuth and
// Export, and a message from every member that every other decrypts.
func verifyGroup(t *testing.T, ctx context.Context, step string, ms []member) {
	t.Helper()
	verifyGroupFrom(t, ctx, step, ms, len(ms))
}

// verifyGroupFrom is verifyGroup with messages from the first senders
// members only.
func verifyGroupFrom(t *testing.T, ctx context.Context, step string, ms []member, senders int) {
	t.Helper()
	var auth, exp []byte
	for i, m := range ms {
		sa, err := m.c.StateAuth(ctx, &mlsinteroppb.StateAuthRequest{StateId: m.id})
		if err != nil {
			t.Fatalf("%s: StateAuth: %v", step, err)
		}
		ex, err := m.c.Export(ctx, &mlsinteroppb.ExportRequest{StateId: m.id, Label: "interop", Context: []byte("ctx"), KeyLength: 32})
		if err != nil {
			t.Fatalf("%s: Export: %v", step, err)
		}
		if i == 0 {
			auth, exp = sa.StateAuthSecret, ex.ExportedSecret
		} else if !bytes.Equal(auth, sa.StateAuthSecret) || !bytes.Equal(exp, ex.ExportedSecret) {
			t.Fatalf("%s: member %d disagrees on StateAuth or Export", step, i)
		}
	}
	for i, from := range ms[:senders] {
		text := []byte(step + " message")
		ct, err := from.c.Protect(ctx, &mlsinteroppb.ProtectRequest{StateId: from.id, Plaintext: text})
		if err != nil {
			t.Fatalf("%s: Protect: %v", step, err)
		}
		for j, to := range ms {
			if i == j {
				continue
			}
			pt, err := to.c.Unprotect(ctx, &mlsinteroppb.UnprotectRequest{StateId: to.id, Ciphertext: ct.Ciphertext})
			if err != nil || !bytes.Equal(pt.Plaintext, text) || len(pt.AuthenticatedData) != 0 {
				t.Fatalf("%s: member %d reads member %d: %v %v", step, j, i, pt, err)
			}
		}
	}
}

func containsSuite(ids []uint32, id uint32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// TestBadRequestsAnswerErrors checks that bad input is InvalidArgument,
// NotFound or FailedPrecondition naming what was wrong, never a success.
func TestBadRequestsAnswerErrors(t *testing.T) {
	c := startClient(t)
	ctx := testCtx(t)
	g, err := c.CreateGroup(ctx, &mlsinteroppb.CreateGroupRequest{GroupId: []byte("gaps"), CipherSuite: suite3, Identity: []byte("alice")})
	if err != nil {
		t.Fatal(err)
	}
	gi, err := c.GroupInfo(ctx, &mlsinteroppb.GroupInfoRequest{StateId: g.StateId})
	if err != nil || len(gi.GroupInfo) == 0 || len(gi.RatchetTree) != 0 {
		t.Fatalf("GroupInfo: %v", err)
	}
	gi, err = c.GroupInfo(ctx, &mlsinteroppb.GroupInfoRequest{StateId: g.StateId, ExternalTree: true})
	if err != nil || len(gi.RatchetTree) == 0 {
		t.Fatalf("GroupInfo with external tree: %v", err)
	}
	_, err = c.ExternalJoin(ctx, &mlsinteroppb.ExternalJoinRequest{GroupInfo: gi.GroupInfo, Identity: []byte("bob")})
	wantCode(t, "ExternalJoin without a tree", err, codes.InvalidArgument, "ratchet tree")
	_, err = c.ExternalJoin(ctx, &mlsinteroppb.ExternalJoinRequest{GroupInfo: gi.GroupInfo, RatchetTree: gi.RatchetTree, Identity: []byte("carol"), RemovePrior: true})
	wantCode(t, "ExternalJoin removing a prior leaf that is absent", err, codes.NotFound, "prior leaf")
	_, err = c.CreateBranch(ctx, &mlsinteroppb.CreateBranchRequest{StateId: g.StateId})
	wantCode(t, "CreateBranch without a group id", err, codes.InvalidArgument, "group id")
	_, err = c.ReInitProposal(ctx, &mlsinteroppb.ReInitProposalRequest{StateId: g.StateId})
	wantCode(t, "ReInitProposal to suite 0", err, codes.InvalidArgument, "cipher suite")
	_, err = c.ReInitWelcome(ctx, &mlsinteroppb.ReInitWelcomeRequest{ReinitId: 999})
	wantCode(t, "unknown reinit", err, codes.NotFound, "999")
	_, err = c.HandlePendingReInitCommit(ctx, &mlsinteroppb.HandlePendingCommitRequest{StateId: g.StateId})
	wantCode(t, "no pending reinit commit", err, codes.FailedPrecondition, "pending")
	_, err = c.NewMemberAddProposal(ctx, &mlsinteroppb.NewMemberAddProposalRequest{GroupInfo: []byte{0, 1, 0, 4, 0xff}})
	wantCode(t, "NewMemberAddProposal of a truncated group info", err, codes.InvalidArgument, "group info")
	_, err = c.ExternalSignerProposal(ctx, &mlsinteroppb.ExternalSignerProposalRequest{SignerId: 999, GroupInfo: gi.GroupInfo})
	wantCode(t, "unknown external signer", err, codes.NotFound, "999")
	_, err = c.AddExternalSigner(ctx, &mlsinteroppb.AddExternalSignerRequest{StateId: g.StateId, ExternalSender: []byte{9}})
	wantCode(t, "garbage external sender", err, codes.InvalidArgument, "external sender")
	_, err = c.Commit(ctx, &mlsinteroppb.CommitRequest{StateId: g.StateId, ByValue: []*mlsinteroppb.ProposalDescription{{ProposalType: []byte("reinit")}}})
	wantCode(t, "reinit by value to suite 0", err, codes.InvalidArgument, "cipher suite")
	_, err = c.StateAuth(ctx, &mlsinteroppb.StateAuthRequest{StateId: 999})
	wantCode(t, "unknown state", err, codes.NotFound, "999")
	_, err = c.JoinGroup(ctx, &mlsinteroppb.JoinGroupRequest{TransactionId: 999})
	wantCode(t, "unknown transaction", err, codes.NotFound, "999")
	kp, err := c.CreateKeyPackage(ctx, &mlsinteroppb.CreateKeyPackageRequest{CipherSuite: suite3, Identity: []byte("bob")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.JoinGroup(ctx, &mlsinteroppb.JoinGroupRequest{TransactionId: kp.TransactionId, Welcome: []byte{0, 1, 0, 3, 0xff}})
	wantCode(t, "truncated welcome", err, codes.InvalidArgument, "welcome")
	_, err = c.Unprotect(ctx, &mlsinteroppb.UnprotectRequest{StateId: g.StateId, Ciphertext: gi.GroupInfo})
	wantCode(t, "group info as ciphertext", err, codes.InvalidArgument, "wire format")
	_, err = c.CreateGroup(ctx, &mlsinteroppb.CreateGroupRequest{GroupId: []byte("x"), CipherSuite: 0x7777, Identity: []byte("a")})
	wantCode(t, "unknown suite", err, codes.InvalidArgument, "cipher suite")
	_, err = c.AddProposal(ctx, &mlsinteroppb.AddProposalRequest{StateId: g.StateId, KeyPackage: []byte{1, 2, 3}})
	wantCode(t, "garbage key package", err, codes.InvalidArgument, "key package")
	_, err = c.RemoveProposal(ctx, &mlsinteroppb.RemoveProposalRequest{StateId: g.StateId, RemovedId: []byte("nobody")})
	wantCode(t, "remove of a stranger", err, codes.NotFound, "nobody")
	_, err = c.HandlePendingCommit(ctx, &mlsinteroppb.HandlePendingCommitRequest{StateId: g.StateId})
	wantCode(t, "no pending commit", err, codes.FailedPrecondition, "pending")
	_, err = c.ExternalPSKProposal(ctx, &mlsinteroppb.ExternalPSKProposalRequest{StateId: g.StateId, PskId: []byte("unknown")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Commit(ctx, &mlsinteroppb.CommitRequest{StateId: g.StateId})
	wantCode(t, "commit of an unknown PSK", err, codes.FailedPrecondition, "pre-shared key")
	if _, err := c.Free(ctx, &mlsinteroppb.FreeRequest{StateId: g.StateId}); err != nil {
		t.Fatal(err)
	}
	_, err = c.StateAuth(ctx, &mlsinteroppb.StateAuthRequest{StateId: g.StateId})
	wantCode(t, "freed state", err, codes.NotFound, "")
}

// TestFlags checks the command line: a port out of range and an unknown
// flag are errors, -h is flag.ErrHelp.
func TestFlags(t *testing.T) {
	ctx := testCtx(t)
	if err := run(ctx, []string{"-port", "70000"}, io.Discard); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("port 70000: %v", err)
	}
	if err := run(ctx, []string{"-nope"}, io.Discard); err == nil {
		t.Fatal("unknown flag accepted")
	}
	if err := run(ctx, []string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
}
