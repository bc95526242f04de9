package host_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/regroup-mls/regroup/adapters/aead"
	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/plugins/host"
	"github.com/regroup-mls/regroup/ports"
)

// An application loads its plugins at start-up, pinned, into the registry
// that already holds its in-process algorithms. examples/plugin-host is the
// same code as a program.
func ExampleLoad() {
	ctx := context.Background()
	reg, err := algorithm.New(hpkewrap.NewCurve25519(), aead.NewChaCha20Poly1305())
	if err != nil {
		log.Fatal(err)
	}
	h, err := host.Load(ctx, &host.Options{
		Dir:              "/var/lib/regroup/plugins",
		Checksums:        map[string]string{"regroup-plugin-xwing": "<hex sha-256 of the binary>"},
		RequireChecksums: true,
	})
	if err != nil {
		// A checksum that does not match, an unpinned binary, a plugin
		// that does not start or describes itself out of bounds.
		log.Fatal(err)
	}
	defer h.Close()
	for _, s := range h.Skipped() {
		log.Printf("plugin entry %s skipped: %v", s.Name, s.Err)
	}
	if err := h.Register(reg); errors.Is(err, algorithm.ErrAlreadyRegistered) {
		// A plugin serves an id a built-in already holds.
		log.Fatal(err)
	} else if err != nil {
		log.Fatal(err)
	}
	w, err := reg.Wrapper(ports.WrapperXWingMLKEM768Draft6)
	if err != nil {
		log.Fatal(err) // wraps ports.ErrUnsupportedAlgorithm: no plugin serves it
	}
	_, _, err = w.GenerateKey(ctx)
	if errors.Is(err, ports.ErrAlgorithmUnavailable) {
		// The plugin crashed, hung or answered outside the protocol: a
		// local failure, retried later (JOIN-085).
		fmt.Println("retry later:", err)
	}
}
