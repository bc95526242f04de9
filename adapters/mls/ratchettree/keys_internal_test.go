package ratchettree

import (
	"errors"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// TestValidateKeysReportsFirstDuplicate (§7.3, §12.4.3.3: signature keys
// unique among leaves, encryption keys among all nodes): the duplicate
// reported is the one a walk in node order meets first, an encryption key
// before a signature key at the same node.
func TestValidateKeysReportsFirstDuplicate(t *testing.T) {
	leaf := func(enc, sig string) *message.Node {
		return &message.Node{Type: message.NodeLeaf, Leaf: &message.LeafNode{EncryptionKey: []byte(enc), SignatureKey: []byte(sig)}}
	}
	parent := func(enc string) *message.Node {
		return &message.Node{Type: message.NodeParent, Parent: &message.ParentNode{EncryptionKey: []byte(enc)}}
	}
	cases := []struct {
		name  string
		nodes []*message.Node
		want  string // "" when valid
	}{
		{"unique", []*message.Node{leaf("e0", "s0"), parent("p1"), leaf("e2", "s2"), nil, nil, nil, leaf("e6", "s6")}, ""},
		{"leaf and parent share an encryption key", []*message.Node{leaf("e0", "s0"), parent("e0"), leaf("e2", "s2")}, "nodes 0 and 1 share an encryption key"},
		{"signature key", []*message.Node{leaf("e0", "s0"), nil, leaf("e2", "s0")}, "leaves 0 and 1 share a signature key"},
		{"encryption key first at the same node", []*message.Node{leaf("e0", "s0"), nil, leaf("e0", "s0")}, "nodes 0 and 2 share an encryption key"},
		{"the earlier of two duplicates", []*message.Node{leaf("b", "s0"), parent("a"), leaf("x", "s2"), parent("z"), leaf("a", "s4"), parent("b"), leaf("e6", "s6")},
			"nodes 1 and 4 share an encryption key"},
		{"a signature duplicate before an encryption one", []*message.Node{leaf("e0", "s0"), parent("p1"), leaf("e2", "s0"), nil, leaf("e0", "s4")},
			"leaves 0 and 1 share a signature key"},
		{"three holders: the second is reported", []*message.Node{leaf("k", "s0"), nil, leaf("k", "s2"), nil, leaf("k", "s4")}, "nodes 0 and 2 share an encryption key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := (&Tree{nodes: c.nodes}).validateKeys()
			if c.want == "" {
				if err != nil {
					t.Fatalf("validateKeys: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("validateKeys = %v, want ErrInvalid with %q", err, c.want)
			}
		})
	}
}
