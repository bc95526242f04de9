package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// scrape is what the regroupd processes of a run said on /metrics,
// summed over the processes.
type scrape struct {
	published float64 // regroupd_published_envelopes_total{kind="group_messages"}
	refused   float64 // regroupd_publish_refusals_total
	dbErrors  float64 // regroupd_database_errors_total
	retries   float64 // regroupd_database_retries_total
	cpu       float64 // process_cpu_seconds_total of the regroupd processes
	// Histograms, by upper bound (seconds) → cumulative count.
	latency, idWait, lag map[float64]float64
}

// scrapeAll reads /metrics of every process and sums them.
func scrapeAll(ctx context.Context, daemons []*daemon) (*scrape, error) {
	sc := &scrape{latency: map[float64]float64{}, idWait: map[float64]float64{}, lag: map[float64]float64{}}
	for _, d := range daemons {
		if err := sc.add(ctx, d.healthAddr); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

func (sc *scrape) add(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, labels, value, ok := parseSample(line)
		if !ok {
			continue
		}
		switch name {
		case "regroupd_published_envelopes_total":
			if labels["kind"] == "group_messages" {
				sc.published += value
			}
		case "regroupd_publish_refusals_total":
			sc.refused += value
		case "regroupd_database_errors_total":
			sc.dbErrors += value
		case "regroupd_database_retries_total":
			sc.retries += value
		case "process_cpu_seconds_total":
			sc.cpu += value
		case "regroupd_publish_duration_seconds_bucket":
			addBucket(sc.latency, labels["le"], value)
		case "regroupd_sequence_id_wait_seconds_bucket":
			addBucket(sc.idWait, labels["le"], value)
		case "regroupd_subscription_lag_seconds_bucket":
			addBucket(sc.lag, labels["le"], value)
		}
	}
	return lines.Err()
}

// parseSample splits one line of the Prometheus text format:
// name{label="value",…} value.
func parseSample(line string) (string, map[string]string, float64, bool) {
	labels := map[string]string{}
	name, rest := line, ""
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", nil, 0, false
		}
		name, rest = line[:i], strings.TrimSpace(line[j+1:])
		for _, kv := range strings.Split(line[i+1:j], ",") {
			k, v, ok := strings.Cut(kv, "=")
			if ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
	} else {
		var ok bool
		name, rest, ok = strings.Cut(line, " ")
		if !ok {
			return "", nil, 0, false
		}
	}
	f := strings.Fields(rest)
	if len(f) == 0 || strings.TrimSpace(name) == "" {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return name, labels, v, err == nil
}

func addBucket(h map[float64]float64, le string, v float64) {
	bound, err := strconv.ParseFloat(le, 64)
	if err != nil {
		return
	}
	h[bound] += v
}

// quantile estimates the q-quantile of a cumulative histogram as the
// upper bound of the bucket it falls in (what a reader of the buckets
// can say, no interpolation).
func quantile(h map[float64]float64, q float64) time.Duration {
	bounds := make([]float64, 0, len(h))
	for b := range h {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return 0
	}
	total := h[bounds[len(bounds)-1]]
	for _, b := range bounds {
		if h[b] >= q*total {
			if math.IsInf(b, 1) {
				return -1
			}
			return time.Duration(b * float64(time.Second))
		}
	}
	return -1
}

// count is a histogram's number of observations.
func count(h map[float64]float64) float64 { return h[math.Inf(1)] }

func fmtBound(d time.Duration) string {
	if d < 0 {
		return "beyond the last bucket"
	}
	return "≤" + d.String()
}

// summary prints the scrape beside the run's own figures; loadCPU is the
// load generator's CPU time during the run.
func (sc *scrape) summary(acked int, loadCPU time.Duration) string {
	return fmt.Sprintf("cpu per acked envelope: regroupd %.0fµs, load generator %.0fµs; metrics: %.0f published (%d acked), %.0f refused, %.0f database errors, %.0f retries; publish p50 %s p99 %s (%.0f observed); id wait p50 %s p99 %s; delivery lag p50 %s p99 %s (%.0f deliveries)",
		sc.cpu*1e6/float64(acked), float64(loadCPU.Microseconds())/float64(acked),
		sc.published, acked, sc.refused, sc.dbErrors, sc.retries,
		fmtBound(quantile(sc.latency, 0.5)), fmtBound(quantile(sc.latency, 0.99)), count(sc.latency),
		fmtBound(quantile(sc.idWait, 0.5)), fmtBound(quantile(sc.idWait, 0.99)),
		fmtBound(quantile(sc.lag, 0.5)), fmtBound(quantile(sc.lag, 0.99)), count(sc.lag))
}

// cpuTime is the CPU time this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
