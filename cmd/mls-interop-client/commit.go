package main

import (
	"bytes"
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/proto/mlsinteroppb"
)

// keyPackage reads a key package sent as an MLSMessage (what
// CreateKeyPackage returns) or as a bare KeyPackage.
func keyPackage(b []byte) (*message.KeyPackage, error) {
	if m, err := framing.Decode(b); err == nil && m.KeyPackage != nil {
		return m.KeyPackage, nil
	}
	var kp message.KeyPackage
	if err := codec.Unmarshal(b, &kp); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "key package: %v", err)
	}
	return &kp, nil
}

// leafOf finds the leaf whose credential identity is id.
func (st *state) leafOf(id []byte) (uint32, error) {
	tree := st.g.Tree()
	for _, l := range tree.Members() {
		if bytes.Equal(tree.Leaf(l).Credential.Identity, id) {
			return uint32(l), nil
		}
	}
	return 0, status.Errorf(codes.NotFound, "no member with identity %q", id)
}

// proposal builds the proposal a description names; a Remove names its
// member by identity and a resumption PSK an epoch of this group.
func (st *state) proposal(d *mlsinteroppb.ProposalDescription) (*message.Proposal, error) {
	switch string(d.ProposalType) {
	case "remove":
		l, err := st.leafOf(d.RemovedId)
		if err != nil {
			return nil, err
		}
		return &message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: l}}, nil
	case "resumptionPSK":
		return pskProposal(st.suite, message.PreSharedKeyID{Type: message.PSKResumption, Usage: message.UsageApplication,
			GroupID: st.g.GroupContext().GroupID, Epoch: d.EpochId})
	}
	return describedProposal(st.suite, d)
}

// describedProposal builds the proposals a description fully names.
func describedProposal(cs *ciphersuite.Suite, d *mlsinteroppb.ProposalDescription) (*message.Proposal, error) {
	switch string(d.ProposalType) {
	case "add":
		kp, err := keyPackage(d.KeyPackage)
		if err != nil {
			return nil, err
		}
		return &message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *kp}}, nil
	case "externalPSK":
		return pskProposal(cs, message.PreSharedKeyID{Type: message.PSKExternal, ID: d.PskId})
	case "groupContextExtensions":
		return &message.Proposal{Type: message.ProposalGroupContextExtensions,
			GroupContextExtensions: &message.GroupContextExtensions{Extensions: extensions(d.Extensions)}}, nil
	case "reinit":
		return reinitProposal(d.GroupId, d.CipherSuite, d.Extensions)
	}
	return nil, status.Errorf(codes.InvalidArgument, "proposal type %q", d.ProposalType)
}

func extensions(in []*mlsinteroppb.Extension) message.Extensions {
	out := message.Extensions{}
	for _, e := range in {
		out = append(out, message.Extension{Type: message.ExtensionType(e.ExtensionType), Data: e.ExtensionData})
	}
	return out
}

// propose sends a proposal in the state's wire format and remembers it as
// this member's own.
func (s *server) propose(id uint32, build func(*state) (*message.Proposal, error)) (*mlsinteroppb.ProposalResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(id)
	if err != nil {
		return nil, err
	}
	p, err := build(st)
	if err != nil {
		return nil, err
	}
	m, err := st.g.Propose(p, st.wf)
	if err != nil {
		return nil, engineErr("propose", err)
	}
	return st.ownProposal(m)
}

// ownProposal encodes a proposal this member sent and remembers it.
func (st *state) ownProposal(m *framing.MLSMessage) (*mlsinteroppb.ProposalResponse, error) {
	b, err := encode(m)
	if err != nil {
		return nil, err
	}
	st.own[string(b)] = true
	return &mlsinteroppb.ProposalResponse{Proposal: b}, nil
}

// AddProposal proposes adding a key package.
func (s *server) AddProposal(_ context.Context, req *mlsinteroppb.AddProposalRequest) (*mlsinteroppb.ProposalResponse, error) {
	return s.propose(req.StateId, func(st *state) (*message.Proposal, error) {
		return st.proposal(&mlsinteroppb.ProposalDescription{ProposalType: []byte("add"), KeyPackage: req.KeyPackage})
	})
}

// UpdateProposal proposes replacing this member's leaf with one under a
// fresh encryption key; the engine keeps the private key until a commit
// applies it.
func (s *server) UpdateProposal(_ context.Context, req *mlsinteroppb.UpdateProposalRequest) (*mlsinteroppb.ProposalResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(req.StateId)
	if err != nil {
		return nil, err
	}
	m, err := st.g.ProposeUpdate(st.wf)
	if err != nil {
		return nil, engineErr("update proposal", err)
	}
	return st.ownProposal(m)
}

// RemoveProposal proposes removing the member with the given identity.
func (s *server) RemoveProposal(_ context.Context, req *mlsinteroppb.RemoveProposalRequest) (*mlsinteroppb.ProposalResponse, error) {
	return s.propose(req.StateId, func(st *state) (*message.Proposal, error) {
		return st.proposal(&mlsinteroppb.ProposalDescription{ProposalType: []byte("remove"), RemovedId: req.RemovedId})
	})
}

// ExternalPSKProposal proposes injecting a stored external PSK.
func (s *server) ExternalPSKProposal(_ context.Context, req *mlsinteroppb.ExternalPSKProposalRequest) (*mlsinteroppb.ProposalResponse, error) {
	return s.propose(req.StateId, func(st *state) (*message.Proposal, error) {
		return st.proposal(&mlsinteroppb.ProposalDescription{ProposalType: []byte("externalPSK"), PskId: req.PskId})
	})
}

// ResumptionPSKProposal proposes injecting the resumption PSK of a recent epoch.
func (s *server) ResumptionPSKProposal(_ context.Context, req *mlsinteroppb.ResumptionPSKProposalRequest) (*mlsinteroppb.ProposalResponse, error) {
	return s.propose(req.StateId, func(st *state) (*message.Proposal, error) {
		return st.proposal(&mlsinteroppb.ProposalDescription{ProposalType: []byte("resumptionPSK"), EpochId: req.EpochId})
	})
}

// GroupContextExtensionsProposal proposes new group context extensions.
func (s *server) GroupContextExtensionsProposal(_ context.Context, req *mlsinteroppb.GroupContextExtensionsProposalRequest) (*mlsinteroppb.ProposalResponse, error) {
	return s.propose(req.StateId, func(st *state) (*message.Proposal, error) {
		return st.proposal(&mlsinteroppb.ProposalDescription{ProposalType: []byte("groupContextExtensions"), Extensions: req.Extensions})
	})
}

// handleProposals caches the proposals of other members; this member's
// own are cached already.
func (st *state) handleProposals(msgs [][]byte) error {
	for _, b := range msgs {
		if st.own[string(b)] {
			continue
		}
		m, err := decode("proposal", b, framing.WirePublicMessage, framing.WirePrivateMessage)
		if err != nil {
			return err
		}
		if err := st.g.HandleProposal(m); err != nil {
			return engineErr("proposal", err)
		}
	}
	return nil
}

// Commit creates a commit of every cached proposal (by reference) and the
// described ones (inline). The state moves to the new epoch only at
// HandlePendingCommit.
func (s *server) Commit(_ context.Context, req *mlsinteroppb.CommitRequest) (*mlsinteroppb.CommitResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(req.StateId)
	if err != nil {
		return nil, err
	}
	if err := st.handleProposals(req.ByReference); err != nil {
		return nil, err
	}
	opts := &group.CommitOptions{Path: req.ForcePath, WireFormat: st.wf, TreeInWelcome: !req.ExternalTree}
	for _, d := range req.ByValue {
		p, err := st.proposal(d)
		if err != nil {
			return nil, err
		}
		opts.Proposals = append(opts.Proposals, p)
	}
	p, err := st.g.Commit(opts)
	if err != nil {
		return nil, engineErr("commit", err)
	}
	res := &mlsinteroppb.CommitResponse{}
	if res.Commit, err = encode(p.Message); err != nil {
		return nil, err
	}
	if p.Welcome != nil {
		if res.Welcome, err = encode(&framing.MLSMessage{WireFormat: framing.WireWelcome, Welcome: p.Welcome}); err != nil {
			return nil, err
		}
	}
	st.pending = p
	if req.ExternalTree {
		if res.RatchetTree, err = codec.Marshal(p.Tree().Export()); err != nil {
			return nil, engineErr("ratchet tree", err)
		}
	}
	return res, nil
}

// HandleCommit processes another member's commit, after caching the
// proposals it references.
func (s *server) HandleCommit(_ context.Context, req *mlsinteroppb.HandleCommitRequest) (*mlsinteroppb.HandleCommitResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(req.StateId)
	if err != nil {
		return nil, err
	}
	if err := st.handleProposals(req.Proposal); err != nil {
		return nil, err
	}
	m, err := decode("commit", req.Commit, framing.WirePublicMessage, framing.WirePrivateMessage)
	if err != nil {
		return nil, err
	}
	if err := st.g.HandleCommit(m); err != nil {
		return nil, engineErr("handle commit", err)
	}
	st.newEpoch()
	return &mlsinteroppb.HandleCommitResponse{StateId: s.alias(st), EpochAuthenticator: st.g.EpochAuthenticator()}, nil
}

// HandlePendingCommit merges this member's own pending commit.
func (s *server) HandlePendingCommit(_ context.Context, req *mlsinteroppb.HandlePendingCommitRequest) (*mlsinteroppb.HandleCommitResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(req.StateId)
	if err != nil {
		return nil, err
	}
	if st.pending == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "state %d has no pending commit", req.StateId)
	}
	if err := st.g.MergePending(st.pending); err != nil {
		return nil, engineErr("merge pending commit", err)
	}
	st.newEpoch()
	return &mlsinteroppb.HandleCommitResponse{StateId: s.alias(st), EpochAuthenticator: st.g.EpochAuthenticator()}, nil
}

func marshalTree(g *group.Group) ([]byte, error) {
	b, err := codec.Marshal(g.Tree().Export())
	if err != nil {
		return nil, engineErr("ratchet tree", err)
	}
	return b, nil
}

// alias gives the state of a new epoch a fresh id, as the harness expects
// of every transition; the previous id stays valid for the same state until
// freed, so a caller that frees it keeps the new one.
func (s *server) alias(st *state) uint32 {
	id := s.id()
	s.states[id] = st
	return id
}

// newEpoch forgets what belonged to the previous epoch.
func (st *state) newEpoch() {
	st.pending = nil
	st.own = map[string]bool{}
}
