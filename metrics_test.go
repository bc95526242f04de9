package regroup_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/commitlog"
)

// RegisterClientMetrics exposes a client's commit-log discard counters
// (one series per reason, from zero) and its worker lag, read from the
// client when gathered; registering twice fails.
func TestRegisterClientMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	svc, closeSvc, err := regroup.OpenEmbeddedService(ctx, filepath.Join(dir, "delivery.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSvc()
	c, cleanup, err := regroup.NewEmbedded(ctx, regroup.EmbeddedConfig{Dir: filepath.Join(dir, "alice"), Service: svc})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	reg := prometheus.NewRegistry()
	if err := regroup.RegisterClientMetrics(reg, c); err != nil {
		t.Fatal(err)
	}
	if err := regroup.RegisterClientMetrics(reg, c); err == nil {
		t.Fatal("registering the client's metrics twice succeeded")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, f := range families {
		got[f.GetName()] = len(f.GetMetric())
		if f.GetName() == "regroup_client_commit_log_discarded_total" {
			for _, m := range f.GetMetric() {
				reason := m.GetLabel()[0].GetValue()
				if want := c.CommitLog().Counters()[commitlogReason(reason)]; m.GetCounter().GetValue() != float64(want) {
					t.Errorf("discarded{reason=%s} = %v, the log counts %d", reason, m.GetCounter().GetValue(), want)
				}
			}
		}
	}
	if got["regroup_client_commit_log_discarded_total"] < 14 {
		t.Errorf("discard counter has %d reasons, want every one of the 14 from the start", got["regroup_client_commit_log_discarded_total"])
	}
	for _, name := range []string{"regroup_client_topic_lag_seconds", "regroup_client_commit_log_due", "regroup_client_commit_log_lag_seconds"} {
		if got[name] != 1 {
			t.Errorf("metric %s: %d series, want 1", name, got[name])
		}
	}
}

func commitlogReason(s string) commitlog.Reason { return commitlog.Reason(s) }
