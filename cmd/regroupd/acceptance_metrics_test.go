package main

import (
	"testing"
	"time"
)

// With -two-phase, /metrics reports the acceptance events and reports at
// zero from the start, the pending commits from the database, and what
// the service's observer hears.
func TestMetrics_TwoPhase(t *testing.T) {
	srv, _ := startWith(t, "sqlite", func(c *config) {
		c.HealthListen = "127.0.0.1:0"
		c.AcceptCommits, c.TwoPhase, c.GracePeriod, c.PendingExpiry = true, true, time.Second, time.Hour
	})
	m := scrapeMetrics(t, srv)
	for _, k := range []string{`regroupd_acceptance_events_total{event="pending"}`, `regroupd_acceptance_events_total{event="confirmed"}`,
		`regroupd_acceptance_events_total{event="dropped"}`, `regroupd_acceptance_events_total{event="expired"}`,
		`regroupd_acceptance_events_total{event="superseded"}`, `regroupd_acceptance_events_total{event="quarantined"}`,
		`regroupd_acceptance_reports_total{reason="tag",verdict="refused"}`, `regroupd_acceptance_reports_total{reason="path",verdict="stuck"}`,
		`regroupd_acceptance_pending_commits`, `regroupd_acceptance_confirmation_seconds_count`,
		`regroupd_publish_refusals_total{kind="group_messages",reason="commit_pending"}`} {
		if v, ok := m[k]; !ok || v != 0 {
			t.Fatalf("%s = %v (present %v), want 0", k, v, ok)
		}
	}
	srv.metrics.Acceptance("confirmed")
	srv.metrics.Reported("refused", "tag")
	srv.metrics.Confirmation(3 * time.Second)
	m = scrapeMetrics(t, srv)
	if m[`regroupd_acceptance_events_total{event="confirmed"}`] != 1 || m[`regroupd_acceptance_reports_total{reason="tag",verdict="refused"}`] != 1 ||
		m[`regroupd_acceptance_confirmation_seconds_count`] != 1 {
		t.Fatal("the observer's events are not counted")
	}
}

// COMP-410: -two-phase needs -accept-commits; -grace-period 0 confirms on
// the first OK (the service's GracePeriod is negative, "none").
func TestCOMP410_TwoPhaseFlags(t *testing.T) {
	if _, err := parseConfig([]string{"-two-phase"}); err == nil {
		t.Fatal("-two-phase without -accept-commits was accepted")
	}
	c, err := parseConfig([]string{"-accept-commits", "-two-phase", "-grace-period", "0", "-pending-expiry", "5m"})
	if err != nil {
		t.Fatal(err)
	}
	if o := twoPhase(c); o == nil || o.GracePeriod >= 0 || o.Expiry != 5*time.Minute {
		t.Fatalf("options %+v", o)
	}
	if c, _ := parseConfig(nil); twoPhase(c) != nil {
		t.Fatal("two phases on by default")
	}
}
