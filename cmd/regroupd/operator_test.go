package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
)

// opDaemon is a regroupd process whose whole log the test keeps.
type opDaemon struct {
	cmd          *exec.Cmd
	grpc, health string
	exited       chan error
	mu           sync.Mutex
	lines        []map[string]any
	scanned      chan struct{}
}

func (d *opDaemon) log() []map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]map[string]any(nil), d.lines...)
}

// runOp starts regroupd with args (and env added to the test's) in dir,
// waiting for it to listen.
func runOp(t *testing.T, dir string, env []string, args ...string) *opDaemon {
	t.Helper()
	cmd := exec.Command(testenv.RegroupdBinary(t), args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &opDaemon{cmd: cmd, exited: make(chan error, 1), scanned: make(chan struct{})}
	ready := make(chan map[string]any, 1)
	go func() {
		defer close(d.scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				line = map[string]any{"raw": sc.Text()}
			}
			d.mu.Lock()
			d.lines = append(d.lines, line)
			d.mu.Unlock()
			if line["msg"] == "regroupd listening" {
				ready <- line
			}
		}
	}()
	go func() { <-d.scanned; d.exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	select {
	case line := <-ready:
		d.grpc, _ = line["grpc_addr"].(string)
		d.health, _ = line["health_addr"].(string)
	case err := <-d.exited:
		t.Fatalf("regroupd exited before listening: %v\n%v", err, d.log())
	case <-time.After(60 * time.Second):
		t.Fatal("regroupd did not listen within 60s")
	}
	return d
}

// Bad values are refused at start with exit 2 and a message naming the
// flag, instead of being replaced or ignored; a SQLite path that cannot
// be a database says why instead of "out of memory".
func TestRefusesBadFlags(t *testing.T) {
	bin := testenv.RegroupdBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"-max-batch", "-1"}, "-max-batch -1: must be positive"},
		{[]string{"-rate", "0"}, "-rate 0 would refuse every call"},
		{[]string{"-max-connections", "0"}, "-max-connections 0 would refuse every call"},
		{[]string{"-log-level", "verbose"}, `-log-level: "verbose" is not debug, info, warn or error`},
		{[]string{"-shutdown-timeout", "-1s"}, "-shutdown-timeout -1s: must be positive"},
		{[]string{"-retention-welcomes", "-1h"}, "-retention-welcomes -1h0m0s"},
		{[]string{"-postgres-schema", "s"}, "-postgres-schema (or REGROUPD_POSTGRES_SCHEMA) applies to PostgreSQL only"},
		{[]string{"-postgres-notify"}, "-postgres-notify (or REGROUPD_POSTGRES_NOTIFY) applies to PostgreSQL only"},
	} {
		out, err := exec.Command(bin, append([]string{"-database", db, "-listen", "127.0.0.1:0", "-health-listen", ""}, tc.args...)...).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), tc.says) {
			t.Errorf("regroupd %s: %v\n%s\nwant exit 2 saying %q", strings.Join(tc.args, " "), err, out, tc.says)
		}
	}
	for _, tc := range []struct {
		db, says string
	}{
		{dir, "is a directory"},
		{filepath.Join(dir, "missing", "r.db"), "does not exist"},
	} {
		out, err := exec.Command(bin, "-database", tc.db, "-listen", "127.0.0.1:0", "-health-listen", "").CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.says) || strings.Contains(string(out), "out of memory") {
			t.Errorf("-database %s: %v\n%s\nwant it to say %q", tc.db, err, out, tc.says)
		}
	}
	if out, err := exec.Command(bin, "-version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "regroupd ") ||
		!strings.Contains(string(out), "revision") {
		t.Errorf("-version: %v %q", err, out)
	}
}

// Started with no -database, regroupd keeps its database under
// $XDG_STATE_HOME/regroupd, not in the working directory; it logs the
// limits in effect; /metrics carries regroupd_build_info and every
// labelled counter at zero before any event; and SIGTERM with an open
// subscription logs nothing at warn or error level.
func TestOperatorStartAndQuietStop(t *testing.T) {
	cwd, state := t.TempDir(), t.TempDir()
	d := runOp(t, cwd, []string{"XDG_STATE_HOME=" + state, "STATE_DIRECTORY="},
		"-listen", "127.0.0.1:0", "-health-listen", "127.0.0.1:0", "-max-batch", "17")
	if _, err := os.Stat(filepath.Join(state, "regroupd", "regroupd.db")); err != nil {
		t.Errorf("default database: %v", err)
	}
	if entries, _ := os.ReadDir(cwd); len(entries) != 0 {
		t.Errorf("regroupd wrote into its working directory: %v", entries)
	}
	var limits map[string]any
	for deadline := time.Now().Add(10 * time.Second); limits == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, l := range d.log() { // logged just after "regroupd listening"
			if l["msg"] == "limits in effect" {
				limits = l
			}
		}
	}
	if limits == nil || limits["max_batch"] != float64(17) || limits["rate"] != float64(1000) || limits["retention_welcomes"] != "720h0m0s" {
		t.Errorf("limits in effect: %v", limits)
	}

	resp, err := http.Get("http://" + d.health + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`regroupd_build_info{goversion="go`, `regroupd_publish_refusals_total{kind="welcomes",reason="key_package"} 0`,
		`regroupd_database_errors_total{op="append"} 0`, `regroupd_database_retries_total{op="watch"} 0`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, key, _ := ed25519.GenerateKey(nil)
	c, err := grpctransport.Dial(d.grpc, &grpctransport.ClientOptions{InstallationKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	topic := transporttest.RandomGroupTopic()
	if _, err := c.Publish(ctx, transporttestBatch(topic)); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Next(ctx); err != nil {
		t.Fatal(err)
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-d.exited; err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	for _, l := range d.log() {
		if l["level"] == "WARN" && l["msg"] != "gRPC listener is plain text: clients' traffic and installation keys' signatures travel unencrypted; set -tls-cert and -tls-key unless the network is private" ||
			l["level"] == "ERROR" {
			t.Errorf("a clean SIGTERM logged %v", l)
		}
	}
}
