package main

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/internal/testenv"
)

// homeHolds reports whether any file of home holds secret, as raw bytes or
// as hex: what a device taken by an attacker still holds.
func homeHolds(t *testing.T, home string, secret []byte) bool {
	t.Helper()
	found := false
	err := filepath.Walk(home, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = found || bytes.Contains(b, secret) || bytes.Contains(bytes.ToLower(b), []byte(hex.EncodeToString(secret)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// COMP-261, COMP-263, COMP-264: identity custody through the binary and a
// regroupd process. init writes the recovery key to a file and stores it
// in no home; a phone joins by a request alice's first installation
// approves, and approves a tablet; alice revokes the phone with the
// recovery key from the file, and revoke names the tablet as approved by
// the phone; the tablet is revoked with the key typed in. The revoked
// phone's home holds no recovery key, cannot export one, cannot revoke
// alice's installation, and cannot approve a new installation.
func TestCOMP261_CLIRevokedDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs regroupd")
	}
	bin := buildCLI(t)
	d := testenv.StartRegroupd(t, "sqlite")
	dir := t.TempDir()
	alice := user{t, bin, filepath.Join(dir, "alice")}
	phone := user{t, bin, filepath.Join(dir, "phone")}
	tablet := user{t, bin, filepath.Join(dir, "tablet")}
	keyFile := filepath.Join(dir, "recovery.key")

	var a initJSON
	alice.json(&a, "init", "--server", d.Addr, "--recovery-key-out", keyFile)
	if a.RecoveryKeyFile != keyFile || a.RecoveryKey != "" {
		t.Fatalf("init --recovery-key-out: %+v", a)
	}
	if info, err := os.Stat(keyFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("recovery key file: %v, %v", info, err)
	}
	raw, _ := os.ReadFile(keyFile)
	recovery, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(recovery) != 32 {
		t.Fatalf("recovery key file holds %q", raw)
	}
	if homeHolds(t, alice.home, recovery) {
		t.Fatal("COMP-261: alice's home stores the recovery key")
	}
	if _, errOut, code := alice.run("init", "--recovery-key-out", keyFile); code == exitOK || !strings.Contains(errOut, "already") {
		t.Fatalf("a second init: exit %d, %s", code, errOut)
	}

	var p, tb initJSON
	phone.json(&p, "init", "--server", d.Addr, "--join", a.InboxID)
	if p.InboxID != a.InboxID || p.Request == "" || p.RecoveryKey != "" {
		t.Fatalf("init --join: %+v", p)
	}
	alice.contains(alice.ok("approve", p.Request), "added to inbox")

	// An init that fails after storing its identity leaves no identity
	// behind whose recovery key was never shown: the retry makes a new one.
	carol := user{t, bin, filepath.Join(dir, "carol")}
	if _, _, code := carol.run("init", "--server", "127.0.0.1:1", "--timeout", "3s"); code == exitOK {
		t.Fatal("init against no regroupd succeeded")
	}
	var c initJSON
	carol.json(&c, "init", "--server", d.Addr)
	if len(c.RecoveryKey) != 64 {
		t.Fatalf("COMP-261: init after a failed one printed recovery key %q", c.RecoveryKey)
	}
	tablet.json(&tb, "init", "--server", d.Addr, "--join", a.InboxID)
	phone.contains(phone.ok("approve", tb.Request), "added to inbox")
	var list []installationJSON
	alice.json(&list, "installations")
	if len(list) != 3 || list[1].Key != p.InstallationKey || list[1].AddedBy != a.InstallationKey ||
		list[2].Key != tb.InstallationKey || list[2].AddedBy != p.InstallationKey || !list[0].This {
		t.Fatalf("installations: %+v", list)
	}

	// alice revokes the phone with the key file; revoke names the tablet.
	var rv revokeJSON
	alice.json(&rv, "revoke", p.InstallationKey[:16], "--recovery-key-file", keyFile)
	if rv.InstallationKey != p.InstallationKey || len(rv.AddedByRevoked) != 1 || rv.AddedByRevoked[0] != tb.InstallationKey {
		t.Fatalf("COMP-263: revoke: %+v", rv)
	}
	// ... and the tablet with the key typed in.
	cmd := exec.Command(bin, "--home", alice.home, "revoke", tb.InstallationKey)
	cmd.Stdin = strings.NewReader(hex.EncodeToString(recovery) + "\n")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "recovery key") || !strings.Contains(string(out), "revoked") {
		t.Fatalf("revoke with the key typed in: %v\n%s", err, out)
	}

	// The revoked phone, with everything in its home.
	if homeHolds(t, phone.home, recovery) {
		t.Fatal("COMP-261: the revoked phone's home holds the recovery key")
	}
	if _, _, code := phone.run("export-recovery-key", "--out", filepath.Join(dir, "stolen.key")); code != exitNotFound {
		t.Fatalf("export-recovery-key on the phone: exit %d", code)
	}
	forged := filepath.Join(dir, "forged.key")
	os.WriteFile(forged, []byte(strings.Repeat("ab", 32)), 0o600)
	if _, errOut, code := phone.run("revoke", a.InstallationKey, "--recovery-key-file", forged); code != exitUsage || !strings.Contains(errOut, "not this inbox's") {
		t.Fatalf("the phone revoking alice with a made-up key: exit %d, %s", code, errOut)
	}
	rogue := user{t, bin, filepath.Join(dir, "rogue")}
	var r initJSON
	rogue.json(&r, "init", "--server", d.Addr, "--join", a.InboxID)
	if _, errOut, code := phone.run("approve", r.Request); code == exitOK || !strings.Contains(errOut, "not one of inbox") {
		t.Fatalf("the revoked phone approving: exit %d, %s", code, errOut)
	}
	alice.json(&list, "installations")
	if len(list) != 1 || list[0].Key != a.InstallationKey {
		t.Fatalf("installations after the revocations: %+v", list)
	}
}
