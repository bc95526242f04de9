package host

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/regroup-mls/regroup/plugins/internal/protocol"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// process is one plugin binary and the generations of processes run from
// it. At most one goroutine starts a process at a time (sem); callers wait
// for that under their own ctx. Every process runs under life, so Close
// stops even one that has not finished its handshake.
type process struct {
	bin  binary
	path string // what is executed: the verified copy of a pinned binary
	o    Options

	life context.Context
	end  context.CancelFunc

	sem     chan struct{}
	cur     *generation
	gen     uint64 // processes started
	version int

	running sync.WaitGroup // generations not yet cleaned up
	closed  atomic.Bool
}

func newProcess(bin binary, path string, o Options) *process {
	life, end := context.WithCancel(context.Background())
	return &process{bin: bin, path: path, o: o, life: life, end: end, sem: make(chan struct{}, 1)}
}

func (p *process) name() string { return p.bin.name }

// hostPluginSets returns the protocol versions the host offers; a test
// replaces it to act as a newer host.
var hostPluginSets = func() map[int]plugin.PluginSet { return protocol.PluginSets(nil) }

func (p *process) config(cmd *exec.Cmd) *plugin.ClientConfig {
	return &plugin.ClientConfig{
		HandshakeConfig:  protocol.Handshake,
		VersionedPlugins: hostPluginSets(),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     p.o.StartTimeout,
		Logger:           p.o.Logger.Named(p.bin.name),
		GRPCDialOptions:  protocol.DialOptions(),
	}
}

// generation is one plugin process. A retired generation takes no new
// calls and is stopped as soon as the calls it still holds end.
type generation struct {
	client *plugin.Client
	rpc    pluginpb.AlgorithmsClient
	stop   context.CancelFunc // kills the process at once (exec.CommandContext)
	done   func()

	mu       sync.Mutex
	inflight int
	retired  bool
	once     sync.Once
}

// enter counts a call on g unless g is retired or its process exited.
func (g *generation) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.retired || g.client.Exited() {
		return false
	}
	g.inflight++
	return true
}

func (g *generation) leave() {
	g.mu.Lock()
	g.inflight--
	last := g.retired && g.inflight == 0
	g.mu.Unlock()
	if last {
		g.kill()
	}
}

// retire takes g out of service; its process is stopped once no call
// holds it.
func (g *generation) retire() {
	g.mu.Lock()
	g.retired = true
	idle := g.inflight == 0
	g.mu.Unlock()
	if idle {
		g.kill()
	}
}

// kill stops the process in the background: go-plugin's Kill asks it to
// shut down (the gRPC controller's Shutdown), waits for it to exit and
// kills it only when it has not within its grace period (2s), so a
// healthy plugin exits cleanly and logs nothing at error level, while a
// hung one is still killed. stop then releases what is left.
func (g *generation) kill() {
	g.once.Do(func() {
		go func() {
			g.client.Kill()
			g.stop()
			g.done()
		}()
	})
}

// start makes sure a healthy process runs and returns the negotiated
// protocol version.
func (p *process) start(ctx context.Context) (int, error) {
	g, err := p.acquire(ctx)
	if err != nil {
		return 0, err
	}
	g.leave()
	return p.version, nil
}

// acquire returns a generation that counts the caller's call, starting a
// fresh process when there is none, it exited, or it was retired.
func (p *process) acquire(ctx context.Context) (*generation, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for plugin start: %w", ports.ErrAlgorithmUnavailable, ctx.Err())
	case <-p.life.Done():
		return nil, fmt.Errorf("%w: %v", ports.ErrAlgorithmUnavailable, errClosed)
	}
	defer func() { <-p.sem }()
	if p.closed.Load() {
		return nil, fmt.Errorf("%w: %v", ports.ErrAlgorithmUnavailable, errClosed)
	}
	if p.cur != nil && p.cur.enter() {
		return p.cur, nil
	}
	if p.cur != nil {
		p.cur.retire()
		p.cur = nil
	}
	g, err := p.launch(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: start plugin %s: %w", ports.ErrAlgorithmUnavailable, p.bin.name, err)
	}
	p.cur = g
	if !g.enter() {
		return nil, fmt.Errorf("%w: plugin %s exited as it started", ports.ErrAlgorithmUnavailable, p.bin.name)
	}
	return g, nil
}

// launch starts a process, retrying a few times when the kernel says the
// file is still open for writing (a fork elsewhere in the host may hold
// the verified copy's descriptor for a moment).
func (p *process) launch(ctx context.Context) (*generation, error) {
	for attempt := 1; ; attempt++ {
		g, err := p.launchOnce(ctx)
		if err == nil || !errors.Is(err, syscall.ETXTBSY) || attempt == 5 {
			return g, err
		}
		select {
		case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (p *process) launchOnce(ctx context.Context) (*generation, error) {
	// Not under p.life: Close stops a running process gracefully (kill),
	// and kills at once only one still starting (below).
	pctx, stop := context.WithCancel(context.Background())
	c := plugin.NewClient(p.config(exec.CommandContext(pctx, p.path)))
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
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		// Killing the process ends the handshake wait at once.
		stop()
		<-done
		r = result{err: ctx.Err()}
	case <-p.life.Done():
		stop()
		<-done
		r = result{err: errClosed}
	}
	if r.err != nil {
		stop()
		c.Kill()
		return nil, r.err
	}
	p.gen++
	p.version = c.NegotiatedVersion()
	p.running.Add(1)
	return &generation{client: c, rpc: r.rpc, stop: stop, done: p.running.Done}, nil
}

func (p *process) call(ctx context.Context, what string, f func(context.Context, pluginpb.AlgorithmsClient) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s via plugin %s: %w: %w", what, p.bin.name, ports.ErrAlgorithmUnavailable, err)
	}
	g, err := p.acquire(ctx)
	if err != nil {
		return fmt.Errorf("%s via plugin %s: %w", what, p.bin.name, err)
	}
	// The reply is bounded by CallTimeout even under a later deadline of
	// the caller's: a hung plugin must not hold a Welcome's attempt, and
	// every Welcome after it, for as long as the caller would wait
	// (COMP-273). A launch above is bounded by StartTimeout instead.
	rctx, cancel := context.WithTimeout(ctx, p.o.CallTimeout)
	defer cancel() // after the error is read against rctx
	err = f(rctx, g.rpc)
	if err != nil {
		verdict, mapped := protocol.FromRPC(rctx, err)
		switch verdict {
		case protocol.Dead:
			g.retire()
			g.kill()
		case protocol.Hung:
			g.retire()
		}
		if verdict != protocol.Healthy {
			p.o.Logger.Warn("plugin process retired", "plugin", p.bin.name, "hung", verdict == protocol.Hung, "error", mapped.Error())
		}
		err = fmt.Errorf("%s via plugin %s: %w", what, p.bin.name, mapped)
	}
	g.leave()
	return err
}

// close stops every process, one still starting included, and waits until
// each is gone; later calls fail with ErrAlgorithmUnavailable.
func (p *process) close() {
	p.closed.Store(true)
	p.end()
	p.sem <- struct{}{}
	g := p.cur
	p.cur = nil
	<-p.sem
	if g != nil {
		g.retire()
	}
	p.running.Wait()
}

func wrapRemote(ctx context.Context, what, name string, err error) error {
	_, mapped := protocol.FromRPC(ctx, err)
	return fmt.Errorf("%s via plugin %s: %w", what, name, mapped)
}
