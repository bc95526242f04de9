package host

import (
	"errors"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/regroup-mls/regroup/plugins/internal/protocol"
	"github.com/regroup-mls/regroup/ports"
)

// TestNewerHostLoadsVersion1Plugin: a host that also speaks a protocol
// version 2 negotiates version 1 with a plugin built for version 1 and uses
// it normally.
func TestNewerHostLoadsVersion1Plugin(t *testing.T) {
	saved := hostPluginSets
	t.Cleanup(func() { hostPluginSets = saved })
	hostPluginSets = func() map[int]plugin.PluginSet {
		sets := protocol.PluginSets(nil)
		sets[2] = plugin.PluginSet{protocol.PluginName: &protocol.GRPCPlugin{}}
		return sets
	}
	h := load(t, quietOptions(exampleDir(t)))
	if v := h.Plugins()[0].ProtocolVersion; v != 1 {
		t.Fatalf("negotiated version %d, want 1", v)
	}
	w := mustWrapper(t, h, ports.WrapperXWingMLKEM768Draft6)
	if _, _, err := w.GenerateKey(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestJOIN076AcrossPlugin: a Welcome the plugin sealed under the draft-06
// wrapper does not open under the plugin's canonical wrapper, and the class
// (ErrNotRecipient) arrives on the host.
func TestJOIN076AcrossPlugin(t *testing.T) {
	h := load(t, quietOptions(exampleDir(t)))
	draft := mustWrapper(t, h, ports.WrapperXWingMLKEM768Draft6)
	canonical := mustWrapper(t, h, ports.WrapperXWingCanonical)
	pub, priv, err := draft.GenerateKey(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := draft.Seal(t.Context(), pub, ports.WelcomeWrapperInfo(), []byte("welcome"), []byte("meta"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := canonical.Open(t.Context(), priv, ports.WelcomeWrapperInfo(), sealed...); !errors.Is(err, ports.ErrNotRecipient) {
		t.Fatalf("relabelled Welcome: %v, want ErrNotRecipient", err)
	}
}
