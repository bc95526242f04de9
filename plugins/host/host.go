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
// # What the host checks
//
// A plugin may be buggy or hostile in what it sends back. The host refuses
// a description outside the limits ([MaxAlgorithms], [MaxPublicKeySize],
// ...); checks keys and nonces against the declared sizes before a call;
// reads every reply under a receive limit sized from the request and checks
// its sizes after it; keeps at most [MaxErrorText] bytes of a plugin's
// error text, quoted; runs the verified copy of a pinned binary; and skips
// a bad directory entry ([Host.Skipped]) rather than failing every plugin.
// It trusts the plugin for the cryptography itself and for the error class
// it names. docs/plugin-guide.md lists both in full.
//
// # Errors
//
// Every call runs under the caller's ctx; its reply is bounded by
// [Options.CallTimeout] whatever the ctx's deadline. Arguments the declaration rules out fail
// before the call with ports.ErrInvalidKey or ports.ErrInvalidInput. A
// plugin that crashes, exits, does not answer before the deadline, or whose
// call the caller cancels yields an error wrapping
// ports.ErrAlgorithmUnavailable (and the context error); a dead process is
// replaced by the next call, a hung one is retired and stopped once no call
// holds it. A reply outside the protocol wraps
// ports.ErrAlgorithmUnavailable and [ErrMisbehaved]: the fault is the
// plugin's, so core retries the Welcome (JOIN-085) instead of rejecting it.
// Errors the implementation returns keep their ports class across the
// process boundary. [Load] reports a refused description with
// [ErrInvalidDescription].
package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/regroup-mls/regroup/plugins/internal/protocol"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// Options configures [Load].
type Options struct {
	// Dir is the directory scanned for plugin executables. Only regular,
	// executable files (or links to them) whose name starts with
	// "regroup-plugin-" are launched; other entries with that prefix are
	// reported by [Host.Skipped].
	Dir string
	// Checksums pins binaries: file name (without directory) to the
	// lower-case hex SHA-256 of its contents. A pinned binary whose contents
	// differ is not launched; one that matches is copied into a private
	// directory and the copy is what runs.
	Checksums map[string]string
	// RequireChecksums refuses to launch a binary that Checksums does not
	// pin.
	RequireChecksums bool
	// RunDir is where the private directory holding verified copies of
	// pinned binaries is made (default os.TempDir()). It must allow
	// executing files.
	RunDir string
	// StartTimeout bounds the launch of one plugin process (default 20s);
	// the caller's ctx bounds it too.
	StartTimeout time.Duration
	// CallTimeout bounds the reply of every call to a plugin process, and
	// a whole call whose ctx carries no deadline (default 30s); a caller's
	// earlier deadline still applies.
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

// ErrInvalidDescription reports a plugin whose description [Load] refuses:
// it serves nothing or more than [MaxAlgorithms] algorithms, names an
// identifier that names no algorithm, lists one twice or one another
// plugin serves, or declares a size outside the limits.
var ErrInvalidDescription = errors.New("invalid plugin description")

// ErrMisbehaved reports a reply that breaks the protocol: the wrong number
// of payloads, a key or payload of a size the request rules out, a reply
// larger than the call allows, or a status the protocol gives no meaning
// to. Calls wrap it together with ports.ErrAlgorithmUnavailable: the fault
// is the plugin's, never the input's.
var ErrMisbehaved = protocol.ErrMisbehaved

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
	// Wrappers and PointeeAEADs are the identifiers the plugin serves, in
	// the order it listed them.
	Wrappers     []ports.WrapperAlgorithmID
	PointeeAEADs []ports.PointeeAEADID
}

// Host owns the loaded plugins and the ports implementations backed by them.
type Host struct {
	plugins  []Plugin
	skipped  []Skipped
	conns    []conn
	wrappers []ports.WrapperAlgorithm
	aeads    []ports.PointeeAEAD
	served   *served
	runDir   string
}

// conn is how a remote implementation reaches its plugin.
type conn interface {
	// call runs f with a client; what names the operation in errors.
	call(ctx context.Context, what string, f func(context.Context, pluginpb.AlgorithmsClient) error) error
	name() string
	close()
}

// Load discovers, verifies and launches every plugin in opts.Dir and
// checks what each says it serves. An entry that cannot be launched at all
// (a dangling link, a file that is not executable) is skipped and reported
// by [Host.Skipped]. Load fails, stopping every process it started, when a
// binary fails its checksum (plugin.ErrChecksumsDoNotMatch), is not pinned
// while checksums are required (ports.ErrInvalidInput), does not start
// (ports.ErrAlgorithmUnavailable, with ctx's error when ctx ended), or
// describes itself in a way the host refuses ([ErrInvalidDescription]).
func Load(ctx context.Context, opts *Options) (*Host, error) {
	o := opts.withDefaults()
	bins, skipped, err := discover(o.Dir)
	if err != nil {
		return nil, err
	}
	for _, s := range skipped {
		o.Logger.Warn("plugin entry skipped", "entry", s.Path, "error", s.Err.Error())
	}
	h := &Host{skipped: skipped, served: newServed()}
	for _, bin := range bins {
		if err := h.load(ctx, bin, o); err != nil {
			h.Close()
			return nil, err
		}
	}
	return h, nil
}

func (h *Host) load(ctx context.Context, bin binary, o Options) error {
	sum, err := pinned(bin, o)
	if err != nil {
		return err
	}
	path := bin.path
	if sum != nil {
		if h.runDir == "" {
			if h.runDir, err = os.MkdirTemp(o.RunDir, "regroup-plugins-"); err != nil {
				return fmt.Errorf("load plugin %s: %w", bin.name, err)
			}
		}
		if path, err = verifiedCopy(bin, sum, h.runDir); err != nil {
			return err
		}
	}
	p := newProcess(bin, path, o)
	version, err := p.start(ctx)
	if err != nil {
		p.close()
		return fmt.Errorf("load plugin %s: %w", bin.name, err)
	}
	if err := h.add(ctx, p, bin.path, version, o.CallTimeout); err != nil {
		p.close()
		return err
	}
	return nil
}

// Attach serves the algorithms behind an established Algorithms client (for
// example go-plugin's in-process test connection) without managing a
// process. The description is checked as [Load] checks it. Close does not
// close client's connection.
func Attach(ctx context.Context, name string, client pluginpb.AlgorithmsClient) (*Host, error) {
	h := &Host{served: newServed()}
	if err := h.add(ctx, &attached{n: name, c: client}, "", 1, 30*time.Second); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *Host) add(ctx context.Context, c conn, path string, version int, callTimeout time.Duration) error {
	ctx, cancel := bounded(ctx, callTimeout)
	defer cancel()
	var desc *pluginpb.DescribeResponse
	err := c.call(ctx, "describe", func(ctx context.Context, cl pluginpb.AlgorithmsClient) error {
		var err error
		desc, err = cl.Describe(ctx, &pluginpb.DescribeRequest{}, grpc.MaxCallRecvMsgSize(describeReplyLimit))
		return err
	})
	if errors.Is(err, ErrMisbehaved) {
		return fmt.Errorf("load plugin %s: %w: %w", c.name(), ErrInvalidDescription, err)
	}
	if err != nil {
		return fmt.Errorf("load plugin %s: %w", c.name(), err)
	}
	if err := h.served.check(c.name(), desc); err != nil {
		return fmt.Errorf("load plugin %s: %w", c.name(), err)
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

// Skipped reports the directory entries named like plugins that Load did
// not launch, in directory order, each with the reason.
func (h *Host) Skipped() []Skipped { return append([]Skipped(nil), h.skipped...) }

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

// Register adds every plugin-backed algorithm to r, all or none. An
// identifier r already holds (a built-in algorithm of the same id) fails
// the registration with r's error, which for *algorithm.Registry wraps
// algorithm.ErrAlreadyRegistered.
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

// Close stops every plugin process, one still starting included, and
// returns once they are gone. Algorithms obtained from the host fail with
// ports.ErrAlgorithmUnavailable afterwards.
func (h *Host) Close() error {
	for _, c := range h.conns {
		c.close()
	}
	if h.runDir != "" {
		if err := os.RemoveAll(h.runDir); err != nil {
			return fmt.Errorf("close plugin host: %w", err)
		}
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
