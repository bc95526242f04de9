// Package sdk is what a plugin binary calls. A plugin that serves the X-Wing
// wrappers is one line:
//
//	func main() { sdk.Serve(pqwrap.NewXWing(), pqwrap.NewXWingCanonical()) }
//
// Serve takes ordinary ports.WrapperAlgorithm and ports.PointeeAEAD values;
// the handshake, the protocol versions, mutual TLS and the gRPC service are
// handled here. The host (package plugins/host) turns the served algorithms
// back into ports implementations, so core cannot tell a plugin from a
// built-in algorithm.
//
// # Errors
//
// An implementation returns errors wrapping the ports error classes
// (ports.ErrNotRecipient, ports.ErrCorrupt, ...). Serve sends the class as a
// code with the message; on the host the error wraps the same sentinel, so
// errors.Is works across the process boundary. An error of no class arrives
// as ports.ErrAlgorithmUnavailable.
package sdk

import (
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/regroup-mls/regroup/plugins/internal/protocol"
)

// Serve serves impls, each a ports.WrapperAlgorithm or a ports.PointeeAEAD,
// to the regroup host that launched this binary, and returns when the host
// stops the plugin. Started by hand rather than by a host, it prints a
// message and exits with status 1; impls of another type, none at all, or
// two with one identifier exit with status 2 after saying why on stderr.
func Serve(impls ...any) {
	srv, err := protocol.NewServer(impls...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "regroup plugin:", err)
		os.Exit(2)
	}
	go watchHost(250*time.Millisecond, func() { os.Exit(3) }) // COMP-330
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  protocol.Handshake,
		VersionedPlugins: protocol.PluginSets(srv),
		GRPCServer:       protocol.NewGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:       "regroup-plugin",
			Level:      hclog.Info,
			Output:     os.Stderr,
			JSONFormat: true,
		}),
	})
}
