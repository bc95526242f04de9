package group_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// splitStore is what a store holds of split states: one head and blocks
// by id, rewritten as the splits say.
type splitStore struct {
	head   []byte
	blocks map[uint64][]byte
	// written counts the bytes the last write stored.
	written int
}

func (s *splitStore) write(sp *group.Split) {
	if sp.Full {
		s.blocks = map[uint64][]byte{}
	}
	s.head, s.written = sp.Head, len(sp.Head)
	for id, b := range sp.Blocks {
		s.blocks[id], s.written = b, s.written+len(b)
	}
	for _, id := range sp.Drop {
		delete(s.blocks, id)
	}
}

func (s *splitStore) load(t testing.TB) *group.Group {
	t.Helper()
	g, err := group.LoadSplit(s.head, func(id uint64) ([]byte, error) {
		b, ok := s.blocks[id]
		if !ok {
			return nil, fmt.Errorf("no block %d", id)
		}
		return b, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func newTag(t *testing.T) []byte {
	tag := make([]byte, group.TagSize)
	if _, err := rand.Read(tag); err != nil {
		t.Fatal(err)
	}
	return tag
}

// sameState compares two groups by their one-blob (version 2) encoding.
func sameState(t *testing.T, step string, a, b *group.Group) {
	t.Helper()
	ea, err := a.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ea, eb) {
		t.Fatalf("%s: states differ", step)
	}
}

// A state stored in parts loads back to the same state (compared through
// the one-blob encoding) after the first, full write and after every
// later commit, each of which rewrites the head and only the blocks its
// changes touch — far fewer bytes than the whole state — also when the
// tree grows and shrinks; a block left over from another write, or
// missing, fails the load with ErrInvalid.
func TestSplitStateRoundTrips(t *testing.T) {
	s, ga, gb := scaleGroup(t, 70)
	var store splitStore
	sp, err := gb.MarshalSplit(newTag(t))
	if err != nil || !sp.Full {
		t.Fatalf("first split: full=%v %v", sp != nil && sp.Full, err)
	}
	store.write(sp)
	full := store.written
	sameState(t, "after the full write", gb, store.load(t))

	joiner := newClient(t, s, "late joiner")
	steps := []*group.CommitOptions{
		{Path: true},
		{Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *joiner.kp}}}},
		{Proposals: []*message.Proposal{{Type: message.ProposalRemove, Remove: &message.Remove{Removed: 69}}}},
		{Path: true},
	}
	// Grow the tree past 128 leaves, then shrink it back.
	var many []*message.Proposal
	for i := range 60 {
		many = append(many, &message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *newClient(t, s, fmt.Sprintf("bulk-%d", i)).kp}})
	}
	steps = append(steps, &group.CommitOptions{Proposals: many})
	steps = append(steps, nil, &group.CommitOptions{Path: true}) // nil: remove every leaf from 64 on
	for i, opts := range steps {
		if opts == nil {
			opts = &group.CommitOptions{}
			tree := ga.Tree()
			for _, l := range tree.Members() {
				if l >= 64 {
					opts.Proposals = append(opts.Proposals, &message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: uint32(l)}})
				}
			}
		}
		p, err := ga.Commit(opts)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		b := store.load(t)
		if err := b.HandleCommit(p.Message); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if err := ga.MergePending(p); err != nil {
			t.Fatal(err)
		}
		sp, err := b.MarshalSplit(newTag(t))
		if err != nil || sp.Full {
			t.Fatalf("step %d: split full=%v %v", i, sp != nil && sp.Full, err)
		}
		store.write(sp)
		if i < 4 && store.written*2 > full {
			t.Fatalf("step %d: a commit stored %d bytes, the whole state %d", i, store.written, full)
		}
		got := store.load(t)
		sameState(t, fmt.Sprintf("step %d", i), b, got)
		if got.Epoch() != ga.Epoch() || !bytes.Equal(got.EpochAuthenticator(), ga.EpochAuthenticator()) {
			t.Fatalf("step %d: the stored member disagrees with the committer", i)
		}
	}

	// A block of another write, or none, fails the load.
	for id := range store.blocks {
		old := store.blocks[id]
		other := bytes.Clone(old)
		other[0] ^= 1 // the block's tag
		store.blocks[id] = other
		if _, err := group.LoadSplit(store.head, func(id uint64) ([]byte, error) { return store.blocks[id], nil }, nil); !errors.Is(err, group.ErrInvalid) {
			t.Fatalf("block %d of another write: %v", id, err)
		}
		delete(store.blocks, id)
		if _, err := group.LoadSplit(store.head, func(id uint64) ([]byte, error) {
			if b, ok := store.blocks[id]; ok {
				return b, nil
			}
			return nil, errors.New("not found")
		}, nil); err == nil {
			t.Fatalf("block %d missing: loaded", id)
		}
		store.blocks[id] = old
		break
	}
}

// A commit staged on a stored state and written with MarshalChanges
// loads back on that state to the same pending commit, merges to the
// state the commit leads to, and carries only the nodes it changed; on
// another state of the group it fails with ErrInvalid. A clone of a group
// is independent of it.
func TestPendingChangesLoadOnTheirBase(t *testing.T) {
	s, ga, gb := scaleGroup(t, 40)
	var store splitStore
	sp, err := gb.MarshalSplit(newTag(t))
	if err != nil {
		t.Fatal(err)
	}
	store.write(sp)
	base := store.load(t)
	before, _ := base.Marshal()
	p, err := ga.Commit(&group.CommitOptions{Path: true, Proposals: []*message.Proposal{
		{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *newClient(t, s, "added").kp}}}})
	if err != nil {
		t.Fatal(err)
	}
	clone := base.Clone()
	staged, err := clone.StageCommit(p.Message)
	if err != nil {
		t.Fatal(err)
	}
	delta, err := staged.MarshalChanges(false)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := staged.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if len(delta)*3 > len(whole) {
		t.Fatalf("the staged commit's changes take %d bytes, the whole next state %d", len(delta), len(whole))
	}
	loaded, err := group.LoadPending(delta, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := base.Marshal(); !bytes.Equal(after, before) {
		t.Fatal("loading a pending commit changed its base")
	}
	direct := base.Clone()
	if err := direct.MergePending(staged); err != nil {
		t.Fatal(err)
	}
	if err := clone.MergePending(loaded); err != nil {
		t.Fatal(err)
	}
	sameState(t, "merged from the stored changes", direct, clone)
	if after, _ := base.Marshal(); !bytes.Equal(after, before) {
		t.Fatal("merging into a clone changed the group it was cloned from")
	}
	// The same changes on the merged state (another tree) are refused.
	if _, err := group.LoadPending(delta, clone, nil); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("changes on another state: %v", err)
	}
	if _, err := group.LoadPending(delta, nil, nil); !errors.Is(err, group.ErrInvalid) {
		t.Fatalf("changes without their base: %v", err)
	}
}

// FuzzLoadSplit feeds corrupted heads and blocks to LoadSplit: errors,
// never panics, and a state it accepts works.
func FuzzLoadSplit(f *testing.F) {
	_, _, gb := scaleGroup(f, 20)
	sp, err := gb.MarshalSplit(bytes.Repeat([]byte{1}, group.TagSize))
	if err != nil {
		f.Fatal(err)
	}
	for _, b := range sp.Blocks {
		f.Add(sp.Head, b)
	}
	f.Fuzz(func(t *testing.T, head, block []byte) {
		g, err := group.LoadSplit(head, func(uint64) ([]byte, error) { return block, nil }, nil)
		if err != nil {
			return
		}
		_, _ = g.Marshal()
		_, _ = g.Protect([]byte("x"))
		_, _ = g.Export("l", nil, 16)
	})
}

// FuzzLoadPending feeds corrupted pending commits to LoadPending, on the
// stored group they were built on: errors, never panics, and a commit it
// accepts merges or fails cleanly.
func FuzzLoadPending(f *testing.F) {
	_, ga, gb := scaleGroup(f, 20)
	var store splitStore
	sp, err := gb.MarshalSplit(bytes.Repeat([]byte{1}, group.TagSize))
	if err != nil {
		f.Fatal(err)
	}
	store.write(sp)
	base := store.load(f)
	p, err := ga.Commit(&group.CommitOptions{Path: true})
	if err != nil {
		f.Fatal(err)
	}
	staged, err := base.Clone().StageCommit(p.Message)
	if err != nil {
		f.Fatal(err)
	}
	for _, m := range []func() ([]byte, error){staged.Marshal, func() ([]byte, error) { return staged.MarshalChanges(true) },
		func() ([]byte, error) { return staged.MarshalChanges(false) }} {
		b, err := m()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := group.LoadPending(in, base, nil)
		if err != nil {
			return
		}
		_ = base.Clone().MergePending(p)
	})
}
