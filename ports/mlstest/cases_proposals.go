package mlstest

import (
	"context"
	"errors"

	"github.com/regroup-mls/regroup/ports"
)

var proposalCases = []testCase{
	{"Proposals/ByReferenceFilterHoldsOthersOut", testByReferenceFilter},
}

// testByReferenceFilter (COMP-245): b proposes on its own a key update
// (ports.MLSProposals); a, which processed the proposal, commits with an
// IncludeByReference that refuses it — the commit lists no proposal of b
// and b's leaf keeps its key — and then, in the next epoch after b
// proposes again, with a filter that accepts it: the commit includes it
// by reference, named with its proposer, and both members agree.
func testByReferenceFilter(e *env) {
	gid, a, b := e.twoMembers("by-reference")
	bp, ok := b.mls.(ports.MLSProposals)
	if !ok {
		e.t.Skip("the engine does not send standalone proposals (ports.MLSProposals)")
	}
	propose := func() []byte {
		var msg []byte
		b.must("Propose", func(ctx context.Context, tx ports.Tx) (err error) {
			msg, err = bp.Propose(ctx, tx, gid, ports.ProposalOptions{Update: true})
			return err
		})
		if p, err := a.process(gid, msg); err != nil || p.Kind != ports.ProcessedProposal {
			e.t.Fatalf("a: Process of b's proposal: kind %d, %v", p.Kind, err)
		}
		return msg
	}
	propose()
	var seen []ports.Proposal
	out := a.commit(gid, ports.CommitOptions{ForcePath: true, IncludeByReference: func(p ports.Proposal) bool {
		seen = append(seen, p)
		return false
	}})
	if len(seen) != 1 || seen[0].Type != ports.ProposalUpdate || seen[0].Sender.LeafIndex != b.mustLeaf(gid) {
		e.t.Fatalf("IncludeByReference was shown %+v; want b's Update", seen)
	}
	for _, p := range out.Proposals {
		if p.ByReference {
			e.t.Fatalf("the commit includes %+v by reference although the filter refused it", p)
		}
	}
	a.mergePending(gid)
	b.applyCommit(gid, out.Commit)
	agree(gid, 2, a, b)

	propose()
	out = a.commit(gid, ports.CommitOptions{ForcePath: true, IncludeByReference: func(p ports.Proposal) bool { return true }})
	var included bool
	for _, p := range out.Proposals {
		included = included || (p.ByReference && p.Type == ports.ProposalUpdate && p.Sender.LeafIndex == b.mustLeaf(gid))
	}
	if !included {
		e.t.Fatalf("the commit does not include b's Update by reference although the filter accepted it: %+v", out.Proposals)
	}
	a.mergePending(gid)
	b.applyCommit(gid, out.Commit)
	agree(gid, 3, a, b)
	err := b.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := bp.Propose(ctx, tx, []byte("no such group"), ports.ProposalOptions{Update: true})
		return err
	})
	if err == nil {
		e.t.Fatal("Propose in a group the engine does not hold succeeded")
	} else if errors.Is(err, ports.ErrInvalidArgument) {
		e.t.Fatalf("Propose in an unknown group: %v; want a failure naming the group, not the options", err)
	}
}

// mustLeaf returns the member's own leaf index in the group.
func (m *member) mustLeaf(gid []byte) uint32 { return m.mustView(gid).OwnLeaf }
