package treemath_test

import (
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// TestTreeMathVectors runs every case of tree-math.json (§4.1, Appendix C).
func TestTreeMathVectors(t *testing.T) {
	var cases []struct {
		NLeaves uint32    `json:"n_leaves"`
		NNodes  uint64    `json:"n_nodes"`
		Root    uint32    `json:"root"`
		Left    []*uint32 `json:"left"`
		Right   []*uint32 `json:"right"`
		Parent  []*uint32 `json:"parent"`
		Sibling []*uint32 `json:"sibling"`
	}
	vectors.Load(t, "tree-math.json", &cases)
	for i, c := range cases {
		t.Run(fmt.Sprintf("tree-math/%d", i), func(t *testing.T) {
			n := treemath.LeafCount(c.NLeaves)
			if w := treemath.Width(n); w != c.NNodes {
				t.Fatalf("width %d, want %d", w, c.NNodes)
			}
			if r, ok := treemath.Root(n); !ok || uint32(r) != c.Root {
				t.Fatalf("root %d, want %d", r, c.Root)
			}
			check := func(name string, x int, got treemath.NodeIndex, ok bool, want *uint32) {
				t.Helper()
				if want == nil && ok || want != nil && (!ok || uint32(got) != *want) {
					t.Fatalf("%s(%d) = %d, %v; want %v", name, x, got, ok, want)
				}
			}
			for x := range int(c.NNodes) {
				nx := treemath.NodeIndex(x)
				l, ok := treemath.Left(nx)
				check("left", x, l, ok, c.Left[x])
				r, ok := treemath.Right(nx, n)
				check("right", x, r, ok, c.Right[x])
				p, ok := treemath.Parent(nx, n)
				check("parent", x, p, ok, c.Parent[x])
				s, ok := treemath.Sibling(nx, n)
				check("sibling", x, s, ok, c.Sibling[x])
			}
		})
	}
}

// TestOutOfRange: nodes outside the tree and absurd sizes are ok == false.
func TestOutOfRange(t *testing.T) {
	if _, ok := treemath.Parent(5, 2); ok {
		t.Error("parent of node 5 in a 2-leaf tree")
	}
	if _, ok := treemath.Root(0); ok {
		t.Error("root of an empty tree")
	}
	if _, ok := treemath.Root(treemath.MaxLeaves + 1); ok {
		t.Error("root beyond MaxLeaves")
	}
	if r, ok := treemath.Root(treemath.MaxLeaves); !ok || r != 1<<31-1 {
		t.Errorf("root of max tree = %d", r)
	}
	if p := treemath.DirectPath(0, 0); p != nil {
		t.Error("direct path in empty tree")
	}
}

// TestPaths checks direct path, copath and common ancestor on an 11-leaf tree.
func TestPaths(t *testing.T) {
	dp := treemath.DirectPath(4, 11)
	if fmt.Sprint(dp) != "[5 3 7 15]" {
		t.Errorf("direct path of 4 = %v", dp)
	}
	cp := treemath.Copath(4, 11)
	if fmt.Sprint(cp) != "[6 1 11 19]" {
		t.Errorf("copath of 4 = %v", cp)
	}
	if a := treemath.CommonAncestor(4, 8); a != 7 {
		t.Errorf("common ancestor of 4 and 8 = %d", a)
	}
	if a := treemath.CommonAncestor(4, 6); a != 5 {
		t.Errorf("common ancestor of 4 and 6 = %d", a)
	}
	if a := treemath.CommonAncestor(3, 4); a != 3 {
		t.Errorf("common ancestor of 3 and 4 = %d", a)
	}
	if n, _ := treemath.LeafCountFor(5); n != 8 {
		t.Errorf("padded 5 = %d", n)
	}
}
