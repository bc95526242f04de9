package mlstest

import (
	"context"
	"errors"

	"github.com/regroup-mls/regroup/ports"
)

var selfRemoveCases = []testCase{
	{"SelfRemove/AnotherMembersCommitRemovesTheProposer", testSelfRemove},
	{"SelfRemove/NeedsACapableGroup", testSelfRemoveNeedsCapability},
}

// selfRemover returns m's engine as a [ports.MLSSelfRemove], skipping the
// case when the engine does not implement it.
func (m *member) selfRemover() ports.MLSSelfRemove {
	m.e.t.Helper()
	sr, ok := m.mls.(ports.MLSSelfRemove)
	if !ok {
		m.e.t.Skip("engine does not implement ports.MLSSelfRemove")
	}
	return sr
}

// capableKeyPackage is a key package of m that advertises the draft
// SelfRemove proposal type.
func (m *member) capableKeyPackage() ports.KeyPackageBundle {
	m.e.t.Helper()
	opts := m.keyPackageOptions()
	opts.CapabilityProposals = []uint16{ports.ProposalSelfRemove}
	b, err := m.mls.CreateKeyPackage(m.e.ctx, opts)
	if err != nil {
		m.e.t.Fatalf("%s: CreateKeyPackage: %v", m.name, err)
	}
	return b
}

// testSelfRemove (draft-ietf-mls-extensions SelfRemove): in a group whose
// three members advertise SelfRemove, b proposes its own removal; a
// processes the proposal and its next commit, with no options, includes
// it; c and b process that commit, b reads RemovesSelf, and a and c agree
// on the two-member epoch.
func testSelfRemove(e *env) {
	gid := groupID("selfremove")
	a, b, c := e.newMember("a"), e.newMember("b"), e.newMember("c")
	sr := b.selfRemover()
	kpa := a.capableKeyPackage()
	a.must("CreateGroup", func(ctx context.Context, tx ports.Tx) error {
		_, err := a.mls.CreateGroup(ctx, tx, gid, kpa, nil)
		return err
	})
	kpb, kpc := b.capableKeyPackage(), c.capableKeyPackage()
	out, _ := a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kpb.KeyPackage, kpc.KeyPackage}})
	b.join(out.Welcome, kpb, a)
	c.join(out.Welcome, kpc, a)
	agree(gid, 1, a, b, c)

	var msg []byte
	b.must("ProposeSelfRemove", func(ctx context.Context, tx ports.Tx) (err error) {
		msg, err = sr.ProposeSelfRemove(ctx, tx, gid)
		return err
	})
	for _, m := range []*member{a, c} {
		p, err := m.process(gid, msg)
		if err != nil || p.Kind != ports.ProcessedProposal {
			e.t.Fatalf("%s: Process the SelfRemove: kind %d, %v", m.name, p.Kind, err)
		}
	}
	out, _ = a.commitAndMerge(gid, ports.CommitOptions{})
	if len(out.Proposals) != 1 || out.Proposals[0].Type != ports.ProposalSelfRemove || !out.Proposals[0].ByReference ||
		out.Proposals[0].Removed.InboxID != b.inbox {
		e.t.Fatalf("a's commit proposals: %+v, want b's SelfRemove by reference", out.Proposals)
	}
	c.applyCommit(gid, out.Commit)
	p, err := b.process(gid, out.Commit)
	if err != nil || !p.RemovesSelf {
		e.t.Fatalf("b: Process the commit of its SelfRemove: RemovesSelf %v, %v", p.RemovesSelf, err)
	}
	if vs := agree(gid, 2, a, c); len(vs[0].Members) != 2 {
		e.t.Fatalf("after b's SelfRemove: %d members, want 2", len(vs[0].Members))
	}
}

// testSelfRemoveNeedsCapability: in a group whose members do not
// advertise SelfRemove, ProposeSelfRemove fails with ErrUnsupported.
func testSelfRemoveNeedsCapability(e *env) {
	gid, _, b := e.twoMembers("selfremove-incapable")
	sr := b.selfRemover()
	err := b.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := sr.ProposeSelfRemove(ctx, tx, gid)
		return err
	})
	if !errors.Is(err, ports.ErrUnsupported) {
		e.t.Fatalf("ProposeSelfRemove in a group that is not capable: %v, want ErrUnsupported", err)
	}
}
