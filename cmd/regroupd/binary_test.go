package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/ports/transporttest"
)

// daemon is a regroupd process started by a test.
type daemon struct {
	cmd        *exec.Cmd
	grpcAddr   string
	healthAddr string
	exited     chan error
}

// buildDaemon compiles regroupd into a temporary directory.
func buildDaemon(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "regroupd")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startDaemon runs bin with args and waits for its "regroupd listening"
// log line, which names the addresses it bound.
func startDaemon(t *testing.T, bin string, args ...string) *daemon {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, exited: make(chan error, 1)}
	ready := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "regroupd listening" {
				ready <- line
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { d.exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	select {
	case line := <-ready:
		d.grpcAddr, _ = line["grpc_addr"].(string)
		d.healthAddr, _ = line["health_addr"].(string)
	case err := <-d.exited:
		t.Fatalf("regroupd exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("regroupd did not start listening within 30s")
	}
	return d
}

// The binary starts on loopback, answers its health endpoint, stores a
// publish, stops cleanly on SIGTERM, and serves the same envelope with
// the same id after a restart.
func TestBinaryStartPublishStop(t *testing.T) {
	t.Parallel()
	bin := buildDaemon(t)
	db := filepath.Join(t.TempDir(), "regroupd.db")
	args := []string{"-listen", "127.0.0.1:0", "-health-listen", "127.0.0.1:0", "-database", db}
	d := startDaemon(t, bin, args...)
	if !strings.HasPrefix(d.grpcAddr, "127.0.0.1:") {
		t.Fatalf("listening on %q, want loopback", d.grpcAddr)
	}
	resp, err := http.Get("http://" + d.healthAddr + "/healthz")
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("health = %d %q", resp.StatusCode, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, key, _ := ed25519.GenerateKey(nil)
	c, err := grpctransport.Dial(d.grpcAddr, &grpctransport.ClientOptions{InstallationKey: key})
	if err != nil {
		t.Fatal(err)
	}
	topic := transporttest.RandomGroupTopic()
	ids, err := c.Publish(ctx, transporttestBatch(topic))
	if err != nil || len(ids) != 2 || ids[1] != 2 {
		t.Fatalf("Publish = %v, %v", ids, err)
	}
	c.Close()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.exited:
		if err != nil {
			t.Fatalf("regroupd exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("regroupd did not stop within 20s of SIGTERM")
	}
	d = startDaemon(t, bin, args...)
	c, _ = grpctransport.Dial(d.grpcAddr, &grpctransport.ClientOptions{InstallationKey: key})
	defer c.Close()
	got, err := c.Query(ctx, topic, 0, 0)
	if err != nil || len(got) != 2 || string(got[1].GetEnvelope().GetGroupMessage()) != "two" {
		t.Fatalf("after restart Query = %v, %v", got, err)
	}
	d.cmd.Process.Signal(syscall.SIGINT)
	if err := <-d.exited; err != nil {
		t.Fatalf("regroupd exit after SIGINT: %v", err)
	}
}

// With -tls-cert and -tls-key, regroupd serves TLS and a client trusting
// the certificate publishes over it.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	cfg := testConfig(t, "sqlite")
	cfg.TLSCert, cfg.TLSKey = certFile, keyFile
	srv, err := start(context.Background(), cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop()
	_, key, _ := ed25519.GenerateKey(nil)
	c, _ := grpctransport.Dial(srv.lis.Addr().String(), &grpctransport.ClientOptions{
		InstallationKey: key, TLS: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"},
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Publish(ctx, transporttestBatch(transporttest.RandomGroupTopic())); err != nil {
		t.Fatalf("Publish over TLS: %v", err)
	}
	plain, _ := grpctransport.Dial(srv.lis.Addr().String(), nil)
	defer plain.Close()
	short, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	if _, err := plain.HighestSequenceID(short, transporttest.RandomGroupTopic()); err == nil {
		t.Fatal("a plaintext client was served by a TLS server")
	}
}

func selfSigned(t *testing.T, dir string) (string, string, *x509.CertPool) {
	t.Helper()
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "regroupd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(priv)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestConfigFlagsAndEnv(t *testing.T) {
	t.Setenv("REGROUPD_LISTEN", "127.0.0.1:6000")
	t.Setenv("REGROUPD_RETENTION_WELCOMES", "72h")
	cfg, err := parseConfig([]string{"-database", "postgres://x@127.0.0.1/db", "-rate", "5"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:6000" || !cfg.postgres() || cfg.RatePerSecond != 5 || cfg.Retention[1] != 72*time.Hour {
		t.Fatalf("config = %+v", cfg)
	}
	def, _ := parseConfig(nil)
	if !strings.HasPrefix(def.Listen, "127.0.0.1:") || def.postgres() {
		t.Fatalf("defaults = %+v, want loopback and SQLite", def)
	}
	for _, bad := range [][]string{{"-tls-cert", "c.pem"}, {"-max-batch", "x"}, {"-log-format", "xml"}, {"stray"}} {
		if _, err := parseConfig(bad); err == nil {
			t.Errorf("parseConfig(%q) accepted", bad)
		}
	}
}
