package main

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/core/delivery"
)

// latencyBuckets are the bounds, in seconds, of regroupd's latency
// histograms: 100µs to about 6.5s.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 2, 17)

// metrics are the measurements the delivery service and its store report
// as they happen; the gauges and limit counters are read from their
// sources when scraped (see newRegistry).
type metrics struct {
	published *prometheus.CounterVec
	refused   *prometheus.CounterVec
	latency   prometheus.Histogram
	lag       prometheus.Histogram
	idWait    prometheus.Histogram
	dbErrors  *prometheus.CounterVec
	dbRetries *prometheus.CounterVec
	accept    *acceptMetrics
}

func newMetrics() *metrics {
	ns := "regroupd"
	return &metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "published_envelopes_total",
			Help: "Envelopes stored by publishes, by topic kind."}, []string{"kind"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "publish_refusals_total",
			Help: "Publishes that stored nothing, by the kind of the envelope refused and the reason."}, []string{"kind", "reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "publish_duration_seconds",
			Help: "Time a stored publish took in the service: admission and the database transaction.", Buckets: latencyBuckets}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "subscription_lag_seconds",
			Help: "Time from an envelope's publish to its delivery by a subscription of this process.", Buckets: latencyBuckets}),
		idWait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "sequence_id_wait_seconds",
			Help: "Time an append waited for its sequence ids: in the writer's queue and, on PostgreSQL, for its topics' row locks.", Buckets: latencyBuckets}),
		dbErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "database_errors_total",
			Help: "Database calls that failed, by operation."}, []string{"op"}),
		dbRetries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "database_retries_total",
			Help: "Database operations tried again, by operation."}, []string{"op"}),
		accept: newAcceptMetrics(),
	}
}

// Published implements delivery.Observer.
func (m *metrics) Published(kinds []string, took time.Duration) {
	for _, k := range kinds {
		m.published.WithLabelValues(k).Inc()
	}
	m.latency.Observe(took.Seconds())
}

// Refused implements delivery.Observer.
func (m *metrics) Refused(kind, reason string) { m.refused.WithLabelValues(kind, reason).Inc() }

// Delivered implements delivery.Observer.
func (m *metrics) Delivered(lag time.Duration) { m.lag.Observe(max(lag, 0).Seconds()) }

var _ delivery.Observer = (*metrics)(nil)

// hooks returns the store's hooks, feeding the database metrics.
func (m *metrics) hooks() deliverydb.Hooks {
	return deliverydb.Hooks{
		IDWait:  func(d time.Duration) { m.idWait.Observe(d.Seconds()) },
		DBError: func(op string) { m.dbErrors.WithLabelValues(op).Inc() },
		Retry:   func(op string) { m.dbRetries.WithLabelValues(op).Inc() },
	}
}

// metricsHandler serves regroupd's metrics registry: the Go runtime and
// process collectors, the delivery service's publishes, refusals,
// latencies and database errors, and its limits (docs/operations.md
// names each metric). To add a metric, register it in newRegistry.
func (s *server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.newRegistry(), promhttp.HandlerOpts{})
}

func (s *server) newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := s.metrics
	reg.MustRegister(m.published, m.refused, m.latency, m.lag, m.idWait, m.dbErrors, m.dbRetries, buildInfoGauge())
	m.zeroSeries() // present at zero from the start
	stats := func() grpctransport.ServerStats { return s.rpc.Stats() }
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "regroupd", Name: name, Help: help}, f))
	}
	counter := func(name, help string, labels prometheus.Labels, f func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "regroupd", Name: name, Help: help, ConstLabels: labels}, f))
	}
	gauge("connections_open", "Open client connections.", func() float64 { return float64(stats().Connections) })
	gauge("subscriptions_open", "Open subscription streams.", func() float64 { return float64(stats().Subscriptions) })
	gauge("read_budget_bytes_in_use", "Bytes of stored envelopes reads hold in memory now.", func() float64 { return float64(s.svc.ReadBudgetInUse()) })
	for _, limit := range grpctransport.LimitNames() {
		counter("refused_total", "Calls, connections and subscriptions refused, by the limit that refused them.",
			prometheus.Labels{"limit": limit}, func() float64 { return float64(stats().Refused[limit]) })
	}
	counter("slow_readers_shed_total", "Subscription connections closed because their reader took no envelope for the slow-reader timeout.", nil,
		func() float64 { return float64(stats().SlowReadersShed) })
	counter("request_decode_failures_total", "Requests that did not decode (answered InvalidArgument).", nil,
		func() float64 { return float64(stats().DecodeFailures) })
	counter("hidden_errors_total", "Failures answered with a bare unavailable, their details logged.", nil,
		func() float64 { return float64(stats().HiddenErrors) })
	s.registerFairMetrics(reg)   // limits.go
	s.registerAcceptMetrics(reg) // acceptance_metrics.go
	return reg
}
