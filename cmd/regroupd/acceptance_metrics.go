package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
)

// acceptMetrics are the metrics of commit acceptance in two phases
// (delivery.AcceptanceObserver).
type acceptMetrics struct {
	events       *prometheus.CounterVec
	reports      *prometheus.CounterVec
	confirmation prometheus.Histogram
}

// confirmationBuckets run from 10 ms to about 93 hours: a grace period
// of 0 to the expiry of 72 hours.
var confirmationBuckets = prometheus.ExponentialBuckets(0.01, 2, 26)

func newAcceptMetrics() *acceptMetrics {
	ns := "regroupd"
	return &acceptMetrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "acceptance_events_total",
			Help: "Two-phase commit acceptance: commits that became pending, were confirmed, dropped, expired or superseded; quarantines, lifts and stuck reports."}, []string{"event"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "acceptance_reports_total",
			Help: "Reports kept on commits, by verdict (ok, refused, stuck) and reason class."}, []string{"verdict", "reason"}),
		confirmation: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "acceptance_confirmation_seconds",
			Help: "Time from a commit's acceptance as pending to its confirmation.", Buckets: confirmationBuckets}),
	}
}

// Acceptance implements delivery.AcceptanceObserver.
func (m *metrics) Acceptance(event string) { m.accept.events.WithLabelValues(event).Inc() }

// Reported implements delivery.AcceptanceObserver.
func (m *metrics) Reported(verdict, reason string) {
	m.accept.reports.WithLabelValues(verdict, reason).Inc()
}

// Confirmation implements delivery.AcceptanceObserver.
func (m *metrics) Confirmation(d time.Duration) { m.accept.confirmation.Observe(max(d, 0).Seconds()) }

var _ delivery.AcceptanceObserver = (*metrics)(nil)

// registerAcceptMetrics registers the two-phase metrics at zero, and the
// gauge of commits pending now, read from the database when scraped.
func (s *server) registerAcceptMetrics(reg *prometheus.Registry) {
	a := s.metrics.accept
	reg.MustRegister(a.events, a.reports, a.confirmation)
	for _, e := range delivery.AcceptanceEvents {
		a.events.WithLabelValues(e)
	}
	a.reports.WithLabelValues("ok", "")
	for _, r := range ports.ReportReasons {
		a.reports.WithLabelValues("refused", r)
		a.reports.WithLabelValues("stuck", r)
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "regroupd", Name: "acceptance_pending_commits",
		Help: "Commits pending now (two-phase commit acceptance), read from the database; -1 when it did not answer."}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := s.svc.PendingCount(ctx)
		if err != nil {
			return -1
		}
		return float64(n)
	}))
}
