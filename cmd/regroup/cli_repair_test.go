package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/ports"
)

// COMP-340: a CLI member whose epoch secrets diverge (the fault injector's
// diverge-after-merge) is repaired by the CLI's default policy, with no
// demo: it reads forked, fork-status says what will repair it and when,
// the creator's next sync publishes the readd, its next sync rejoins,
// and a later commit reads not forked.
func TestCOMP340_CLIRepairsDivergedMember(t *testing.T) {
	if testing.Short() {
		t.Skip("runs regroupd and the regroup binary")
	}
	bin := cliBinary(t)
	d := testenv.StartRegroupd(t, "sqlite")
	dir := t.TempDir()
	alice := user{t, bin, filepath.Join(dir, "alice")}
	bob := user{t, bin, filepath.Join(dir, "bob")}
	alice.ok("init", "--server", d.Addr)
	var bobID whoamiJSON
	bob.json(&bobID, "init", "--server", d.Addr)
	b, err := os.ReadFile(filepath.Join(bob.home, configFile))
	if err != nil || !strings.Contains(string(b), `"repair_diverged": true`) {
		t.Fatalf("init saved %s (%v), want the recovery policy", b, err)
	}
	var team convJSON
	alice.json(&team, "group", "create", "team", bobID.InboxID)
	bob.ok("send", "team", "hello")
	alice.ok("group", "rename", "team", "crew")
	bob.ok("sync")

	alice.ok("group", "rename", "crew", "team")
	bob.contains(bob.ok("sync", "--inject-fault", "diverge-after-merge", "crew"), "diverge-after-merge fired", "→ forked")
	var forks []forkJSON
	bob.json(&forks, "fork-status", "team")
	if len(forks) != 1 || forks[0].State != "forked" || !forks[0].ReaddRequested ||
		!strings.Contains(forks[0].Repair, "next `regroup sync` rejoins") || !strings.Contains(forks[0].Repair, "--repair-diverged is on") {
		t.Fatalf("bob's fork status after the fault: %+v", forks)
	}
	// The same state under a policy that would not repair it says so.
	bob.contains(bob.ok("fork-status", "team", "--repair-diverged=false"), "stays forked")
	bob.contains(bob.ok("fork-status", "team", "--recover", "none"), "recovery is off")

	alice.contains(alice.ok("sync"), "readd published")
	bob.contains(bob.ok("sync"), "rejoined")
	alice.ok("group", "rename", "team", "crew")
	bob.contains(bob.ok("sync"), "→ not forked")
	forks = nil
	bob.json(&forks, "fork-status", "crew")
	if forks[0].State != "not forked" || forks[0].Repair != "" {
		t.Fatalf("bob after the repair: %+v", forks)
	}
}

// A home saved before the recovery settings existed loads with the
// defaults; flags override the saved policy for one command; a bad
// --recover is a usage error.
func TestRecoverySettings(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, configFile), []byte(`{"server": "127.0.0.1:5050"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := loadSettings(home)
	if err != nil || set.Recovery != nil {
		t.Fatalf("old settings: %+v, %v", set, err)
	}
	r, err := defaultRecovery.apply(opts{})
	if err != nil || r != defaultRecovery {
		t.Fatalf("no flags: %+v %v", r, err)
	}
	p := r.policy()
	if p.Mode != 2 || p.DisableResponses || !p.RepairDiverged { // recovery.All
		t.Fatalf("default policy %+v", p)
	}
	r, err = defaultRecovery.apply(opts{recover: "none", respond: optBool{set: true}, repairDiverged: optBool{set: true}})
	if err != nil || r.Recover != "none" || r.Respond || r.RepairDiverged || !r.policy().DisableResponses {
		t.Fatalf("flags: %+v %v", r, err)
	}
	if _, err := defaultRecovery.apply(opts{recover: "some"}); exitCode(err) != exitUsage {
		t.Fatalf("--recover some: %v", err)
	}
	if got := defaultRecovery.repairOutlook(ports.ForkNotForked, ports.ReaddStatus{}, true); got != "" {
		t.Fatalf("outlook when not forked: %q", got)
	}
}
