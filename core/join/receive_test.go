package join_test

import (
	"bytes"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// A Welcome wrapped under each built-in wrapper installs the group with
// cursor = join anchor, active, the adder read from the ratchet tree
// (JOIN-025), consent unknown, and a fresh membership of the commit log.
func TestJoinInline(t *testing.T) {
	for _, wrapper := range []ports.WrapperAlgorithmID{ports.WrapperXWingMLKEM768Draft6, ports.WrapperCurve25519} {
		t.Run(wrapper.String(), func(t *testing.T) {
			w := newWorld(t, "sqlite")
			a := w.newInst("adder", instOptions{})
			j := w.newInst("joiner", instOptions{Wrapper: wrapper})
			g := a.newGroup(groupSpec{})
			ad, seq := g.join(j, addSpec{})
			j.process()
			j.want(seq, "joined")
			gr, ok := j.group(g.id)
			if !ok || !gr.Active || gr.Cursor != ad.anchor || gr.JoinAnchor != ad.anchor || gr.Membership != 1 ||
				gr.Consent != ports.ConsentUnknown || gr.ConversationType != ports.ConversationGroup || !bytes.Equal(gr.GroupRoot, g.root) {
				t.Fatalf("group record %+v, want active at cursor = anchor %d", gr, ad.anchor)
			}
			if len(j.joined) != 1 || !bytes.Equal(j.joined[0].Adder.SignatureKey, a.key()) || j.joined[0].Adder.InboxID != a.inbox() {
				t.Fatalf("joined %+v, want the adder %s", j.joined, a.inbox())
			}
			if v, _ := j.view(g.id); v.Epoch != ad.epoch || !bytes.Equal(v.TreeHash, ad.treeHash) {
				t.Fatalf("installed epoch %d, want %d", v.Epoch, ad.epoch)
			}
			if held, _ := j.rcv.Held(w.ctx); len(held) != 0 {
				t.Fatalf("%d welcomes still held", len(held))
			}
		})
	}
}
