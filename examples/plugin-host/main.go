// Command plugin-host is a small regroup host application: it loads the
// algorithm plugins of a directory into a core/algorithm registry next to
// the built-in algorithms, as an application does at start-up, then seals
// and opens a Welcome through every wrapper a plugin serves.
//
//	dir=$(mktemp -d)
//	go build -o $dir/regroup-plugin-xwing ./examples/plugin-xwing
//	go run ./examples/plugin-host -dir $dir \
//		-pin regroup-plugin-xwing=$(sha256sum $dir/regroup-plugin-xwing | cut -d' ' -f1)
//
// Every -pin pins one binary; with -require (the default when a pin is
// given) an unpinned binary is refused. docs/plugin-guide.md walks through
// writing, testing and deploying a plugin.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/adapters/aead"
	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/plugins/host"
	"github.com/regroup-mls/regroup/ports"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "plugin-host:", err)
		os.Exit(1)
	}
}

// pins collects -pin name=sha256 flags.
type pins map[string]string

func (p pins) String() string { return fmt.Sprint(map[string]string(p)) }
func (p pins) Set(v string) error {
	name, sum, ok := strings.Cut(v, "=")
	if !ok || name == "" || sum == "" {
		return errors.New("want name=sha256")
	}
	p[name] = sum
	return nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("plugin-host", flag.ContinueOnError)
	dir := fs.String("dir", "/var/lib/regroup/plugins", "plugin directory")
	checksums := pins{}
	fs.Var(checksums, "pin", "pin a binary: name=lower-case hex SHA-256 (repeatable)")
	require := fs.Bool("require", true, "refuse binaries no -pin names (when any -pin is given)")
	if err := fs.Parse(args); err != nil {
		return err
	}

	// The built-ins this application serves in-process. A plugin serving
	// one of these ids would fail Register with
	// algorithm.ErrAlreadyRegistered.
	reg, err := algorithm.New(hpkewrap.NewCurve25519(), aead.NewChaCha20Poly1305())
	if err != nil {
		return err
	}
	h, err := host.Load(ctx, &host.Options{
		Dir:              *dir,
		Checksums:        checksums,
		RequireChecksums: *require && len(checksums) > 0,
	})
	if err != nil {
		return err
	}
	defer h.Close()
	for _, s := range h.Skipped() {
		fmt.Fprintf(out, "skipped %s: %v\n", s.Name, s.Err)
	}
	if err := h.Register(reg); err != nil {
		return err
	}
	for _, p := range h.Plugins() {
		fmt.Fprintf(out, "plugin %s (protocol %d): wrappers %v, pointee aeads %v\n", p.Name, p.ProtocolVersion, p.Wrappers, p.PointeeAEADs)
	}
	fmt.Fprintf(out, "registry: wrappers %v, pointee aeads %v\n", reg.Wrappers(), reg.PointeeAEADs())

	// Core looks algorithms up by wire id and cannot tell a plugin from a
	// built-in; so does this round trip.
	for _, w := range h.Wrappers() {
		if err := roundTrip(ctx, reg, w.ID()); err != nil {
			return err
		}
		fmt.Fprintf(out, "%v: sealed and opened a Welcome\n", w.ID())
	}
	return nil
}

func roundTrip(ctx context.Context, reg *algorithm.Registry, id ports.WrapperAlgorithmID) error {
	w, err := reg.Wrapper(id)
	if err != nil {
		return err
	}
	pub, priv, err := w.GenerateKey(ctx)
	if err != nil {
		return err
	}
	sealed, err := w.Seal(ctx, pub, ports.WelcomeWrapperInfo(), []byte("welcome"), []byte("metadata"))
	if err != nil {
		return err
	}
	pts, err := w.Open(ctx, priv, ports.WelcomeWrapperInfo(), sealed...)
	if err != nil {
		return err
	}
	if string(pts[0]) != "welcome" || string(pts[1]) != "metadata" {
		return fmt.Errorf("%v: opened %q", id, pts)
	}
	return nil
}
