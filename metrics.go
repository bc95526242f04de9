package regroup

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/commitlog"
)

// commitLogReasons are the discard reasons a client's metrics show from
// the start, at zero until an envelope is discarded for them.
var commitLogReasons = []commitlog.Reason{
	commitlog.ReasonMalformed, commitlog.ReasonCommitLogID, commitlog.ReasonPublishSignature,
	commitlog.ReasonDecrypt, commitlog.ReasonPlaintext, commitlog.ReasonGroupID, commitlog.ReasonSequence,
	commitlog.ReasonOutOfRange, commitlog.ReasonAuthorSignature, commitlog.ReasonReplay, commitlog.ReasonAhead,
	commitlog.ReasonBelowFloor, commitlog.ReasonNotPublisher, commitlog.ReasonChain,
}

// RegisterClientMetrics registers c's metrics with reg, read from c each
// time reg is gathered:
//
//   - regroup_client_commit_log_discarded_total{reason}: commit-log
//     envelopes discarded, by reason ([commitlog.Log.Counters]);
//   - regroup_client_topic_lag_seconds: how far behind the delivery
//     service the topic worker was after its last processing;
//   - regroup_client_commit_log_due: conversations whose commit-log pass is
//     due and has not run;
//   - regroup_client_commit_log_lag_seconds: how long the oldest of them
//     has waited ([client.Client.WorkerLag]).
//
// It fails when reg already holds metrics of these names. The core client
// knows nothing of Prometheus: this is the only place they meet.
func RegisterClientMetrics(reg prometheus.Registerer, c *client.Client) error {
	return reg.Register(&clientCollector{c: c})
}

var (
	discardedDesc = prometheus.NewDesc("regroup_client_commit_log_discarded_total",
		"Commit-log envelopes the client discarded, by reason.", []string{"reason"}, nil)
	topicLagDesc = prometheus.NewDesc("regroup_client_topic_lag_seconds",
		"Time from the publish of the newest envelope the topic worker had received to the end of its processing.", nil, nil)
	logDueDesc = prometheus.NewDesc("regroup_client_commit_log_due",
		"Conversations whose commit-log pass is due and has not run.", nil, nil)
	logLagDesc = prometheus.NewDesc("regroup_client_commit_log_lag_seconds",
		"How long the oldest conversation due for a commit-log pass has waited.", nil, nil)
)

// clientCollector reads a client's counters and lag when gathered.
type clientCollector struct{ c *client.Client }

func (cc *clientCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- discardedDesc
	ch <- topicLagDesc
	ch <- logDueDesc
	ch <- logLagDesc
}

func (cc *clientCollector) Collect(ch chan<- prometheus.Metric) {
	counts := cc.c.CommitLog().Counters()
	seen := map[commitlog.Reason]bool{}
	for _, r := range commitLogReasons {
		seen[r] = true
		ch <- prometheus.MustNewConstMetric(discardedDesc, prometheus.CounterValue, float64(counts[r]), string(r))
	}
	for r, n := range counts {
		if !seen[r] {
			ch <- prometheus.MustNewConstMetric(discardedDesc, prometheus.CounterValue, float64(n), string(r))
		}
	}
	lag := cc.c.WorkerLag()
	ch <- prometheus.MustNewConstMetric(topicLagDesc, prometheus.GaugeValue, lag.Topic.Seconds())
	ch <- prometheus.MustNewConstMetric(logDueDesc, prometheus.GaugeValue, float64(lag.CommitLogDue))
	ch <- prometheus.MustNewConstMetric(logLagDesc, prometheus.GaugeValue, lag.CommitLog.Seconds())
}
