package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/internal/testenv"
)

// systemdUnit returns the unit docs/operations.md shows, as written, and
// its [Service] settings.
func systemdUnit(t *testing.T) (string, map[string]string) {
	t.Helper()
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- systemd-unit -->\n```ini\n")
	if !ok {
		t.Fatal("docs/operations.md shows no systemd unit (marker <!-- systemd-unit --> and an ini block)")
	}
	unit, _, _ := strings.Cut(rest, "```")
	service := map[string]string{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]" && strings.Contains(line, "="):
			k, v, _ := strings.Cut(line, "=")
			service[k] = v
		}
	}
	return unit, service
}

// The documented systemd unit runs regroupd under its own user with its
// database in the state directory and the usual hardening; its ExecStart
// parses as regroupd flags and passes the start checks; systemd stops it
// after the graceful shutdown, not before; and systemd-analyze accepts
// it where the machine has it.
func TestSystemdUnit(t *testing.T) {
	unit, svc := systemdUnit(t)
	for k, want := range map[string]string{"User": "regroupd", "StateDirectory": "regroupd", "StateDirectoryMode": "0700",
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes", "UMask": "0077",
		"KillSignal": "SIGTERM", "Restart": "on-failure"} {
		if svc[k] != want {
			t.Errorf("[Service] %s=%q, want %q", k, svc[k], want)
		}
	}
	exec0 := strings.Fields(svc["ExecStart"])
	if len(exec0) < 2 || filepath.Base(exec0[0]) != "regroupd" {
		t.Fatalf("ExecStart=%q", svc["ExecStart"])
	}
	args := exec0[1:]
	cfg, err := parseConfig(args)
	if err != nil {
		t.Fatalf("ExecStart flags: %v", err)
	}
	if cfg.postgres() || filepath.Dir(cfg.Database) != "/var/lib/regroupd" {
		t.Errorf("ExecStart's database %s is not in StateDirectory=regroupd", cfg.Database)
	}
	stop, err := time.ParseDuration(svc["TimeoutStopSec"])
	if err != nil || stop <= cfg.ShutdownTimeout {
		t.Errorf("TimeoutStopSec=%s must exceed -shutdown-timeout %v", svc["TimeoutStopSec"], cfg.ShutdownTimeout)
	}
	state := t.TempDir() // stands for /var/lib/regroupd
	cfg.Database = filepath.Join(state, "regroupd.db")
	if err := checkConfig(cfg); err != nil {
		t.Errorf("ExecStart fails regroupd's start checks: %v", err)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not found: the unit's syntax is not verified on this machine")
		return
	}
	bin := testenv.RegroupdBinary(t)
	file := filepath.Join(t.TempDir(), "regroupd.service")
	if err := os.WriteFile(file, []byte(strings.Replace(unit, exec0[0], bin, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", file).CombinedOutput()
	if err != nil || strings.Contains(string(out), "regroupd.service:") {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
