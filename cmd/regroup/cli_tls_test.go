package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/ports"
)

// testPKI writes a CA and a server certificate for localhost and
// 127.0.0.1 signed by it into dir, and returns the three PEM files.
func testPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "regroup test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	caCert, _ := x509.ParseCertificate(caDER)
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}

// The CLI over TLS: a TLS-only regroupd dialled in plain text, without
// the CA, or under a name its certificate lacks fails with exit 4 and
// says which; nothing listening says connection refused; with --ca-file
// init works and saves the TLS settings, which later commands use.
func TestCLITLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs regroupd and the regroup binary")
	}
	bin := cliBinary(t)
	dir := t.TempDir()
	caFile, certFile, keyFile := testPKI(t, dir)
	d := testenv.StartRegroupdWith(t, "sqlite", "-tls-cert", certFile, "-tls-key", keyFile)
	alice := user{t, bin, filepath.Join(dir, "alice")}
	for _, tc := range []struct {
		why  string
		args []string
		says string
	}{
		{"plain text to a TLS-only server", []string{"init", "--server", d.Addr}, "speaks TLS only and this command dialled plain text: pass --tls"},
		{"an authority the system does not trust", []string{"init", "--server", d.Addr, "--tls"}, "signed by an authority this command does not trust: pass --ca-file"},
		{"a name the certificate lacks", []string{"init", "--server", d.Addr, "--ca-file", caFile, "--server-name", "elsewhere.example"},
			`not valid for "elsewhere.example"`},
		{"nothing listening", []string{"init", "--server", "127.0.0.1:1", "--tls"}, "connection refused"},
	} {
		_, errOut, code := alice.run(append(tc.args, "--timeout", "1s")...)
		if code != exitUnavailable || !strings.Contains(errOut, tc.says) {
			t.Errorf("%s: exit %d, stderr %q; want exit 4 saying %q", tc.why, code, errOut, tc.says)
		}
	}
	if _, _, code := alice.run("init", "--ca-file", filepath.Join(dir, "server.key"), "--server", d.Addr); code != exitUsage {
		t.Errorf("--ca-file without a certificate: exit %d, want 2", code)
	}
	alice.ok("init", "--server", d.Addr, "--ca-file", caFile)
	var who whoamiJSON
	alice.json(&who, "whoami")
	alice.ok("group", "create", "solo") // a call over the saved TLS settings
	if _, errOut, code := alice.run("group", "list", "--tls=false", "--timeout", "1s"); code != exitUnavailable || !strings.Contains(errOut, "pass --tls") {
		t.Errorf("--tls=false against the saved TLS: exit %d, %q", code, errOut)
	}

	// move: to another delivery service, refused; to the same one under
	// its name, saved.
	other := testenv.StartRegroupd(t, "sqlite")
	if _, errOut, code := alice.run("move", "--server", other.Addr, "--tls=false"); code != exitNotFound || !strings.Contains(errOut, "does not hold inbox") {
		t.Errorf("move to another regroupd: exit %d, %q", code, errOut)
	}
	alice.ok("move", "--server", "localhost:"+strings.Split(d.Addr, ":")[1], "--server-name", "localhost")
	b, err := os.ReadFile(filepath.Join(alice.home, configFile))
	if err != nil || !strings.Contains(string(b), `"server_name": "localhost"`) || !strings.Contains(string(b), `"server": "localhost:`) {
		t.Errorf("config after move: %s %v", b, err)
	}
	alice.ok("group", "list")
}

// diagnose names a server that answered but could not serve (its
// database), a refused identity and an unknown call apart from a server
// that cannot be reached.
func TestDiagnoseAnsweredFailures(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		err  error
		says string
	}{
		{fmt.Errorf("publish: %w: Unavailable: unavailable (ref 0a0b0c0d0e0f)", ports.ErrUnavailable), "database is down"},
		{fmt.Errorf("query: %w: bad proof", ports.ErrUnauthenticated), "refused this installation's authentication"},
		{fmt.Errorf("query: %w: Unimplemented: unknown method", ports.ErrUnavailable), "another version"},
		{errors.Join(ports.ErrUnavailable, errors.New("connection error")), "connection refused"},
	} {
		if got := diagnose(ctx, "127.0.0.1:1", nil, tc.err); !strings.Contains(got, tc.says) {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.says)
		}
	}
}
