package plugintest_test

import (
	"context"
	"testing"

	"github.com/regroup-mls/regroup/adapters/aead"
	"github.com/regroup-mls/regroup/adapters/pqwrap"
	"github.com/regroup-mls/regroup/plugins/plugintest"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/aeadtest"
	"github.com/regroup-mls/regroup/ports/wrappertest"
)

// TestConnect is the in-process half of the plugin guide's walkthrough:
// the suites over the in-process gRPC connection.
func TestConnect(t *testing.T) {
	h := plugintest.Connect(t, pqwrap.NewXWing(), aead.NewChaCha20Poly1305())
	w, err := h.Wrapper(ports.WrapperXWingMLKEM768Draft6)
	if err != nil {
		t.Fatal(err)
	}
	wrappertest.Run(t, func(context.Context, *testing.T) (wrappertest.Harness, error) {
		return wrappertest.Static(w, wrappertest.Caps{PublicKeySize: 1216, PrivateKeySize: 32,
			Concurrent: true, Reference: pqwrap.NewXWing()}), nil
	})
	a, err := h.PointeeAEAD(ports.PointeeAEADChaCha20Poly1305)
	if err != nil {
		t.Fatal(err)
	}
	aeadtest.Run(t, func(context.Context, *testing.T) (aeadtest.Harness, error) {
		return aeadtest.Static(a, aeadtest.Caps{KeySize: 32, NonceSize: 12, TagSize: 16}), nil
	})
}

// TestBuild is the subprocess half: build examples/plugin-xwing and load it.
func TestBuild(t *testing.T) {
	h := plugintest.Build(t, "github.com/regroup-mls/regroup/examples/plugin-xwing", nil)
	w, err := h.Wrapper(ports.WrapperXWingCanonical)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := w.GenerateKey(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := w.Seal(t.Context(), pub, ports.WelcomeWrapperInfo(), []byte("welcome"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pqwrap.NewXWingCanonical().Open(t.Context(), priv, ports.WelcomeWrapperInfo(), sealed...); err != nil {
		t.Fatalf("in-process open of a plugin seal: %v", err)
	}
}
