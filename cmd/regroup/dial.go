package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
)

// tlsSettings are how a home reaches its regroupd, saved by init and
// overridden by --tls, --ca-file and --server-name.
type tlsSettings struct {
	// TLS secures the connection; off is plain text (loopback).
	TLS bool `json:"tls,omitempty"`
	// CAFile is a PEM file of the authorities that sign the server's
	// certificate; empty trusts the system's.
	CAFile string `json:"ca_file,omitempty"`
	// ServerName is the name the certificate must carry; empty uses the
	// host of the address.
	ServerName string `json:"server_name,omitempty"`
}

// apply returns t with the TLS flags of o that were set; --ca-file and
// --server-name imply --tls.
func (t tlsSettings) apply(o opts) tlsSettings {
	if o.tls.set {
		t.TLS = o.tls.v
	}
	if o.caFile != "" {
		t.CAFile, t.TLS = o.caFile, true
		if abs, err := filepath.Abs(o.caFile); err == nil { // saved by init, read from any directory
			t.CAFile = abs
		}
	}
	if o.serverName != "" {
		t.ServerName, t.TLS = o.serverName, true
	}
	return t
}

// config returns the client TLS configuration, nil for plain text.
func (t tlsSettings) config() (*tls.Config, error) {
	if !t.TLS {
		return nil, nil
	}
	c := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, usagef("--ca-file: %v", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, usagef("--ca-file %s: no PEM certificate in it", t.CAFile)
		}
	}
	return c, nil
}

// serverFlag collects --server: repeated, or comma-separated, addresses
// of regroupd replicas sharing one database.
type serverFlag string

func (s *serverFlag) String() string { return string(*s) }
func (s *serverFlag) Set(v string) error {
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("%q is not host:port", a)
		}
		if *s != "" {
			*s += ","
		}
		*s += serverFlag(a)
	}
	return nil
}

// servers splits a saved or given server list.
func servers(list string) []string {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// dial connects to the regroupd replicas of list as the installation.
func dial(list string, tc *tls.Config, in identity.Installation) (*grpctransport.Client, error) {
	return grpctransport.DialReplicas(servers(list), &grpctransport.ClientOptions{InstallationKey: in.InstallationKey, TLS: tc})
}

// diagnose finds out why a call to the regroupd of list failed with err
// and says it in the user's terms: nothing listening, no answer, a TLS
// handshake that failed and why, a TLS-only server dialled in plain text,
// a server that answered but could not serve (its database), a refused
// identity or an unknown call (another version).
func diagnose(ctx context.Context, list string, tc *tls.Config, err error) string {
	switch {
	case errors.Is(err, ports.ErrUnauthenticated):
		return "regroupd refused this installation's authentication: is this home's identity known to it? (`regroup whoami`)"
	case strings.Contains(err.Error(), "Unimplemented"):
		return "regroupd does not know this call: it runs another version of regroup than this command"
	case strings.Contains(err.Error(), "unavailable (ref "):
		return "regroupd answered but could not serve the call, most likely because its database is down; " +
			"its log says why under the ref above"
	}
	var says []string
	for _, addr := range servers(list) {
		says = append(says, addr+": "+probe(ctx, addr, tc))
	}
	return strings.Join(says, "\n")
}

// probe checks one address at the TCP and TLS levels.
func probe(ctx context.Context, addr string, tc *tls.Config) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "not reachable: nothing listens there (connection refused); start regroupd (`go run ./cmd/regroupd`), or pass --server ADDR"
	case errors.As(err, &dns):
		return fmt.Sprintf("not reachable: the host name does not resolve (%v)", dns)
	case err != nil:
		return fmt.Sprintf("not reachable: %v (a firewall, or the wrong host)", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if tc == nil {
		// A TLS-only server answers a ClientHello; only the handshake is
		// attempted, nothing is sent over it.
		hs := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // a probe
		if hs.HandshakeContext(ctx) == nil {
			return "regroupd there speaks TLS only and this command dialled plain text: pass --tls (and --ca-file if its " +
				"certificate is not from an authority this system trusts)"
		}
		return "reachable, but the call failed at the gRPC level: see the error above"
	}
	c := tc.Clone()
	if c.ServerName == "" {
		c.ServerName, _, _ = net.SplitHostPort(addr)
	}
	c.NextProtos = []string{"h2"}
	err = tls.Client(conn, c).HandshakeContext(ctx)
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var rec tls.RecordHeaderError
	var inv x509.CertificateInvalidError
	switch {
	case err == nil:
		return "reachable, TLS handshake fine; the call failed at the gRPC level: see the error above"
	case errors.As(err, &rec):
		return "TLS handshake failed: the server does not speak TLS (plain-text regroupd?): drop --tls, --ca-file and --server-name"
	case errors.As(err, &unknown):
		return "TLS handshake failed: the server's certificate is signed by an authority this command does not trust: pass --ca-file with its CA"
	case errors.As(err, &host):
		return fmt.Sprintf("TLS handshake failed: the server's certificate is not valid for %q (%v): pass --server-name with a name it holds", c.ServerName, host)
	case errors.As(err, &inv):
		return fmt.Sprintf("TLS handshake failed: the server's certificate is invalid: %v", inv)
	}
	return fmt.Sprintf("TLS handshake failed: %v", err)
}
