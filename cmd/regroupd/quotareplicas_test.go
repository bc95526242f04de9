package main

import (
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
)

// COMP-334: the storage quotas are the deployment's. With -quota-replicas
// N each replica enforces 1/N of every quota, so an installation that
// spreads its publishes over the replicas stores at most the quota; the
// limits log names what one replica enforces; N below 1 is refused.
func TestCOMP334_QuotasDividedBetweenReplicas(t *testing.T) {
	cfg, err := parseConfig([]string{"-database", "x.db", "-quota-welcomes-mib", "32", "-quota-group-messages-mib", "0", "-quota-replicas", "4"})
	if err != nil {
		t.Fatal(err)
	}
	q := cfg.Fair.delivery(&delivery.Options{}).Quotas
	if got := q[ports.TopicWelcomes].Bytes; got != 8<<20 {
		t.Errorf("Welcome quota per replica %d bytes, want 32 MiB / 4 = %d", got, 8<<20)
	}
	if _, ok := q[ports.TopicGroupMessages]; ok {
		t.Errorf("a quota of 0 (none) became a quota")
	}
	if got := quotaBytes(cfg)["welcomes"]; got != 8<<20 {
		t.Errorf("the limits log says %d bytes of Welcomes per replica, want %d", got, 8<<20)
	}
	one, err := parseConfig([]string{"-database", "x.db"})
	if err != nil {
		t.Fatal(err)
	}
	if got := one.Fair.delivery(&delivery.Options{}).Quotas[ports.TopicWelcomes].Bytes; got != 32<<20 {
		t.Errorf("one replica (the default) enforces %d bytes of Welcomes, want the whole 32 MiB", got)
	}
	for _, n := range []string{"0", "-1"} {
		if _, err := parseConfig([]string{"-database", "x.db", "-quota-replicas", n}); err == nil || !strings.Contains(err.Error(), "-quota-replicas") {
			t.Errorf("-quota-replicas %s: %v, want refused naming the flag", n, err)
		}
	}
}
