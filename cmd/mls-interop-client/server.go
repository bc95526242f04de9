package main

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/keypackage"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
	"github.com/regroup-mls/regroup/proto/mlsinteroppb"
)

// pastEpochs is how many past epochs a state keeps for late application
// messages (the harness's out-of-order-across-epochs script).
const pastEpochs = 8

// transaction is a key package waiting for its Welcome.
type transaction struct {
	suite   *ciphersuite.Suite
	kp      *keypackage.Bundle
	sigPriv []byte
	psks    group.MapPSKStore
}

// state is one member's group. own holds the encodings of the proposals
// this member sent in the current epoch, which a Commit request lists by
// reference but the engine already caches.
type state struct {
	suite   *ciphersuite.Suite
	g       *group.Group
	wf      framing.WireFormat
	psks    group.MapPSKStore
	own     map[string]bool
	pending *group.Pending
}

// server implements the MLSClient service over adapters/mls/group. Every
// id (state or transaction) comes from one counter, so StorePSK can tell
// them apart.
type server struct {
	mlsinteroppb.UnimplementedMLSClientServer

	mu      sync.Mutex
	next    uint32
	txs     map[uint32]*transaction
	states  map[uint32]*state
	signers map[uint32]*signer
	reinits map[uint32]*reinit
}

var _ mlsinteroppb.MLSClientServer = (*server)(nil)

func newServer() *server {
	return &server{txs: map[uint32]*transaction{}, states: map[uint32]*state{}, signers: map[uint32]*signer{}, reinits: map[uint32]*reinit{}}
}

func (s *server) id() uint32 {
	s.next++
	return s.next
}

func (s *server) state(id uint32) (*state, error) {
	st, ok := s.states[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no group state %d", id)
	}
	return st, nil
}

func (s *server) addState(st *state) uint32 {
	id := s.id()
	st.g.SetPastEpochs(pastEpochs)
	s.states[id] = st
	return id
}

func wireFormat(encrypt bool) framing.WireFormat {
	if encrypt {
		return framing.WirePrivateMessage
	}
	return framing.WirePublicMessage
}

// engineErr maps an engine error to a gRPC status keeping its text.
func engineErr(what string, err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, group.ErrUnsupported):
		code = codes.Unimplemented
	case errors.Is(err, group.ErrUnknownPSK), errors.Is(err, group.ErrRemoved), errors.Is(err, group.ErrWrongEpoch):
		code = codes.FailedPrecondition
	case errors.Is(err, group.ErrInvalid), errors.Is(err, group.ErrWrongGroup), errors.Is(err, group.ErrUndecryptable),
		errors.Is(err, keypackage.ErrInvalid), errors.Is(err, codec.ErrTruncated), errors.Is(err, codec.ErrInvalidValue),
		errors.Is(err, message.ErrUnknownType):
		code = codes.InvalidArgument
	}
	return status.Errorf(code, "%s: %v", what, err)
}

func suiteOf(id uint32) (*ciphersuite.Suite, error) {
	if id > 0xffff {
		return nil, status.Errorf(codes.InvalidArgument, "cipher suite %d out of range", id)
	}
	s, err := ciphersuite.Lookup(ciphersuite.ID(id))
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "cipher suite %#04x: %v", id, err)
	}
	return s, nil
}

// newKeyPackage makes a signature key and a key package with a basic
// credential.
func newKeyPackage(s *ciphersuite.Suite, identity []byte) (*keypackage.Bundle, []byte, error) {
	sigPriv, _, err := s.GenerateSignatureKey()
	if err != nil {
		return nil, nil, err
	}
	now := uint64(time.Now().Unix())
	kp, err := keypackage.New(s, &keypackage.Options{
		Credential:    message.Credential{Type: message.CredentialBasic, Identity: identity},
		SignaturePriv: sigPriv,
		Lifetime:      message.Lifetime{NotBefore: now - 3600, NotAfter: now + 90*24*3600},
	})
	return kp, sigPriv, err
}

func encode(m *framing.MLSMessage) ([]byte, error) {
	m.Version = message.MLS10
	b, err := codec.Marshal(m)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode message: %v", err)
	}
	return b, nil
}

func decode(what string, b []byte, wf ...framing.WireFormat) (*framing.MLSMessage, error) {
	m, err := framing.Decode(b)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s: %v", what, err)
	}
	for _, w := range wf {
		if m.WireFormat == w {
			return m, nil
		}
	}
	return nil, status.Errorf(codes.InvalidArgument, "%s: wire format %d", what, m.WireFormat)
}

// Name returns the stack's name.
func (s *server) Name(context.Context, *mlsinteroppb.NameRequest) (*mlsinteroppb.NameResponse, error) {
	return &mlsinteroppb.NameResponse{Name: "regroup"}, nil
}

// SupportedCiphersuites lists the engine's suites.
func (s *server) SupportedCiphersuites(context.Context, *mlsinteroppb.SupportedCiphersuitesRequest) (*mlsinteroppb.SupportedCiphersuitesResponse, error) {
	res := &mlsinteroppb.SupportedCiphersuitesResponse{}
	for _, id := range ciphersuite.Supported() {
		res.Ciphersuites = append(res.Ciphersuites, uint32(id))
	}
	return res, nil
}

// CreateGroup starts a group whose only member has a basic credential.
func (s *server) CreateGroup(_ context.Context, req *mlsinteroppb.CreateGroupRequest) (*mlsinteroppb.CreateGroupResponse, error) {
	cs, err := suiteOf(req.CipherSuite)
	if err != nil {
		return nil, err
	}
	kp, sigPriv, err := newKeyPackage(cs, req.Identity)
	if err != nil {
		return nil, engineErr("create group", err)
	}
	psks := group.MapPSKStore{}
	g, err := group.Create(cs, &group.CreateOptions{GroupID: req.GroupId, Leaf: &kp.KeyPackage.LeafNode,
		EncryptionPriv: kp.EncryptionPriv, SignaturePriv: sigPriv, PSKs: psks})
	if err != nil {
		return nil, engineErr("create group", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.addState(&state{suite: cs, g: g, wf: wireFormat(req.EncryptHandshake), psks: psks, own: map[string]bool{}})
	return &mlsinteroppb.CreateGroupResponse{StateId: id}, nil
}

// CreateKeyPackage makes a key package (as an MLSMessage) and keeps its
// private keys under a transaction id for JoinGroup.
func (s *server) CreateKeyPackage(_ context.Context, req *mlsinteroppb.CreateKeyPackageRequest) (*mlsinteroppb.CreateKeyPackageResponse, error) {
	cs, err := suiteOf(req.CipherSuite)
	if err != nil {
		return nil, err
	}
	kp, sigPriv, err := newKeyPackage(cs, req.Identity)
	if err != nil {
		return nil, engineErr("create key package", err)
	}
	b, err := encode(&framing.MLSMessage{WireFormat: framing.WireKeyPackage, KeyPackage: kp.KeyPackage})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.id()
	s.txs[id] = &transaction{suite: cs, kp: kp, sigPriv: sigPriv, psks: group.MapPSKStore{}}
	return &mlsinteroppb.CreateKeyPackageResponse{TransactionId: id, KeyPackage: b,
		InitPriv: kp.InitPriv, EncryptionPriv: kp.EncryptionPriv, SignaturePriv: sigPriv}, nil
}

// JoinGroup processes a Welcome for a transaction's key package, with the
// ratchet tree from the Welcome or from the request.
func (s *server) JoinGroup(_ context.Context, req *mlsinteroppb.JoinGroupRequest) (*mlsinteroppb.JoinGroupResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, ok := s.txs[req.TransactionId]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no transaction %d", req.TransactionId)
	}
	w, err := decode("welcome", req.Welcome, framing.WireWelcome)
	if err != nil {
		return nil, err
	}
	opts := &group.JoinOptions{KeyPackage: tx.kp.KeyPackage, InitPriv: tx.kp.InitPriv,
		EncryptionPriv: tx.kp.EncryptionPriv, SignaturePriv: tx.sigPriv, PSKs: tx.psks}
	if len(req.RatchetTree) > 0 {
		if err := codec.Unmarshal(req.RatchetTree, &opts.Tree); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "ratchet tree: %v", err)
		}
	}
	g, err := group.Join(tx.suite, w.Welcome, opts)
	if err != nil {
		return nil, engineErr("join group", err)
	}
	delete(s.txs, req.TransactionId)
	id := s.addState(&state{suite: tx.suite, g: g, wf: wireFormat(req.EncryptHandshake), psks: tx.psks, own: map[string]bool{}})
	return &mlsinteroppb.JoinGroupResponse{StateId: id, EpochAuthenticator: g.EpochAuthenticator()}, nil
}

// ExternalJoin joins a group by an external commit (§12.4.3.2) from its
// GroupInfo, removing the joiner's prior leaf (same identity) when asked.
// The commit is a PublicMessage, as §12.4.3.2 requires.
func (s *server) ExternalJoin(_ context.Context, req *mlsinteroppb.ExternalJoinRequest) (*mlsinteroppb.ExternalJoinResponse, error) {
	m, err := decode("group info", req.GroupInfo, framing.WireGroupInfo)
	if err != nil {
		return nil, err
	}
	gi := m.GroupInfo
	cs, err := suiteOf(uint32(gi.GroupContext.CipherSuite))
	if err != nil {
		return nil, err
	}
	kp, sigPriv, err := newKeyPackage(cs, req.Identity)
	if err != nil {
		return nil, engineErr("external join", err)
	}
	psks := group.MapPSKStore{}
	leaf := kp.KeyPackage.LeafNode
	opts := &group.ExternalJoinOptions{GroupInfo: gi, Leaf: &leaf, SignaturePriv: sigPriv, PSKs: psks}
	for _, p := range req.Psks { // external PSKs, injected by PreSharedKey proposals of the commit
		psks[string(p.PskId)] = append([]byte(nil), p.PskSecret...)
		opts.PreSharedKeys = append(opts.PreSharedKeys, message.PreSharedKeyID{Type: message.PSKExternal, ID: p.PskId})
	}
	tree := opts.Tree
	if len(req.RatchetTree) > 0 {
		if err := codec.Unmarshal(req.RatchetTree, &opts.Tree); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "ratchet tree: %v", err)
		}
		tree = opts.Tree
	}
	if data, ok := gi.Extensions.Find(message.ExtRatchetTree); ok {
		if err := codec.Unmarshal(data, &tree); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "group info ratchet_tree: %v", err)
		}
	}
	if req.RemovePrior {
		prior, ok := leafWithIdentity(tree, req.Identity)
		if !ok {
			return nil, status.Errorf(codes.NotFound, "external join: no prior leaf with identity %q", req.Identity)
		}
		opts.Resync = &prior
	}
	g, commit, err := group.JoinExternal(cs, opts)
	if err != nil {
		return nil, engineErr("external join", err)
	}
	b, err := encode(commit)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.addState(&state{suite: cs, g: g, wf: wireFormat(req.EncryptHandshake), psks: psks, own: map[string]bool{}})
	return &mlsinteroppb.ExternalJoinResponse{StateId: id, Commit: b, EpochAuthenticator: g.EpochAuthenticator()}, nil
}

// leafWithIdentity finds the leaf of a received tree whose credential
// identity is id.
func leafWithIdentity(tree message.RatchetTree, id []byte) (treemath.LeafIndex, bool) {
	for i := 0; i < len(tree); i += 2 {
		if n := tree[i]; n != nil && n.Leaf != nil && bytes.Equal(n.Leaf.Credential.Identity, id) {
			return treemath.LeafIndex(i / 2), true
		}
	}
	return 0, false
}

// GroupInfo returns the signed GroupInfo of the current epoch, with the
// ratchet tree inside or, for external_tree, beside it.
func (s *server) GroupInfo(_ context.Context, req *mlsinteroppb.GroupInfoRequest) (*mlsinteroppb.GroupInfoResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(req.StateId)
	if err != nil {
		return nil, err
	}
	gi, err := st.g.GroupInfo(!req.ExternalTree)
	if err != nil {
		return nil, engineErr("group info", err)
	}
	res := &mlsinteroppb.GroupInfoResponse{}
	if res.GroupInfo, err = encode(&framing.MLSMessage{WireFormat: framing.WireGroupInfo, GroupInfo: gi}); err != nil {
		return nil, err
	}
	if req.ExternalTree {
		if res.RatchetTree, err = marshalTree(st.g); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// StateAuth returns the epoch authenticator.
func (s *server) StateAuth(_ context.Context, req *mlsinteroppb.StateAuthRequest) (*mlsinteroppb.StateAuthResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(req.StateId)
	if err != nil {
		return nil, err
	}
	return &mlsinteroppb.StateAuthResponse{StateAuthSecret: st.g.EpochAuthenticator()}, nil
}

// Export runs the MLS exporter.
func (s *server) Export(_ context.Context, req *mlsinteroppb.ExportRequest) (*mlsinteroppb.ExportResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(req.StateId)
	if err != nil {
		return nil, err
	}
	if req.KeyLength > 0xffff {
		return nil, status.Errorf(codes.InvalidArgument, "export length %d exceeds 65535", req.KeyLength)
	}
	out, err := st.g.Export(req.Label, req.Context, int(req.KeyLength))
	if err != nil {
		return nil, engineErr("export", err)
	}
	return &mlsinteroppb.ExportResponse{ExportedSecret: out}, nil
}

// Protect encrypts application data with its authenticated_data as a
// PrivateMessage of the current epoch.
func (s *server) Protect(_ context.Context, req *mlsinteroppb.ProtectRequest) (*mlsinteroppb.ProtectResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(req.StateId)
	if err != nil {
		return nil, err
	}
	m, err := st.g.ProtectWithAuthenticatedData(req.Plaintext, req.AuthenticatedData)
	if err != nil {
		return nil, engineErr("protect", err)
	}
	b, err := encode(m)
	if err != nil {
		return nil, err
	}
	return &mlsinteroppb.ProtectResponse{Ciphertext: b}, nil
}

// Unprotect decrypts an application message of the current or a retained
// past epoch. The authenticated_data is the PrivateMessage's, which the
// AEAD authenticates.
func (s *server) Unprotect(_ context.Context, req *mlsinteroppb.UnprotectRequest) (*mlsinteroppb.UnprotectResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(req.StateId)
	if err != nil {
		return nil, err
	}
	m, err := decode("ciphertext", req.Ciphertext, framing.WirePrivateMessage)
	if err != nil {
		return nil, err
	}
	data, _, err := st.g.Unprotect(m)
	if err != nil {
		return nil, engineErr("unprotect", err)
	}
	return &mlsinteroppb.UnprotectResponse{AuthenticatedData: m.Private.AuthenticatedData, Plaintext: data}, nil
}

// StorePSK stores an external PSK for a state or a pending transaction.
func (s *server) StorePSK(_ context.Context, req *mlsinteroppb.StorePSKRequest) (*mlsinteroppb.StorePSKResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var psks group.MapPSKStore
	if st, ok := s.states[req.StateOrTransactionId]; ok {
		psks = st.psks
	} else if tx, ok := s.txs[req.StateOrTransactionId]; ok {
		psks = tx.psks
	} else {
		return nil, status.Errorf(codes.NotFound, "no state or transaction %d", req.StateOrTransactionId)
	}
	psks[string(req.PskId)] = append([]byte(nil), req.PskSecret...)
	return &mlsinteroppb.StorePSKResponse{}, nil
}

// Free forgets a state.
func (s *server) Free(_ context.Context, req *mlsinteroppb.FreeRequest) (*mlsinteroppb.FreeResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.states[req.StateId]; !ok {
		return nil, status.Errorf(codes.NotFound, "no group state %d", req.StateId)
	}
	delete(s.states, req.StateId)
	return &mlsinteroppb.FreeResponse{}, nil
}
