package group_test

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// samePlan fails unless the plan describes the split MarshalSplit
// returned for the same state and tag, and its blocks, appended one after
// another into one buffer, are the split's blocks byte for byte.
func samePlan(t *testing.T, step string, sp *group.Split, p *group.SplitPlan) {
	t.Helper()
	if !bytes.Equal(p.Head, sp.Head) || p.Full != sp.Full || p.Size != sp.Size || !slices.Equal(p.Drop, sp.Drop) {
		t.Fatalf("%s: plan head %d bytes, full %v, size %d, drop %v; split %d, %v, %d, %v",
			step, len(p.Head), p.Full, p.Size, p.Drop, len(sp.Head), sp.Full, sp.Size, sp.Drop)
	}
	if ids := slices.Sorted(maps.Keys(sp.Blocks)); !slices.Equal(p.IDs, ids) {
		t.Fatalf("%s: plan blocks %v, split blocks %v", step, p.IDs, ids)
	}
	w := codec.NewWriter(0)
	for i, id := range p.IDs {
		start := w.Len()
		if err := p.AppendBlock(w, i); err != nil {
			t.Fatalf("%s: block %d: %v", step, id, err)
		}
		b, _ := w.Bytes()
		if got := b[start:]; p.Sizes[i] != len(got) || !bytes.Equal(got, sp.Blocks[id]) {
			t.Fatalf("%s: block %d appended as %d bytes (planned %d), split %d bytes", step, id, len(got), p.Sizes[i], len(sp.Blocks[id]))
		}
	}
}

// A planned split is MarshalSplit's split, with the blocks written where
// the caller wants them: for a state never stored (every block) and after
// commits that change a path, add a leaf and remove one (some blocks,
// some dropped), the head, sizes and blocks are byte for byte those
// MarshalSplit returns for a clone of the same state and tag, and both
// states record the same stored form.
func TestPlanSplitIsMarshalSplit(t *testing.T) {
	s, ga, gb := scaleGroup(t, 70)
	planned := gb.Clone()
	tag := newTag(t)
	sp, err := gb.MarshalSplit(tag)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planned.PlanSplit(tag)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Full {
		t.Fatal("the first plan of a joined state is not full")
	}
	samePlan(t, "a state never stored", sp, p)
	steps := []*group.CommitOptions{
		{Path: true},
		{Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *newClient(t, s, "added").kp}}}},
		{Proposals: []*message.Proposal{{Type: message.ProposalRemove, Remove: &message.Remove{Removed: 69}}}},
	}
	for i, opts := range steps {
		c, err := ga.Commit(opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := ga.MergePending(c); err != nil {
			t.Fatal(err)
		}
		for _, g := range []*group.Group{gb, planned} {
			if err := g.HandleCommit(c.Message); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		tag := newTag(t)
		if sp, err = gb.MarshalSplit(tag); err != nil {
			t.Fatal(err)
		}
		if p, err = planned.PlanSplit(tag); err != nil {
			t.Fatal(err)
		}
		if p.Full {
			t.Fatalf("step %d: a plan after a stored state is full", i)
		}
		samePlan(t, fmt.Sprintf("step %d", i), sp, p)
	}
}
