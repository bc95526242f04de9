package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// longSync is the number of sequence ids between a conversation's cursor
// and its topic's newest id from which a sync draws a progress bar
// (COMP-229): below it a sync ends before a bar would tell anything.
const longSync = 200

// isTerminal reports whether f is a terminal: a character device other
// than the null device. It is a stat of the descriptor, so it needs no
// dependency (COMP-229).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	null, err := os.Stat(os.DevNull)
	if err != nil {
		null = nil
	}
	return terminalMode(fi, null)
}

// terminalMode is the decision of isTerminal on the stat results: a
// character device that is not the null device.
func terminalMode(fi, null os.FileInfo) bool {
	if fi == nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	return null == nil || !os.SameFile(fi, null)
}

// showProgress decides whether a sync draws its progress: only when both
// stdout and stderr are terminals and the output is for a person.
func showProgress(stdoutTerm, stderrTerm, jsonOut bool) bool {
	return stdoutTerm && stderrTerm && !jsonOut
}

// progress draws the sync progress of long conversations on a terminal,
// one line each: envelopes processed, and a bar from the cursor the sync
// began at to the topic's newest id. A nil *progress draws nothing.
type progress struct {
	w     io.Writer
	mu    sync.Mutex
	spans map[string]*span
	// current is the topic whose line is being drawn.
	current string
}

// span is one conversation's work in a sync.
type span struct {
	label string
	start uint64 // cursor when the sync began
	head  uint64 // the topic's newest id when the sync began
	count int    // envelopes processed
}

// add registers a conversation whose topic runs from the cursor start to
// the newest id head; a span shorter than longSync draws nothing.
func (p *progress) add(topic []byte, label string, start, head uint64) {
	if p == nil || head <= start || head-start < longSync {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.spans == nil {
		p.spans = map[string]*span{}
	}
	p.spans[string(topic)] = &span{label: label, start: start, head: head}
}

// observe notes a read of topic after sequence id after, which means that
// every envelope up to after was processed, and the size of the page the
// read returned.
func (p *progress) observe(topic []byte, after uint64, page int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sp := p.spans[string(topic)]
	if sp == nil {
		return
	}
	if p.current != "" && p.current != string(topic) {
		fmt.Fprintln(p.w)
	}
	p.current = string(topic)
	fmt.Fprint(p.w, "\r"+renderProgress(sp.label, sp.count, after, sp.start, sp.head, 30))
	sp.count += page
}

// end finishes the last line drawn.
func (p *progress) end() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.current != "" {
		fmt.Fprintln(p.w)
	}
	p.current = ""
}

// renderProgress renders one progress line: the conversation, a bar of
// width cells for the position at between start and head, the envelopes
// processed and the sequence ids.
func renderProgress(label string, processed int, at, start, head uint64, width int) string {
	frac := 1.0
	if head > start {
		frac = float64(min(max(at, start), head)-start) / float64(head-start)
	}
	full := int(frac * float64(width))
	bar := strings.Repeat("#", full) + strings.Repeat("-", width-full)
	return fmt.Sprintf("%s [%s] %3.0f%%  %d envelopes processed, at %d of topic newest id %d",
		label, bar, frac*100, processed, at, head)
}

// watchedTransport is the session's transport: it reports each read of a
// group's topic to the progress in place, if any.
type watchedTransport struct {
	ports.Transport
	mu       sync.Mutex
	progress *progress
}

func (t *watchedTransport) watch(p *progress) {
	t.mu.Lock()
	t.progress = p
	t.mu.Unlock()
}

// Query implements [ports.Transport.Query].
func (t *watchedTransport) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	envs, err := t.Transport.Query(ctx, topic, after, limit)
	t.mu.Lock()
	p := t.progress
	t.mu.Unlock()
	p.observe(topic, after, len(envs))
	return envs, err
}
