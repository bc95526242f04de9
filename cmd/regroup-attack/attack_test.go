package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Every attack of the short run, against regroupd built from this tree,
// on SQLite and on PostgreSQL (which needs REGROUP_POSTGRES_DSN: skipped
// without it, failed when CI=true). Each attack starts its own regroupd on
// 127.0.0.1, stops by itself, and fails when the server's RSS, CPU or
// answers leave the bound the attack states (findings 1 to 9 of the
// attack review; COMP-140 to COMP-148).
func TestAttacks(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "regroupd")
	if out, err := exec.Command("go", "build", "-o", bin, "../regroupd").CombinedOutput(); err != nil {
		t.Fatalf("go build regroupd: %v\n%s", err, out)
	}
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			if db == "postgres" && os.Getenv("REGROUP_POSTGRES_DSN") == "" {
				if os.Getenv("CI") == "true" {
					t.Fatal("REGROUP_POSTGRES_DSN is unset and CI=true: the attacks must run on PostgreSQL in CI")
				}
				t.Skip("REGROUP_POSTGRES_DSN unset: set it to attack regroupd on PostgreSQL")
			}
			runAll(context.Background(), bin, t.TempDir(), []string{db}, short, nil, func(db string, o outcome) {
				t.Logf("%d %s: %s (bound: %s)", o.finding, o.name, o.measured, o.bound)
				if o.err != nil {
					t.Errorf("attack %d %s on %s: %v", o.finding, o.name, db, o.err)
				}
			})
		})
	}
}

// The fair-share run's short form: every adversary at once beside honest
// clients, on SQLite and on PostgreSQL. It fails when an honest call
// fails or the server's peak RSS passes idle + read budget + the
// per-connection allowance; the latency figures are logged, not asserted
// (make attack prints the table and applies the 3× goal).
func TestFairShareAllAtOnce(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "regroupd")
	if out, err := exec.Command("go", "build", "-o", bin, "../regroupd").CombinedOutput(); err != nil {
		t.Fatalf("go build regroupd: %v\n%s", err, out)
	}
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			if db == "postgres" && os.Getenv("REGROUP_POSTGRES_DSN") == "" {
				if os.Getenv("CI") == "true" {
					t.Fatal("REGROUP_POSTGRES_DSN is unset and CI=true: the fair-share run must run on PostgreSQL in CI")
				}
				t.Skip("REGROUP_POSTGRES_DSN unset: set it to run the fair-share run on PostgreSQL")
			}
			tg := target{bin: bin, db: db, dsn: os.Getenv("REGROUP_POSTGRES_DSN"), dir: t.TempDir()}
			for _, r := range runFair(context.Background(), tg, fairShort, false, nil, func(fairRow) {}) {
				t.Logf("%s: RSS %.0f → peak %.0f MiB (bound %.0f), honest p50 %s → %s, p99 %s → %s, %d calls; %s",
					r.adversary, r.baseRSS, r.peakRSS, r.boundRSS, r.p50, r.loadedP50, r.p99, r.loadedP99, r.honestOps, r.did)
				switch {
				case r.err != nil:
					t.Errorf("%s: %v", r.adversary, r.err)
				case r.honestFailed > 0:
					t.Errorf("%s: %d honest calls failed", r.adversary, r.honestFailed)
				case r.peakRSS > r.boundRSS:
					t.Errorf("%s: peak RSS %.0f MiB above its bound %.0f", r.adversary, r.peakRSS, r.boundRSS)
				}
			}
		})
	}
}
