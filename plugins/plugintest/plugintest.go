// Package plugintest lets the author of an algorithm plugin run the ports
// contract suites (ports/wrappertest, ports/aeadtest) against the plugin the
// way the host will see it:
//
//   - [Connect] serves implementations over go-plugin's in-process gRPC
//     test connection: the protocol, the error mapping and the host's ports
//     adapters are exercised without starting a process;
//   - [Build] compiles a plugin main package and loads the binary through
//     the host, exactly as a deployment does.
//
// The command in plugins/plugintest/hostile is a plugin that breaks the
// protocol on purpose, one way per binary name; the host's tests build it
// to check what the host refuses.
package plugintest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/regroup-mls/regroup/plugins/host"
	"github.com/regroup-mls/regroup/plugins/internal/protocol"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// Connect serves impls (each a ports.WrapperAlgorithm or ports.PointeeAEAD)
// over an in-process gRPC connection and returns the host side. Everything
// is released when the test ends.
func Connect(t testing.TB, impls ...any) *host.Host {
	t.Helper()
	srv, err := protocol.NewServer(impls...)
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	client, _ := plugin.TestPluginGRPCConn(t, false, protocol.PluginSets(srv)[protocol.Version])
	t.Cleanup(func() { client.Close() }) // also stops the server
	raw, err := client.Dispense(protocol.PluginName)
	if err != nil {
		t.Fatalf("plugintest: dispense: %v", err)
	}
	h, err := host.Attach(context.Background(), "in-process", raw.(pluginpb.AlgorithmsClient))
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	return h
}

// Build compiles the main package pkg (an import path or a directory the go
// tool accepts) into a fresh plugin directory and loads it through the host
// with opts (Dir is set by Build; nil means defaults with a silent logger).
// The plugin process is stopped when the test ends.
func Build(t testing.TB, pkg string, opts *host.Options) *host.Host {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, host.BinaryPrefix+"under-test")
	// go test puts its own toolchain first on PATH.
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("plugintest: go build %s: %v\n%s", pkg, err, out)
	}
	var o host.Options
	if opts != nil {
		o = *opts
	} else {
		o.Logger = hclog.NewNullLogger()
	}
	o.Dir = dir
	h, err := host.Load(context.Background(), &o)
	if err != nil {
		t.Fatalf("plugintest: load %s: %v", pkg, err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}
