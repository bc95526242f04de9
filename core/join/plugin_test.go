package join_test

import (
	"os"
	"testing"

	"github.com/regroup-mls/regroup/adapters/aead"
	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/plugins/plugintest"
	"github.com/regroup-mls/regroup/ports"
)

// JOIN-076 through a plugin: the joiner's X-Wing wrapper is hosted in a
// real plugin subprocess (examples/plugin-xwing, loaded by the host), and
// the receiver runs the same tests as with the built-in one: a join, a
// join through pointers, and the whole hostile corpus.
func TestJoinThroughPluginHostedXWing(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds the plugin binary; run without -short")
	}
	h := plugintest.Build(t, "github.com/regroup-mls/regroup/examples/plugin-xwing", nil)
	reg, err := algorithm.New(hpkewrap.NewCurve25519(), aead.NewChaCha20Poly1305())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Register(reg); err != nil {
		t.Fatal(err)
	}
	if w, err := reg.Wrapper(ports.WrapperXWingMLKEM768Draft6); err != nil || w == nil {
		t.Fatalf("the plugin serves no X-Wing: %v", err)
	}
	t.Run("inline and pointers", func(t *testing.T) {
		w := newWorld(t, "sqlite")
		a := w.newInst("adder", instOptions{})
		var js []*inst
		for _, name := range []string{"j1", "j2", "j3"} {
			js = append(js, w.newInst(name, instOptions{Registry: reg}))
		}
		g := a.newGroup(groupSpec{})
		_, seq := g.join(js[0], addSpec{})
		js[0].process()
		js[0].want(seq, "joined")
		g2 := a.newGroup(groupSpec{})
		seqs := g2.send(g2.add(addSpec{}, js...))
		for i, j := range js {
			j.process()
			j.want(seqs[i+1], "joined")
		}
	})
	t.Run("corpus", func(t *testing.T) { runCorpus(t, "sqlite", reg) })
}
