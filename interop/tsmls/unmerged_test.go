package tsmls_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// TestTSMLSUnmergedLeavesQuirk shows a ts-mls 1.6.4 quirk: it refuses a
// valid Welcome whose tree lists an unmerged leaf at a parent but not at
// that parent's ancestors. RFC 9420 §7.9 and §12.4.3.1 ask only that the
// nodes between an unmerged leaf and a parent listing it list it too;
// ts-mls asks it of every non-blank node up to the root. Such a tree
// arises when a member is added without a path below a parent that a
// later commit's path does not reach while it renews the root. In a group
// of eight, m0 removes m3 with a path (node 3 and the root become m0's),
// adds x without a path at leaf 3 (node 3 and the root list it), and m4
// commits with a path, which renews the root and leaves node 3 listing x.
// regroup's joiner accepts the Welcome that then adds two members;
// ts-mls's joiner refuses it.
func TestTSMLSUnmergedLeavesQuirk(t *testing.T) {
	d, s, sc := resumeScenario(t)
	ctx := sc.ctx
	var ms []*rgMember
	for i := range 8 {
		ms = append(ms, newRGMember(t, s, fmt.Sprintf("m%d", i)))
	}
	leaf := ms[0].kp.KeyPackage.LeafNode
	g, err := group.Create(s, &group.CreateOptions{GroupID: []byte("tsmls-unmerged"), Leaf: &leaf, EncryptionPriv: ms[0].kp.EncryptionPriv, SignaturePriv: ms[0].sigPriv})
	if err != nil {
		t.Fatal(err)
	}
	ms[0].g = g
	add := func(kps ...*message.KeyPackage) []*message.Proposal {
		var out []*message.Proposal
		for _, kp := range kps {
			out = append(out, &message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *kp}})
		}
		return out
	}
	var kps []*message.KeyPackage
	for _, m := range ms[1:] {
		kps = append(kps, m.kp.KeyPackage)
	}
	_, w := ms[0].commit(t, &group.CommitOptions{Path: true, TreeInWelcome: true, Proposals: add(kps...)})
	for _, m := range ms[1:] {
		m.join(t, w)
	}
	live := []*rgMember{ms[0], ms[1], ms[2], ms[4], ms[5], ms[6], ms[7]} // m3 leaves
	follow := func(commit []byte, committer *rgMember) {
		for _, m := range live {
			if m != committer {
				m.handle(t, "follow", commit)
			}
		}
	}
	commit, _ := ms[0].commit(t, &group.CommitOptions{Path: true, Proposals: []*message.Proposal{{Type: message.ProposalRemove, Remove: &message.Remove{Removed: 3}}}})
	follow(commit, ms[0])
	x := newRGMember(t, s, "x")
	commit, w = ms[0].commit(t, &group.CommitOptions{TreeInWelcome: true, Proposals: add(x.kp.KeyPackage)})
	follow(commit, ms[0])
	x.join(t, w)
	live = append(live, x)
	commit, _ = ms[4].commit(t, &group.CommitOptions{Path: true})
	follow(commit, ms[4])
	tree := ms[0].g.Tree().Export()
	if n := tree[3]; n == nil || n.Parent == nil || len(n.Parent.UnmergedLeaves) != 1 || n.Parent.UnmergedLeaves[0] != 3 {
		t.Fatalf("node 3 should list leaf 3 (x) as unmerged: %+v", n)
	}
	r, _ := treemath.Root(ms[0].g.Tree().LeafCount())
	if root := tree[r]; root == nil || root.Parent == nil || len(root.Parent.UnmergedLeaves) != 0 {
		t.Fatalf("the root should be m4's, listing nobody: %+v", root)
	}
	// m0 adds ts-mls's y and regroup's z in one commit.
	ykp, err := d.NewKeyPackage(ctx, []byte("y (ts-mls)"))
	if err != nil {
		t.Fatal(err)
	}
	ym, err := framing.Decode(ykp.KP)
	if err != nil {
		t.Fatal(err)
	}
	z := newRGMember(t, s, "z")
	commit, w = ms[0].commit(t, &group.CommitOptions{TreeInWelcome: true, Proposals: add(z.kp.KeyPackage, ym.KeyPackage)})
	follow(commit, ms[0])
	z.join(t, w)
	sc.agree("regroup's joiner accepts the Welcome", 5, append(live, z), nil)
	_, err = d.Join(ctx, ykp, w)
	if err == nil {
		t.Fatal("ts-mls 1.6.4 joined from the Welcome: the unmerged-leaves quirk is gone, update interop/tsmls/README.md")
	}
	if !strings.Contains(strings.ToLower(err.Error()), "unmerged") {
		t.Fatalf("ts-mls refused the Welcome for another reason: %v", err)
	}
	t.Logf("ts-mls 1.6.4 quirk, as documented: %s", firstLine(err.Error()))
}
