package main

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/internal/buildinfo"
)

// printVersion prints `regroupd -version`.
func printVersion() {
	fmt.Printf("regroupd %s\n", buildinfo.Read())
}

// buildInfoGauge is regroupd_build_info: 1, labelled with the version,
// revision and Go version, so that dashboards see what each replica runs.
func buildInfoGauge() prometheus.Collector {
	in := buildinfo.Read()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "regroupd", Name: "build_info",
		Help:        "Always 1; its labels say what this process was built from.",
		ConstLabels: prometheus.Labels{"version": in.Version, "revision": in.Revision, "goversion": in.GoVersion}})
	g.Set(1)
	return g
}

// zeroSeries creates every labelled counter series at zero, so that an
// alert on a rate sees 0 before the first event instead of no data.
func (m *metrics) zeroSeries() {
	for _, kind := range []string{"group_messages", "welcomes", "identity_updates", "key_packages", "commit_log", "group_info"} {
		m.published.WithLabelValues(kind)
		for _, reason := range refusalReasons {
			m.refused.WithLabelValues(kind, reason)
		}
	}
	for _, op := range []string{"append", "range", "newest", "highest", "delete_expired", "watch"} {
		m.dbErrors.WithLabelValues(op)
	}
	for _, op := range []string{"append", "watch"} {
		m.dbRetries.WithLabelValues(op)
	}
}

// refusalReasons are core/delivery's refusal reasons.
var refusalReasons = []string{delivery.RefusedUnauthenticated, delivery.RefusedBatch, delivery.RefusedEnvelopeSize, delivery.RefusedTopic,
	delivery.RefusedPayload, delivery.RefusedWelcome, delivery.RefusedIdentityUpdate, delivery.RefusedKeyPackage,
	delivery.RefusedSignature, delivery.RefusedPublisher, delivery.RefusedUnavailable}

func init() {
	refusalReasons = append(refusalReasons, delivery.PublicRefusalReasons...)
	refusalReasons = append(refusalReasons, delivery.RefusedCommitPending, delivery.RefusedQuarantined, delivery.RefusedBlocked, delivery.RefusedRevoked)
}
