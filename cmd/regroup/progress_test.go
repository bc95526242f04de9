package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// isTerminal on real descriptors: a pipe, a regular file and the null
// device are not terminals; a pseudo-terminal is.
func TestIsTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) {
		t.Error("a pipe reads as a terminal")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a regular file reads as a terminal")
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if isTerminal(null) {
		t.Error("the null device reads as a terminal")
	}
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to check the positive case: %v", err)
	}
	defer pty.Close()
	if !isTerminal(pty) {
		t.Error("a pseudo-terminal does not read as a terminal")
	}
}

// The bar is drawn only for a person at a terminal: both outputs
// terminals and no --json.
func TestShowProgress(t *testing.T) {
	for _, tc := range []struct {
		stdout, stderr, json, want bool
	}{
		{true, true, false, true},
		{false, true, false, false}, // stdout piped or redirected
		{true, false, false, false}, // stderr redirected
		{true, true, true, false},   // a script asked for JSON
		{false, false, false, false},
	} {
		if got := showProgress(tc.stdout, tc.stderr, tc.json); got != tc.want {
			t.Errorf("stdout terminal %v, stderr terminal %v, json %v: %v, want %v", tc.stdout, tc.stderr, tc.json, got, tc.want)
		}
	}
}

func TestRenderProgress(t *testing.T) {
	for _, tc := range []struct {
		why              string
		at, start, head  uint64
		processed        int
		wantBar, wantPct string
	}{
		{"the start", 1000, 1000, 1400, 0, "[----------]", "  0%"},
		{"halfway", 1200, 1000, 1400, 120, "[#####-----]", " 50%"},
		{"the end", 1400, 1000, 1400, 250, "[##########]", "100%"},
		{"past the newest id the sync began with", 1500, 1000, 1400, 260, "[##########]", "100%"},
	} {
		got := renderProgress("team", tc.processed, tc.at, tc.start, tc.head, 10)
		want := "team " + tc.wantBar + " " + tc.wantPct
		if !strings.HasPrefix(got, want) || !strings.Contains(got, "envelopes processed") {
			t.Errorf("%s: %q, want it to start with %q", tc.why, got, want)
		}
	}
}

// pages is a transport whose group topic holds envelopes with the given
// sequence ids, served 100 at a time.
type pages struct {
	ports.Transport
	ids []uint64
}

func (p pages) Query(_ context.Context, _ []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	var out []*backendpb.OriginatorEnvelope
	for _, id := range p.ids {
		if id > after && len(out) < limit {
			out = append(out, &backendpb.OriginatorEnvelope{SequenceId: id})
		}
	}
	return out, nil
}

// A long sync read through the watched transport draws one line that
// advances page by page: envelopes processed, the sequence id reached and
// the topic's newest id. A short one and another topic draw nothing.
func TestProgressThroughTransport(t *testing.T) {
	var ids []uint64
	for i := uint64(1); i <= 250; i++ {
		ids = append(ids, 1000+2*i) // sequence ids are global: a topic's are sparse
	}
	var out strings.Builder
	p := &progress{w: &out}
	long, short := []byte{0, 1}, []byte{0, 2}
	p.add(long, "team", 1000, 1500)
	p.add(short, "chat", 1000, 1000+longSync-1)
	tr := &watchedTransport{Transport: pages{ids: ids}}
	tr.watch(p)
	ctx := context.Background()
	for _, topic := range [][]byte{short, long} {
		after := uint64(1000)
		for {
			envs, err := tr.Query(ctx, topic, after, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(envs) == 0 {
				break
			}
			after = envs[len(envs)-1].GetSequenceId()
		}
	}
	p.end()
	got := out.String()
	for _, want := range []string{
		"\rteam [------------------------------]   0%  0 envelopes processed, at 1000 of topic newest id 1500",
		"\rteam [############------------------]  40%  100 envelopes processed, at 1200 of topic newest id 1500",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output %q lacks %q", got, want)
		}
	}
	if !strings.Contains(got, "250 envelopes processed, at 1500 of topic newest id 1500") || !strings.HasSuffix(got, "\n") {
		t.Errorf("the line does not end at 100%%, then a newline: %q", got)
	}
	if strings.Contains(got, "chat") {
		t.Errorf("a short sync drew progress: %q", got)
	}
	var none *progress // no terminal: nothing is drawn and nothing fails
	tr.watch(none)
	if _, err := tr.Query(ctx, long, 1000, 100); err != nil {
		t.Fatal(err)
	}
	none.end()
}
