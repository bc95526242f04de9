package main

import (
	"bufio"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// scrapeMetrics returns every sample of /metrics on the server's health
// listener, keyed by the line's name and labels.
func scrapeMetrics(t *testing.T, srv *server) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + srv.healthLn.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// /metrics counts what the service did, checked against what the test
// did: stored envelopes by topic kind, refusals by kind and reason, one
// publish-latency and one sequence-id-wait observation per stored publish,
// one delivery-lag observation per envelope a subscription handed out.
func TestMetrics_CountWhatTheServiceDid(t *testing.T) {
	for _, db := range databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			srv, cfg := startWith(t, db, func(c *config) {
				c.HealthListen = "127.0.0.1:0"
				c.RatePerSecond, c.IdentityRate, c.GlobalRate = -1, -1, -1
			})
			ctx := testCtx(t)
			c := dialKey(t, cfg.Listen, newKey())
			topic := transporttest.RandomGroupTopic()
			sub, err := c.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			for i := range 3 {
				if _, err := c.Publish(ctx, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, []byte{byte(i)})}); err != nil {
					t.Fatal(err)
				}
			}
			_, err = c.Publish(ctx, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, make([]byte, cfg.MaxEnvelopeBytes+1))})
			if !errors.Is(err, ports.ErrInvalidArgument) {
				t.Fatalf("oversized publish = %v, want ErrInvalidArgument", err)
			}
			for range 3 {
				if _, err := sub.Next(ctx); err != nil {
					t.Fatal(err)
				}
			}
			var m map[string]float64
			deadline := time.Now().Add(30 * time.Second)
			for {
				m = scrapeMetrics(t, srv)
				if m["regroupd_subscription_lag_seconds_count"] >= 3 || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			want := map[string]float64{
				`regroupd_published_envelopes_total{kind="group_messages"}`:                     3,
				`regroupd_published_envelopes_total{kind="commit_log"}`:                         0,
				`regroupd_publish_refusals_total{kind="group_messages",reason="envelope_size"}`: 1,
				`regroupd_publish_duration_seconds_count`:                                       3,
				`regroupd_sequence_id_wait_seconds_count`:                                       3,
				`regroupd_subscription_lag_seconds_count`:                                       3,
				`regroupd_subscriptions_open`:                                                   1,
			}
			for k, v := range want {
				if m[k] != v {
					t.Errorf("%s = %v, want %v", k, m[k], v)
				}
			}
			// COMP-371: commit acceptance's refusal reasons are present
			// from the start, at zero.
			for _, k := range []string{`regroupd_publish_refusals_total{kind="group_messages",reason="public_signature"}`,
				`regroupd_publish_refusals_total{kind="group_messages",reason="public_policy"}`,
				`regroupd_publish_refusals_total{kind="group_info",reason="public_tree-hash"}`} {
				if v, ok := m[k]; !ok || v != 0 {
					t.Errorf("%s = %v (present %v), want 0 from the start", k, v, ok)
				}
			}
			// The first call of the connection was refused unauthenticated
			// once, then repeated after the client proved its key.
			if got := m[`regroupd_publish_refusals_total{kind="group_messages",reason="unauthenticated"}`]; got > 1 {
				t.Errorf("unauthenticated refusals = %v, want at most the connection's first call", got)
			}
		})
	}
}
