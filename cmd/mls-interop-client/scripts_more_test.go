package main

import (
	"crypto/rand"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/proto/mlsinteroppb"
)

// description is the proposal an external signer sends
// (externalSignerProposal) or a ReInit's parameters.
type description struct {
	ProposalType      string `json:"proposalType"`
	KeyPackage        int    `json:"keyPackage"`
	PskID             int    `json:"pskID"`
	EpochID           uint64 `json:"epochID"`
	Removed           string `json:"removed"`
	Extensions        []ext  `json:"extensions"`
	ChangeGroupID     bool   `json:"changeGroupID"`
	ChangeCipherSuite bool   `json:"changeCipherSuite"`
}

// signerRef is an external signer of the script: its id at its client
// and its index in the group's external_senders.
type signerRef struct {
	id    uint32
	index uint32
}

// doMore plays the actions of external_proposals.json, reinit.json and
// branch.json.
func (r *runner) doMore(i int, s *step) error {
	switch s.Action {
	case "newMemberAddProposal":
		gi, err := r.client(s.Actor).GroupInfo(r.ctx, &mlsinteroppb.GroupInfoRequest{StateId: r.states[s.Actor]})
		if err != nil {
			return err
		}
		res, err := r.client(s.Joiner).NewMemberAddProposal(r.ctx, &mlsinteroppb.NewMemberAddProposalRequest{GroupInfo: gi.GroupInfo, Identity: []byte(s.Joiner)})
		if err != nil {
			return err
		}
		r.txs[s.Joiner], r.outputs[i] = res.TransactionId, res.Proposal
		return nil
	case "addExternalSigner":
		sg, err := r.client(s.Signer).CreateExternalSigner(r.ctx, &mlsinteroppb.CreateExternalSignerRequest{CipherSuite: r.suite, Identity: []byte(s.Signer)})
		if err != nil {
			return err
		}
		p, err := r.client(s.Actor).AddExternalSigner(r.ctx, &mlsinteroppb.AddExternalSignerRequest{StateId: r.states[s.Actor], ExternalSender: sg.ExternalSender})
		if err != nil {
			return err
		}
		r.signers[s.Signer] = signerRef{id: sg.SignerId, index: uint32(len(r.signers))}
		r.outputs[i] = p.Proposal
		return nil
	case "externalSignerProposal":
		sg, ok := r.signers[s.Actor]
		if !ok || s.Description == nil {
			return fmt.Errorf("no signer %q or no description", s.Actor)
		}
		gi, err := r.client(s.Member).GroupInfo(r.ctx, &mlsinteroppb.GroupInfoRequest{StateId: r.states[s.Member], ExternalTree: true})
		if err != nil {
			return err
		}
		d, err := r.describe(s.Description)
		if err != nil {
			return err
		}
		p, err := r.client(s.Actor).ExternalSignerProposal(r.ctx, &mlsinteroppb.ExternalSignerProposalRequest{SignerId: sg.id, SignerIndex: sg.index,
			GroupInfo: gi.GroupInfo, RatchetTree: gi.RatchetTree, Description: d})
		if err != nil {
			return err
		}
		r.outputs[i] = p.Proposal
		return nil
	case "reinit":
		return r.reinit(s)
	case "branch":
		return r.branch(s)
	}
	return status.Errorf(codes.Unimplemented, "script action %q is not played by this test", s.Action)
}

// otherSuite is a supported suite other than the run's, for a ReInit that
// changes it.
func (r *runner) otherSuite() uint32 {
	if r.suite == suite3 {
		return 1
	}
	return suite3
}

// reinit plays a ReInit: the proposer (or an external signer's earlier
// proposal) proposes it, the committer commits it, every other member
// handles the commit, the welcomer creates the successor with everyone's
// new key packages and the rest join it; the successor is verified.
func (r *runner) reinit(s *step) error {
	var proposal []byte
	if s.ExternalReinitProposal != nil {
		proposal = r.outputs[*s.ExternalReinitProposal]
	} else {
		gid, suite := r.groupID(s.ChangeGroupID), r.suite
		if s.ChangeCipherSuite {
			suite = r.otherSuite()
		}
		p, err := r.client(s.Proposer).ReInitProposal(r.ctx, &mlsinteroppb.ReInitProposalRequest{StateId: r.states[s.Proposer],
			CipherSuite: suite, GroupId: gid, Extensions: protoExts(s.Extensions)})
		if err != nil {
			return fmt.Errorf("reinit proposal: %w", err)
		}
		proposal = p.Proposal
	}
	c := r.client(s.Committer)
	res, err := c.ReInitCommit(r.ctx, &mlsinteroppb.CommitRequest{StateId: r.states[s.Committer], ByReference: [][]byte{proposal},
		ForcePath: s.ForcePath2, ExternalTree: s.ExternalTree2})
	if err != nil {
		return fmt.Errorf("reinit commit: %w", err)
	}
	everyone := []string{s.Committer}
	for _, m := range append([]string{s.Proposer, s.Welcomer}, s.Members...) {
		if m != "" && !slices.Contains(everyone, m) && r.states[m] != 0 {
			everyone = append(everyone, m)
		}
	}
	reinits, kps := map[string]uint32{}, map[string][]byte{}
	for _, m := range everyone {
		var h *mlsinteroppb.HandleReInitCommitResponse
		if m == s.Committer {
			h, err = c.HandlePendingReInitCommit(r.ctx, &mlsinteroppb.HandlePendingCommitRequest{StateId: r.states[m]})
		} else {
			h, err = r.client(m).HandleReInitCommit(r.ctx, &mlsinteroppb.HandleCommitRequest{StateId: r.states[m], Proposal: [][]byte{proposal}, Commit: res.Commit})
		}
		if err != nil {
			return fmt.Errorf("%s handles the reinit commit: %w", m, err)
		}
		reinits[m], kps[m] = h.ReinitId, h.KeyPackage
	}
	var others [][]byte
	for _, m := range everyone {
		if m != s.Welcomer {
			others = append(others, kps[m])
		}
	}
	w, err := r.client(s.Welcomer).ReInitWelcome(r.ctx, &mlsinteroppb.ReInitWelcomeRequest{ReinitId: reinits[s.Welcomer], KeyPackage: others,
		ForcePath: s.ForcePath2, ExternalTree: s.ExternalTree2})
	if err != nil {
		return fmt.Errorf("reinit welcome: %w", err)
	}
	if (len(w.RatchetTree) > 0) != s.ExternalTree2 {
		return fmt.Errorf("reinit welcome: ratchet tree of %d bytes with external_tree %v", len(w.RatchetTree), s.ExternalTree2)
	}
	r.transition(s.Welcomer, w.StateId)
	ms := []member{{r.client(s.Welcomer), w.StateId}}
	for _, m := range everyone {
		if m == s.Welcomer {
			continue
		}
		j, err := r.client(m).HandleReInitWelcome(r.ctx, &mlsinteroppb.HandleReInitWelcomeRequest{ReinitId: reinits[m], Welcome: w.Welcome, RatchetTree: w.RatchetTree})
		if err != nil {
			return fmt.Errorf("%s joins the reinitialized group: %w", m, err)
		}
		r.transition(m, j.StateId)
		ms = append(ms, member{r.client(m), j.StateId})
	}
	r.verify("after reinit", ms)
	return nil
}

// groupID is a fresh random group id when change is set, else the
// script's group id.
func (r *runner) groupID(change bool) []byte {
	gid := make([]byte, 16)
	_, _ = rand.Read(gid)
	if !change {
		copy(gid, r.gid)
	}
	return gid
}

// branch plays a subgroup branch: every member makes a key package, the
// actor creates the branch and the members join it from the Welcome.
func (r *runner) branch(s *step) error {
	var kps [][]byte
	for _, m := range s.Members {
		kp, err := r.keyPackage(m)
		if err != nil {
			return err
		}
		kps = append(kps, kp)
	}
	gid := r.groupID(true)
	res, err := r.client(s.Actor).CreateBranch(r.ctx, &mlsinteroppb.CreateBranchRequest{StateId: r.states[s.Actor], GroupId: gid,
		Extensions: protoExts(s.Extensions), KeyPackages: kps, ForcePath: s.ForcePath2, ExternalTree: s.ExternalTree2})
	if err != nil {
		return fmt.Errorf("create branch: %w", err)
	}
	if (len(res.RatchetTree) > 0) != s.ExternalTree2 {
		return fmt.Errorf("branch: ratchet tree of %d bytes with external_tree %v", len(res.RatchetTree), s.ExternalTree2)
	}
	ms := []member{{r.client(s.Actor), res.StateId}}
	joined := map[string]uint32{}
	for _, m := range s.Members {
		h, err := r.client(m).HandleBranch(r.ctx, &mlsinteroppb.HandleBranchRequest{StateId: r.states[m], TransactionId: r.txs[m],
			Welcome: res.Welcome, RatchetTree: res.RatchetTree})
		if err != nil {
			return fmt.Errorf("%s joins the branch: %w", m, err)
		}
		joined[m] = h.StateId
		ms = append(ms, member{r.client(m), h.StateId})
	}
	// The old group goes on beside the branch; the actors follow the branch.
	r.transition(s.Actor, res.StateId)
	for m, id := range joined {
		r.transition(m, id)
	}
	r.verify("after branch", ms)
	return nil
}

// describe turns a script's description into the request's, resolving
// step references.
func (r *runner) describe(d *description) (*mlsinteroppb.ProposalDescription, error) {
	out := &mlsinteroppb.ProposalDescription{ProposalType: []byte(d.ProposalType), RemovedId: []byte(d.Removed),
		EpochId: d.EpochID, Extensions: protoExts(d.Extensions)}
	switch d.ProposalType {
	case "add":
		out.KeyPackage = r.outputs[d.KeyPackage]
	case "externalPSK":
		out.PskId = r.outputs[d.PskID]
	case "reinit":
		out.GroupId, out.CipherSuite = r.groupID(d.ChangeGroupID), r.suite
		if d.ChangeCipherSuite {
			out.CipherSuite = r.otherSuite()
		}
	}
	return out, nil
}
