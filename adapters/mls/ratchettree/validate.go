package ratchettree

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// ValidateOptions tunes [Tree.Validate].
type ValidateOptions struct {
	// GroupID is the signing context of leaves with source update or commit.
	GroupID []byte
	// Now, when non-zero, makes key_package leaves outside their lifetime invalid.
	Now time.Time
	// Credential, when set, is called for every non-blank leaf; an error
	// rejects the tree.
	Credential func(l treemath.LeafIndex, leaf *message.LeafNode) error
}

// Validate checks a received tree as a joiner must (§12.4.3.3, §7.3,
// §7.9.2): every leaf's signature, source, extensions and credential type
// against its own capabilities, the optional credential callback and
// lifetime, unique signature and encryption keys, well-formed unmerged
// leaves, and that every non-blank parent node is parent-hash valid.
func (t *Tree) Validate(opts *ValidateOptions) error {
	if opts == nil {
		opts = &ValidateOptions{}
	}
	if err := t.validateLeaves(opts); err != nil {
		return err
	}
	if err := t.validateKeys(); err != nil {
		return err
	}
	if err := t.validateUnmerged(); err != nil {
		return err
	}
	return t.VerifyParentHashes()
}

// defaultExtension reports whether an extension type need not be listed in
// capabilities (§7.2).
func defaultExtension(e message.ExtensionType) bool { return e >= 1 && e <= 5 }

// validateLeaves checks every leaf in index order and reports the first
// that fails; the signatures of all leaves are verified together first
// (ciphersuite.Suite.VerifyAllWithLabel), with the verdict single
// verification gives each.
func (t *Tree) validateLeaves(opts *ValidateOptions) error {
	members := t.Members()
	checks := make([]ciphersuite.SignatureCheck, len(members))
	for i, l := range members {
		c, err := t.Leaf(l).SignatureCheck(opts.GroupID, uint32(l))
		if err != nil {
			return fmt.Errorf("%w: leaf %d: %v", ErrInvalid, l, err)
		}
		checks[i] = c
	}
	verdicts := t.suite.VerifyAllWithLabel(checks)
	for i, l := range members {
		leaf := t.Leaf(l)
		if err := verdicts[i]; err != nil {
			return fmt.Errorf("%w: leaf %d: verify leaf node: %v", ErrInvalid, l, err)
		}
		if leaf.Source < message.SourceKeyPackage || leaf.Source > message.SourceCommit {
			return fmt.Errorf("%w: leaf %d: source %d", ErrInvalid, l, leaf.Source)
		}
		if !slices.Contains(leaf.Capabilities.Credentials, leaf.Credential.Type) {
			return fmt.Errorf("%w: leaf %d: credential type %d not in its capabilities", ErrInvalid, l, leaf.Credential.Type)
		}
		for _, e := range leaf.Extensions {
			if !defaultExtension(e.Type) && !slices.Contains(leaf.Capabilities.Extensions, e.Type) {
				return fmt.Errorf("%w: leaf %d: extension %d not in its capabilities", ErrInvalid, l, e.Type)
			}
		}
		if !opts.Now.IsZero() && leaf.Source == message.SourceKeyPackage {
			now := uint64(opts.Now.Unix())
			if now < leaf.Lifetime.NotBefore || now > leaf.Lifetime.NotAfter {
				return fmt.Errorf("%w: leaf %d: outside its lifetime", ErrInvalid, l)
			}
		}
		if opts.Credential != nil {
			if err := opts.Credential(l, leaf); err != nil {
				return fmt.Errorf("%w: leaf %d: credential: %w", ErrInvalid, l, err)
			}
		}
	}
	return nil
}

// validateKeys checks that signature keys are unique among leaves and
// encryption keys among all nodes (§7.3, §12.4.3.3). It reports the
// duplicate a walk in node order meets first: the node with the lowest
// index whose key an earlier node holds (its encryption key before its
// signature key), with that earlier node. The keys are sorted by index
// rather than copied into maps: a tree of thousands of leaves would
// otherwise copy every key once more.
func (t *Tree) validateKeys() error {
	var enc, sig []int32 // node indices
	for i, n := range t.nodes {
		if n == nil {
			continue
		}
		enc = append(enc, int32(i))
		if n.Leaf != nil {
			sig = append(sig, int32(i))
		}
	}
	ej, ei := firstDuplicate(enc, func(i int32) []byte { return t.EncryptionKey(treemath.NodeIndex(i)) })
	sj, si := firstDuplicate(sig, func(i int32) []byte { return t.nodes[i].Leaf.SignatureKey })
	switch {
	case ei >= 0 && (si < 0 || ei <= si):
		return fmt.Errorf("%w: nodes %d and %d share an encryption key", ErrInvalid, ej, ei)
	case si >= 0:
		return fmt.Errorf("%w: leaves %d and %d share a signature key", ErrInvalid, sj/2, si/2)
	}
	return nil
}

// firstDuplicate returns, among the node indices xs (in increasing
// order), the lowest index i whose key an earlier index j also has, and
// the first such j; i is -1 when the keys are unique.
func firstDuplicate(xs []int32, key func(int32) []byte) (j, i int32) {
	slices.SortStableFunc(xs, func(a, b int32) int { return bytes.Compare(key(a), key(b)) })
	j, i = -1, -1
	for k := 1; k < len(xs); k++ {
		// In a run of equal keys, the first holds the lowest index and
		// the second the lowest index with an earlier holder.
		if bytes.Equal(key(xs[k-1]), key(xs[k])) && (k < 2 || !bytes.Equal(key(xs[k-2]), key(xs[k]))) {
			if i < 0 || xs[k] < i {
				j, i = xs[k-1], xs[k]
			}
		}
	}
	return j, i
}

// validateUnmerged checks every unmerged_leaves list (§7.1, §12.4.3.3):
// sorted, naming non-blank leaves below the node, and repeated at every
// non-blank node in between.
func (t *Tree) validateUnmerged() error {
	n := t.LeafCount()
	for i := 1; i < len(t.nodes); i += 2 {
		p := t.ParentNode(treemath.NodeIndex(i))
		if p == nil {
			continue
		}
		for k, u := range p.UnmergedLeaves {
			l := treemath.LeafIndex(u)
			if k > 0 && p.UnmergedLeaves[k-1] >= u {
				return fmt.Errorf("%w: node %d: unmerged leaves not strictly increasing", ErrInvalid, i)
			}
			if uint64(u) >= uint64(n) || t.Leaf(l) == nil || !subtreeHas(treemath.NodeIndex(i), l) {
				return fmt.Errorf("%w: node %d: unmerged leaf %d is not a member below it", ErrInvalid, i, u)
			}
			for _, a := range treemath.DirectPath(l.Node(), n) {
				if a == treemath.NodeIndex(i) {
					break
				}
				if ap := t.ParentNode(a); ap != nil && !slices.Contains(ap.UnmergedLeaves, u) {
					return fmt.Errorf("%w: node %d lacks unmerged leaf %d listed above it", ErrInvalid, a, u)
				}
			}
		}
	}
	return nil
}

// nodeParentHash returns the parent_hash field of node d, if it has one.
func (t *Tree) nodeParentHash(d treemath.NodeIndex) ([]byte, bool) {
	n := t.Node(d)
	switch {
	case n == nil:
		return nil, false
	case n.Parent != nil:
		return n.Parent.ParentHash, true
	case n.Leaf != nil && n.Leaf.Source == message.SourceCommit:
		return n.Leaf.ParentHash, true
	}
	return nil, false
}

// VerifyParentHashes checks that every non-blank parent node is parent-hash
// valid (§7.9.2), top down: exactly one descendant's parent hash is valid
// with respect to it.
func (t *Tree) VerifyParentHashes() error {
	n := t.LeafCount()
	for i := 1; i < len(t.nodes); i += 2 {
		x := treemath.NodeIndex(i)
		p := t.ParentNode(x)
		if p == nil {
			continue
		}
		left, _ := treemath.Left(x)
		right, _ := treemath.Right(x, n)
		count := 0
		for _, cs := range [][2]treemath.NodeIndex{{left, right}, {right, left}} {
			c, s := cs[0], cs[1]
			ph, err := t.ParentHash(x, s)
			if err != nil {
				return err
			}
			res := t.Resolution(c)
			for _, d := range res {
				dh, ok := t.nodeParentHash(d)
				if !ok || !bytes.Equal(dh, ph) {
					continue
				}
				if t.unmergedMatches(p, c, res, d) {
					count++
				}
			}
		}
		if count != 1 {
			return fmt.Errorf("%w: parent node %d is not parent-hash valid (%d valid descendants)", ErrInvalid, i, count)
		}
	}
	return nil
}

// unmergedMatches reports whether p's unmerged leaves below c are exactly
// the resolution of c without d.
func (t *Tree) unmergedMatches(p *message.ParentNode, c treemath.NodeIndex, res []treemath.NodeIndex, d treemath.NodeIndex) bool {
	var want []treemath.NodeIndex
	for _, u := range p.UnmergedLeaves {
		if subtreeHas(c, treemath.LeafIndex(u)) {
			want = append(want, treemath.LeafIndex(u).Node())
		}
	}
	var got []treemath.NodeIndex
	for _, r := range res {
		if r != d {
			got = append(got, r)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	return slices.Equal(want, got)
}
