package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"
)

// demoSteps is the number of steps the demo prints, for its progress.
const demoSteps = 12

// demoOutput prints the demo's progress as it happens — a line per step
// with the elapsed time, and the events the members report under it —
// and the final tables; with --json it gathers them into one document
// printed at the end. It is safe for concurrent use: events arrive from
// the members' event streams.
type demoOutput struct {
	mu    sync.Mutex
	w     io.Writer
	quiet bool
	json  bool
	start time.Time
	doc   demoDoc
}

// demoDoc is the --json document.
type demoDoc struct {
	OK      bool         `json:"ok"`
	Backend string       `json:"backend"`
	Fault   string       `json:"fault"`
	Members int          `json:"members"`
	Elapsed float64      `json:"elapsed_seconds"`
	Steps   []demoStep   `json:"steps"`
	Events  []demoEvent  `json:"events"`
	Tables  []demoTable  `json:"tables"`
	Failure *demoFailure `json:"failure,omitempty"`
}

type demoStep struct {
	N       int     `json:"n"`
	Name    string  `json:"name"`
	Elapsed float64 `json:"elapsed_seconds"`
	Detail  string  `json:"detail"`
}

type demoEvent struct {
	Elapsed float64 `json:"elapsed_seconds"`
	Member  string  `json:"member"`
	Text    string  `json:"text"`
}

type demoFailure struct {
	Step    string `json:"step"`
	Message string `json:"message"`
}

// demoTable is the final state of one conversation, a row per member.
type demoTable struct {
	Title string    `json:"title"`
	ID    string    `json:"id"`
	Rows  []demoRow `json:"rows"`
}

type demoRow struct {
	Member        string `json:"member"`
	Active        bool   `json:"active"`
	Epoch         uint64 `json:"epoch"`
	Authenticator string `json:"epoch_authenticator"`
	ForkState     string `json:"fork_state"`
	MessagesRead  int    `json:"messages_read"`
}

// demoStepError is the failure of one step of the demo.
type demoStepError struct {
	Step string
	Err  error
}

func (e *demoStepError) Error() string { return fmt.Sprintf("step %q failed: %v", e.Step, e.Err) }
func (e *demoStepError) Unwrap() error { return e.Err }

func newDemoOutput(cfg demoConfig, w io.Writer) *demoOutput {
	return &demoOutput{w: w, quiet: cfg.quiet, json: cfg.json, start: time.Now(),
		doc: demoDoc{Fault: cfg.fault.String(), Members: cfg.members, Steps: []demoStep{}, Events: []demoEvent{}, Tables: []demoTable{}}}
}

func (o *demoOutput) elapsed() float64 { return time.Since(o.start).Seconds() }

func (o *demoOutput) text() bool { return !o.quiet && !o.json }

// header prints the line that says what runs where.
func (o *demoOutput) header(backend, line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.doc.Backend = backend
	if o.text() {
		fmt.Fprintln(o.w, line)
	}
}

// step prints a step that succeeded.
func (o *demoOutput) step(name, detail string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := demoStep{N: len(o.doc.Steps) + 1, Name: name, Elapsed: o.elapsed(), Detail: detail}
	o.doc.Steps = append(o.doc.Steps, s)
	if o.text() {
		fmt.Fprintf(o.w, "[%2d/%d] %6.2fs  %-17s %s\n", s.N, demoSteps, s.Elapsed, name, detail)
	}
}

// event prints something a member reported or did, under the step that
// caused it.
func (o *demoOutput) event(member, text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.doc.Events = append(o.doc.Events, demoEvent{Elapsed: o.elapsed(), Member: member, Text: text})
	if o.text() {
		fmt.Fprintf(o.w, "        %6.2fs    · %s: %s\n", o.elapsed(), member, text)
	}
}

// failed prints the step that failed.
func (o *demoOutput) failed(name string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.doc.Failure = &demoFailure{Step: name, Message: err.Error()}
	if !o.json {
		// why goes to standard error, once (runDemo)
		fmt.Fprintf(o.w, "[%2d/%d] %6.2fs  %-17s FAILED\n", len(o.doc.Steps)+1, demoSteps, o.elapsed(), name)
	}
}

// table prints a conversation's final state.
func (o *demoOutput) table(t demoTable) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.doc.Tables = append(o.doc.Tables, t)
	if o.json {
		return
	}
	fmt.Fprintf(o.w, "\n%s %s\n", t.Title, t.ID)
	tw := tabwriter.NewWriter(o.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "member\tepoch\tepoch authenticator\tfork state\tmessages read")
	for _, r := range t.Rows {
		epoch := fmt.Sprint(r.Epoch)
		if !r.Active {
			epoch += " (inactive)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%d\n", r.Member, epoch, r.Authenticator, r.ForkState, r.MessagesRead)
	}
	_ = tw.Flush()
}

// finish prints the outcome, or the JSON document.
func (o *demoOutput) finish(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.doc.OK = err == nil
	o.doc.Elapsed = o.elapsed()
	if err != nil && o.doc.Failure == nil {
		o.doc.Failure = &demoFailure{Message: err.Error()}
		var se *demoStepError
		if errors.As(err, &se) {
			o.doc.Failure.Step = se.Step
		}
	}
	switch {
	case o.json:
		enc := json.NewEncoder(o.w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(o.doc)
	case err == nil:
		fmt.Fprintf(o.w, "\nok: the fork was detected and repaired; every member agrees (%.2fs)\n", o.doc.Elapsed)
	}
}

// demoHex returns the first 4 bytes of b in hex, the demo's short id.
func demoHex(b []byte) string {
	if len(b) > 4 {
		b = b[:4]
	}
	return hex.EncodeToString(b)
}
