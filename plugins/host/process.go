package host

import (
	"context"
	"fmt"
	"os/exec"
	"sync/atomic"

	"github.com/hashicorp/go-plugin"

	"github.com/regroup-mls/regroup/plugins/internal/protocol"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// process is one plugin binary and the go-plugin client of its current
// process. At most one goroutine starts or replaces the process at a time
// (sem); callers wait for that under their own ctx.
type process struct {
	bin    binary
	o      Options
	secure *plugin.SecureConfig

	sem     chan struct{}
	client  *plugin.Client
	rpc     pluginpb.AlgorithmsClient
	gen     uint64
	version int

	bad    atomic.Uint64 // generation found dead or hung; 0 = none
	closed atomic.Bool
}

func newProcess(bin binary, o Options) (*process, error) {
	sc, err := secureConfig(bin, o)
	if err != nil {
		return nil, err
	}
	return &process{bin: bin, o: o, secure: sc, sem: make(chan struct{}, 1)}, nil
}

func (p *process) name() string { return p.bin.name }

// hostPluginSets returns the protocol versions the host offers; a test
// replaces it to act as a newer host.
var hostPluginSets = func() map[int]plugin.PluginSet { return protocol.PluginSets(nil) }

func (p *process) config() *plugin.ClientConfig {
	return &plugin.ClientConfig{
		HandshakeConfig:  protocol.Handshake,
		VersionedPlugins: hostPluginSets(),
		Cmd:              exec.Command(p.bin.path),
		SecureConfig:     p.secure,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     p.o.StartTimeout,
		Logger:           p.o.Logger.Named(p.bin.name),
		GRPCDialOptions:  protocol.DialOptions(),
	}
}

// start makes sure a healthy process runs and returns the negotiated
// protocol version.
func (p *process) start(ctx context.Context) (int, error) {
	_, _, err := p.acquire(ctx)
	return p.version, err
}

// acquire returns a client of a running process, starting a fresh one when
// there is none, it exited, or it was marked bad.
func (p *process) acquire(ctx context.Context) (pluginpb.AlgorithmsClient, uint64, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("%w: waiting for plugin start: %w", ports.ErrAlgorithmUnavailable, ctx.Err())
	}
	defer func() { <-p.sem }()
	if p.closed.Load() {
		return nil, 0, fmt.Errorf("%w: %v", ports.ErrAlgorithmUnavailable, errClosed)
	}
	if p.client != nil && !p.client.Exited() && p.bad.Load() != p.gen {
		return p.rpc, p.gen, nil
	}
	if p.client != nil {
		old := p.client
		p.client, p.rpc = nil, nil
		go old.Kill() // a hung process can take seconds to stop
	}
	c := plugin.NewClient(p.config())
	type result struct {
		rpc pluginpb.AlgorithmsClient
		err error
	}
	done := make(chan result, 1)
	go func() {
		cp, err := c.Client()
		if err != nil {
			done <- result{err: err}
			return
		}
		raw, err := cp.Dispense(protocol.PluginName)
		if err != nil {
			done <- result{err: err}
			return
		}
		rpc, ok := raw.(pluginpb.AlgorithmsClient)
		if !ok {
			done <- result{err: fmt.Errorf("plugin dispensed %T", raw)}
			return
		}
		done <- result{rpc: rpc}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			c.Kill()
			return nil, 0, fmt.Errorf("%w: start plugin %s: %w", ports.ErrAlgorithmUnavailable, p.bin.name, r.err)
		}
		p.client, p.rpc = c, r.rpc
		p.gen++
		p.version = c.NegotiatedVersion()
		return p.rpc, p.gen, nil
	case <-ctx.Done():
		go func() { <-done; c.Kill() }()
		return nil, 0, fmt.Errorf("%w: start plugin %s: %w", ports.ErrAlgorithmUnavailable, p.bin.name, ctx.Err())
	}
}

func (p *process) call(ctx context.Context, what string, f func(context.Context, pluginpb.AlgorithmsClient) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s via plugin %s: %w: %w", what, p.bin.name, ports.ErrAlgorithmUnavailable, err)
	}
	rpc, gen, err := p.acquire(ctx)
	if err != nil {
		return fmt.Errorf("%s via plugin %s: %w", what, p.bin.name, err)
	}
	err = f(ctx, rpc)
	if err == nil {
		return nil
	}
	verdict, mapped := protocol.FromRPC(ctx, err)
	if verdict != protocol.Healthy {
		// The next call starts a fresh process.
		p.bad.Store(gen)
		p.o.Logger.Warn("plugin marked for restart", "plugin", p.bin.name, "hung", verdict == protocol.Hung, "error", err)
	}
	return fmt.Errorf("%s via plugin %s: %w", what, p.bin.name, mapped)
}

// close stops the process; later calls fail with ErrAlgorithmUnavailable.
func (p *process) close() {
	p.closed.Store(true)
	p.sem <- struct{}{}
	c := p.client
	p.client, p.rpc = nil, nil
	<-p.sem
	if c != nil {
		c.Kill()
	}
}

func wrapRemote(ctx context.Context, what, name string, err error) error {
	_, mapped := protocol.FromRPC(ctx, err)
	return fmt.Errorf("%s via plugin %s: %w", what, name, mapped)
}
