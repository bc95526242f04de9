package host

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/regroup-mls/regroup/adapters/aead"
	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/adapters/pqwrap"
	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/plugins/internal/protocol"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/aeadtest"
	"github.com/regroup-mls/regroup/ports/wrappertest"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// wrapperCaps returns what the suite checks for a built-in wrapper, with
// the in-process implementation as the reference.
func wrapperCaps(t testing.TB, id ports.WrapperAlgorithmID) wrappertest.Caps {
	switch id {
	case ports.WrapperCurve25519:
		return wrappertest.Caps{PublicKeySize: 32, PrivateKeySize: 32, HPKELayout: true,
			EncapsulatedKeySize: 32, TagSize: 16, InvalidPublicKeys: [][]byte{make([]byte, 32)},
			Concurrent: true, Reference: hpkewrap.NewCurve25519()}
	case ports.WrapperXWingMLKEM768Draft6, ports.WrapperXWingCanonical:
		ref := pqwrap.NewXWing()
		if id == ports.WrapperXWingCanonical {
			ref = pqwrap.NewXWingCanonical()
		}
		pub, _, err := ref.GenerateKey(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pub[0], pub[1] = 0xff, 0xff // an ML-KEM coefficient >= q
		return wrappertest.Caps{PublicKeySize: 1216, PrivateKeySize: 32, HPKELayout: true,
			EncapsulatedKeySize: 1120, TagSize: 16, InvalidPublicKeys: [][]byte{pub},
			Concurrent: true, Reference: ref}
	}
	t.Fatalf("no caps for %v", id)
	return wrappertest.Caps{}
}

func aeadCaps(t testing.TB) aeadtest.Caps {
	// RFC 8439 AEAD_CHACHA20_POLY1305 of the empty message.
	key, _ := hex.DecodeString("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
	nonce, _ := hex.DecodeString("070000004041424344454647")
	out, _ := hex.DecodeString("a0784d7a4716f3feb4f64e7f4b39bf04")
	return aeadtest.Caps{KeySize: 32, NonceSize: 12, TagSize: 16, Concurrent: true, Reference: aead.NewChaCha20Poly1305(),
		KnownAnswers: []aeadtest.KnownAnswer{{Name: "RFC 8439 empty message", Key: key, Nonce: nonce, Out: out}}}
}

var builtinWrappers = []ports.WrapperAlgorithmID{ports.WrapperCurve25519, ports.WrapperXWingMLKEM768Draft6, ports.WrapperXWingCanonical}

// runSuites runs the wrapper suite on every built-in wrapper and the AEAD
// suite on the pointee AEAD that h serves.
func runSuites(t *testing.T, h *Host, wrappers []ports.WrapperAlgorithmID, withAEAD bool) {
	for _, id := range wrappers {
		w := mustWrapper(t, h, id)
		caps := wrapperCaps(t, id)
		t.Run(id.String(), func(t *testing.T) {
			wrappertest.Run(t, func(context.Context, *testing.T) (wrappertest.Harness, error) {
				return wrappertest.Static(w, caps), nil
			})
		})
	}
	if withAEAD {
		a, err := h.PointeeAEAD(ports.PointeeAEADChaCha20Poly1305)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(a.ID().String(), func(t *testing.T) {
			aeadtest.Run(t, func(context.Context, *testing.T) (aeadtest.Harness, error) {
				return aeadtest.Static(a, aeadCaps(t)), nil
			})
		})
	}
}

// inProcessHost serves impls over go-plugin's in-process gRPC test
// connection.
func inProcessHost(t testing.TB, impls ...any) *Host {
	t.Helper()
	srv, err := protocol.NewServer(impls...)
	if err != nil {
		t.Fatal(err)
	}
	client, server := plugin.TestPluginGRPCConn(t, false, protocol.PluginSets(srv)[protocol.Version])
	_ = server // client.Close shuts the server down through the controller
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(protocol.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Attach(context.Background(), "in-process", raw.(pluginpb.AlgorithmsClient))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestContractInProcessGRPC runs the suites on every built-in algorithm
// through go-plugin's in-process gRPC test connection.
func TestContractInProcessGRPC(t *testing.T) {
	runSuites(t, inProcessHost(t, builtins()...), builtinWrappers, true)
}

// TestContractSubprocess runs the suites on every built-in algorithm
// served by a real plugin subprocess launched through the host.
func TestContractSubprocess(t *testing.T) {
	runSuites(t, load(t, quietOptions(selfPluginDir(t))), builtinWrappers, true)
}

// TestExamplePluginThroughRegistry builds examples/plugin-xwing, loads it
// through the host into a core/algorithm registry next to the in-process
// CURVE25519, and runs the wrapper suite on what the registry hands out: core
// looks algorithms up by wire id and cannot tell the plugin from a built-in.
func TestExamplePluginThroughRegistry(t *testing.T) {
	h := load(t, quietOptions(exampleDir(t)))
	reg, err := algorithm.New(hpkewrap.NewCurve25519())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Register(reg); err != nil {
		t.Fatal(err)
	}
	got := reg.Wrappers()
	if len(got) != 3 || got[0] != ports.WrapperCurve25519 || got[1] != ports.WrapperXWingMLKEM768Draft6 || got[2] != ports.WrapperXWingCanonical {
		t.Fatalf("registry lists %v", got)
	}
	if ps := h.Plugins(); len(ps) != 1 || ps[0].ProtocolVersion != protocol.Version || ps[0].Name != BinaryPrefix+"xwing" {
		t.Fatalf("plugins %+v", ps)
	}
	for _, id := range []ports.WrapperAlgorithmID{ports.WrapperXWingMLKEM768Draft6, ports.WrapperXWingCanonical} {
		w, err := reg.Wrapper(id)
		if err != nil {
			t.Fatal(err)
		}
		caps := wrapperCaps(t, id)
		t.Run(id.String(), func(t *testing.T) {
			wrappertest.Run(t, func(context.Context, *testing.T) (wrappertest.Harness, error) {
				return wrappertest.Static(w, caps), nil
			})
		})
	}
}
