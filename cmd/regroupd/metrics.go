package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/regroup-mls/regroup/adapters/grpctransport"
)

// metricsHandler serves regroupd's metrics registry: the Go runtime and
// process collectors, and the delivery service's limits
// (docs/operations.md names each metric next to its limit). A metric is
// read from its source when scraped; to add one, register it in
// newRegistry.
func (s *server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.newRegistry(), promhttp.HandlerOpts{})
}

func (s *server) newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
	return reg
}
