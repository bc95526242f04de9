package main

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// parseSample reads the lines regroupd's /metrics writes, labels and
// all, and refuses what is not a sample.
func TestParseSample(t *testing.T) {
	for _, c := range []struct {
		line   string
		name   string
		labels map[string]string
		value  float64
		ok     bool
	}{
		{`regroupd_published_envelopes_total{kind="group_messages"} 17557`, "regroupd_published_envelopes_total", map[string]string{"kind": "group_messages"}, 17557, true},
		{`regroupd_publish_duration_seconds_bucket{le="+Inf"} 3`, "regroupd_publish_duration_seconds_bucket", map[string]string{"le": "+Inf"}, 3, true},
		{`process_cpu_seconds_total 1.25`, "process_cpu_seconds_total", map[string]string{}, 1.25, true},
		{`regroupd_x{a="1",b="2"} 4 1700000000`, "regroupd_x", map[string]string{"a": "1", "b": "2"}, 4, true},
		{`broken}{ 1`, "", nil, 0, false},
		{`no_value`, "", nil, 0, false},
		{`name{a="1"}`, "", nil, 0, false},
		{` 0`, "", nil, 0, false},
		{`{a="1"} 0`, "", nil, 0, false},
	} {
		name, labels, v, ok := parseSample(c.line)
		if ok != c.ok || name != c.name || v != c.value || (ok && fmt.Sprint(labels) != fmt.Sprint(c.labels)) {
			t.Errorf("parseSample(%q) = %q %v %v %v, want %q %v %v %v", c.line, name, labels, v, ok, c.name, c.labels, c.value, c.ok)
		}
	}
	h := map[float64]float64{0.001: 10, 0.01: 90, 0.1: 99, math.Inf(1): 100}
	if q := quantile(h, 0.5); q != 10*time.Millisecond {
		t.Errorf("p50 bound = %s, want 10ms", q)
	}
	if q := quantile(h, 0.995); q != -1 {
		t.Errorf("p99.5 bound = %s, want beyond the last bucket", q)
	}
}

// FuzzParseSample: any line parses or is refused, without a panic, and a
// sample it accepts has a name.
func FuzzParseSample(f *testing.F) {
	f.Add(`regroupd_published_envelopes_total{kind="group_messages"} 17557`)
	f.Add(`process_cpu_seconds_total 1.25`)
	f.Add(`a{b="c}"} 1`)
	f.Fuzz(func(t *testing.T, line string) {
		name, _, _, ok := parseSample(line)
		if ok && name == "" {
			t.Fatalf("accepted %q without a name", line)
		}
	})
}
