// Package host loads algorithm plugins and serves what they implement as
// ordinary ports.WrapperAlgorithm and ports.PointeeAEAD values, so core
// cannot tell a plugin from a built-in algorithm.
//
// [Load] discovers the executables named "regroup-plugin-*" in a directory,
// launches each with hashicorp/go-plugin over gRPC (protocol versions
// negotiated, mutual TLS set up automatically, each binary optionally pinned
// to a SHA-256 checksum), asks what it serves, and returns a [Host] whose
// algorithms [Host.Register] adds to a registry:
//
//	h, err := host.Load(ctx, &host.Options{Dir: "/var/lib/regroup/plugins"})
//	if err != nil { ... }
//	defer h.Close()
//	if err := h.Register(registry); err != nil { ... }
//
// # Failures
//
// Every call runs under the caller's ctx (bounded by [Options.CallTimeout]
// when ctx has no deadline). A plugin that crashes, exits or does not answer
// before the deadline yields an error wrapping ports.ErrAlgorithmUnavailable
// (and the context error when the deadline passed); the process is stopped
// and a fresh one is started by the next call. Errors the implementation
// returns keep their ports class across the process boundary.
package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// Options configures [Load].
type Options struct {
	// Dir is the directory scanned for plugin executables. Only regular,
	// executable files whose name starts with "regroup-plugin-" are loaded.
	Dir string
	// Checksums pins binaries: file name (without directory) to the
	// lower-case hex SHA-256 of its contents. A pinned binary whose contents
	// differ is not launched.
	Checksums map[string]string
	// RequireChecksums refuses to launch a binary that Checksums does not
	// pin.
	RequireChecksums bool
	// StartTimeout bounds the launch of one plugin process (default 20s);
	// the caller's ctx bounds it too.
	StartTimeout time.Duration
	// CallTimeout bounds a call whose ctx carries no deadline (default 30s).
	CallTimeout time.Duration
	// Logger receives go-plugin's logs and the plugins' stderr (default:
	// warnings and above on stderr).
	Logger hclog.Logger
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.StartTimeout <= 0 {
		out.StartTimeout = 20 * time.Second
	}
	if out.CallTimeout <= 0 {
		out.CallTimeout = 30 * time.Second
	}
	if out.Logger == nil {
		out.Logger = hclog.New(&hclog.LoggerOptions{Name: "regroup-plugin-host", Level: hclog.Warn})
	}
	return out
}

// Registrar is what algorithms are registered into; *algorithm.Registry of
// core/algorithm implements it.
type Registrar interface {
	Register(impls ...any) error
}

// Plugin describes one loaded plugin.
type Plugin struct {
	// Name is the binary's file name, or the name given to [Attach].
	Name string
	// Path is the binary's path; empty for an attached connection.
	Path string
	// ProtocolVersion is the negotiated plugin protocol version.
	ProtocolVersion int
	Wrappers        []ports.WrapperAlgorithmID
	PointeeAEADs    []ports.PointeeAEADID
}

// Host owns the loaded plugins and the ports implementations backed by them.
type Host struct {
	plugins  []Plugin
	conns    []conn
	wrappers []ports.WrapperAlgorithm
	aeads    []ports.PointeeAEAD
}

// conn is how a remote implementation reaches its plugin.
type conn interface {
	// call runs f with a client; what names the operation in errors.
	call(ctx context.Context, what string, f func(context.Context, pluginpb.AlgorithmsClient) error) error
	name() string
	close()
}

// Load discovers, verifies and launches every plugin in opts.Dir and
// describes what each serves. It fails, stopping what it started, when a
// binary fails its checksum, does not start, or serves nothing.
func Load(ctx context.Context, opts *Options) (*Host, error) {
	o := opts.withDefaults()
	bins, err := discover(o.Dir)
	if err != nil {
		return nil, err
	}
	h := &Host{}
	for _, bin := range bins {
		p, err := newProcess(bin, o)
		if err != nil {
			h.Close()
			return nil, err
		}
		version, err := p.start(ctx)
		if err != nil {
			p.close()
			h.Close()
			return nil, fmt.Errorf("load plugin %s: %w", bin.name, err)
		}
		if err := h.add(ctx, p, bin.path, version, o.CallTimeout); err != nil {
			p.close()
			h.Close()
			return nil, err
		}
	}
	return h, nil
}

// Attach serves the algorithms behind an established Algorithms client (for
// example go-plugin's in-process test connection) without managing a
// process. Close does not close client's connection.
func Attach(ctx context.Context, name string, client pluginpb.AlgorithmsClient) (*Host, error) {
	h := &Host{}
	if err := h.add(ctx, &attached{n: name, c: client}, "", 1, 30*time.Second); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *Host) add(ctx context.Context, c conn, path string, version int, callTimeout time.Duration) error {
	var desc *pluginpb.DescribeResponse
	err := c.call(ctx, "describe", func(ctx context.Context, cl pluginpb.AlgorithmsClient) error {
		var err error
		desc, err = cl.Describe(ctx, &pluginpb.DescribeRequest{})
		return err
	})
	if err != nil {
		return fmt.Errorf("load plugin %s: %w", c.name(), err)
	}
	if len(desc.GetWrappers())+len(desc.GetAeads()) == 0 {
		return fmt.Errorf("load plugin %s: %w: it serves no algorithm", c.name(), ports.ErrInvalidInput)
	}
	info := Plugin{Name: c.name(), Path: path, ProtocolVersion: version}
	for _, w := range desc.GetWrappers() {
		id := ports.WrapperAlgorithmID(w.GetId())
		h.wrappers = append(h.wrappers, &remoteWrapper{c: c, id: id, pubSize: int(w.GetPublicKeySize()), timeout: callTimeout})
		info.Wrappers = append(info.Wrappers, id)
	}
	for _, a := range desc.GetAeads() {
		id := ports.PointeeAEADID(a.GetId())
		h.aeads = append(h.aeads, &remoteAEAD{c: c, id: id, keySize: int(a.GetKeySize()), nonceSize: int(a.GetNonceSize()), timeout: callTimeout})
		info.PointeeAEADs = append(info.PointeeAEADs, id)
	}
	h.plugins = append(h.plugins, info)
	h.conns = append(h.conns, c)
	return nil
}

// Plugins describes the loaded plugins in load order.
func (h *Host) Plugins() []Plugin { return append([]Plugin(nil), h.plugins...) }

// Wrappers returns the plugin-backed wrapper algorithms.
func (h *Host) Wrappers() []ports.WrapperAlgorithm {
	return append([]ports.WrapperAlgorithm(nil), h.wrappers...)
}

// PointeeAEADs returns the plugin-backed pointee AEADs.
func (h *Host) PointeeAEADs() []ports.PointeeAEAD {
	return append([]ports.PointeeAEAD(nil), h.aeads...)
}

// Wrapper returns the plugin-backed wrapper registered under id, or an
// error wrapping ports.ErrUnsupportedAlgorithm.
func (h *Host) Wrapper(id ports.WrapperAlgorithmID) (ports.WrapperAlgorithm, error) {
	for _, w := range h.wrappers {
		if w.ID() == id {
			return w, nil
		}
	}
	return nil, fmt.Errorf("no plugin serves wrapper %v: %w", id, ports.ErrUnsupportedAlgorithm)
}

// PointeeAEAD returns the plugin-backed AEAD registered under id, or an
// error wrapping ports.ErrUnsupportedAlgorithm.
func (h *Host) PointeeAEAD(id ports.PointeeAEADID) (ports.PointeeAEAD, error) {
	for _, a := range h.aeads {
		if a.ID() == id {
			return a, nil
		}
	}
	return nil, fmt.Errorf("no plugin serves pointee aead %v: %w", id, ports.ErrUnsupportedAlgorithm)
}

// Register adds every plugin-backed algorithm to r, all or none.
func (h *Host) Register(r Registrar) error {
	impls := make([]any, 0, len(h.wrappers)+len(h.aeads))
	for _, w := range h.wrappers {
		impls = append(impls, w)
	}
	for _, a := range h.aeads {
		impls = append(impls, a)
	}
	if err := r.Register(impls...); err != nil {
		return fmt.Errorf("register plugin algorithms: %w", err)
	}
	return nil
}

// Close stops every plugin process. Algorithms obtained from the host fail
// with ports.ErrAlgorithmUnavailable afterwards.
func (h *Host) Close() error {
	for _, c := range h.conns {
		c.close()
	}
	return nil
}

// attached is a conn over a client the caller manages.
type attached struct {
	n string
	c pluginpb.AlgorithmsClient
}

func (a *attached) name() string { return a.n }
func (a *attached) close()       {}
func (a *attached) call(ctx context.Context, what string, f func(context.Context, pluginpb.AlgorithmsClient) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s via plugin %s: %w: %w", what, a.n, ports.ErrAlgorithmUnavailable, err)
	}
	if err := f(ctx, a.c); err != nil {
		return wrapRemote(ctx, what, a.n, err)
	}
	return nil
}

var _ io.Closer = (*Host)(nil)

var errClosed = errors.New("plugin host closed")
