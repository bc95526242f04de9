package main

import (
	"context"
	"fmt"
	"io"

	"github.com/regroup-mls/regroup/core/identity"
)

// cmdMove points the home at another regroupd — a new address, replicas,
// TLS — after checking that it serves this home's inbox: the server
// given by --server (and the TLS flags) must hold the inbox's identity
// updates, so that it is the same delivery service (or a replica of it),
// not an empty one.
func cmdMove(ctx context.Context, e *env) error {
	if e.o.server == "" {
		return usagef("move needs --server ADDR (repeated or comma-separated for replicas)")
	}
	topic, err := identity.Topic(e.s.c.InboxID())
	if err != nil {
		return err
	}
	n, err := e.s.transport.HighestSequenceID(ctx, topic)
	if err != nil {
		return fmt.Errorf("regroupd at %s: %w", e.s.server, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: regroupd at %s does not hold inbox %s: it is another delivery service, whose members cannot reach this home's "+
			"conversations; the home still uses its saved server", errNotFound, e.s.server, e.s.c.InboxID())
	}
	set, err := loadSettings(e.s.home)
	if err != nil {
		return err
	}
	set.Server = e.s.server
	rec := e.s.recovery
	set.Recovery = &rec
	set.TLS = nil
	if e.s.tls.TLS {
		t := e.s.tls
		set.TLS = &t
	}
	if err := saveSettings(e.s.home, set); err != nil {
		return err
	}
	return e.out.emit(whoami(e.s), func(w io.Writer) {
		fmt.Fprintf(w, "home %s now uses regroupd at %s (tls %v)\n", e.s.home, e.s.server, e.s.tls.TLS)
	})
}
