package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// faults are the faults `sync --inject-fault` arms, by name.
var faults = map[string]mlsfault.Fault{
	"misrecord-authenticator": mlsfault.MisrecordAuthenticator,
	"diverge-after-merge":     mlsfault.DivergeAfterMerge,
	"refuse-winner":           mlsfault.RefuseWinner,
}

// parseFault returns the fault named name.
func parseFault(name string) (mlsfault.Fault, error) {
	f, ok := faults[name]
	if !ok {
		var names []string
		for n := range faults {
			names = append(names, n)
		}
		sort.Strings(names)
		return 0, usagef("unknown fault %q; one of %s", name, strings.Join(names, ", "))
	}
	return f, nil
}

// syncJSON is the --json output of sync.
type syncJSON struct {
	Conversations []syncedJSON `json:"conversations"`
	Events        []eventJSON  `json:"events"`
	Fault         *faultJSON   `json:"fault,omitempty"`
}

// syncedJSON is a conversation after a sync, with what the sync changed.
type syncedJSON struct {
	convJSON
	Joined      bool   `json:"joined"`
	EpochBefore uint64 `json:"epoch_before"`
	StateBefore string `json:"fork_state_before"`
	NewMessages int    `json:"new_messages"`
}

// eventJSON is one thing the sync did, as the client reported it.
type eventJSON struct {
	Kind         string `json:"kind"`
	Conversation string `json:"conversation,omitempty"`
	Detail       string `json:"detail"`
}

// faultJSON reports the fault a sync armed.
type faultJSON struct {
	Name         string `json:"name"`
	Conversation string `json:"conversation"`
	Fired        bool   `json:"fired"`
}

func cmdSync(ctx context.Context, e *env) error {
	s := e.s
	var only *conv
	var fj *faultJSON
	if e.o.fault != "" {
		f, err := parseFault(e.o.fault)
		if err != nil {
			return err
		}
		if len(e.args) == 0 {
			return usagef("--inject-fault needs the CONVERSATION to fork")
		}
		c, err := s.resolve(ctx, e.args[0])
		if err != nil {
			return err
		}
		only = &c
		s.engine.Arm(c.info.ID, f)
		fj = &faultJSON{Name: e.o.fault, Conversation: hex.EncodeToString(c.info.ID)}
	}
	before, err := s.snapshot(ctx)
	if err != nil {
		return err
	}
	var p *progress
	if s.progressOut != nil {
		p = s.plan(ctx, before)
		s.transport.watch(p)
	}
	events := collect(s.c.Events())
	syncErr := s.c.SyncAll(ctx)
	p.end()
	s.transport.watch(nil)
	evs := events.drain()
	if fj != nil {
		fj.Fired = s.engine.Fired(only.info.ID, faults[fj.Name]) > 0
	}
	after, err := s.snapshot(ctx)
	if err != nil {
		return err
	}
	if only == nil && len(e.args) == 1 { // named after the sync, which may have joined it
		c, err := s.resolve(ctx, e.args[0])
		if err != nil {
			return err
		}
		only = &c
	}
	out := syncJSON{Events: []eventJSON{}, Conversations: []syncedJSON{}, Fault: fj}
	for _, ev := range evs {
		if only == nil || ev.Conversation == hex.EncodeToString(only.info.ID) {
			out.Events = append(out.Events, ev)
		}
	}
	for _, id := range sortedKeys(after) {
		if only != nil && id != hex.EncodeToString(only.info.ID) {
			continue
		}
		a, b := after[id], before[id]
		sj := syncedJSON{convJSON: a.convJSON, EpochBefore: b.convJSON.Epoch, StateBefore: b.convJSON.ForkState,
			NewMessages: a.messages - b.messages, Joined: !b.known}
		out.Conversations = append(out.Conversations, sj)
	}
	if syncErr != nil && e.o.json {
		return syncErr // one document: the error (runCLI)
	}
	if err := e.out.emit(out, func(w io.Writer) { printSync(w, out, after) }); err != nil {
		return err
	}
	return syncErr // in text, after what did change
}

// state is a conversation before or after a sync.
type state struct {
	convJSON
	label    string
	messages int
	known    bool
}

// snapshot records every conversation's state.
func (s *session) snapshot(ctx context.Context) (map[string]state, error) {
	all, err := s.conversations(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]state{}
	for _, c := range all {
		v, err := s.convJSON(ctx, c)
		if err != nil {
			return nil, err
		}
		msgs, err := c.cv.Messages(ctx, 0, 0)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, m := range msgs {
			if m.Kind == ports.MessageApplication {
				n++
			}
		}
		out[v.ID] = state{convJSON: v, label: c.label(s.c.InboxID()), messages: n, known: true}
	}
	return out, nil
}

// plan asks regroupd for the newest id of every active conversation's
// topic and returns the progress that draws the long ones.
func (s *session) plan(ctx context.Context, before map[string]state) *progress {
	p := &progress{w: s.progressOut}
	for id, st := range before {
		if !st.Active {
			continue
		}
		gid, _ := hex.DecodeString(id)
		topic := append([]byte{byte(ports.TopicGroupMessages)}, gid...)
		head, err := s.transport.HighestSequenceID(ctx, topic)
		if err != nil {
			continue // the sync itself reports the server's failures
		}
		info, err := s.c.Conversation(ctx, gid)
		if err != nil {
			continue
		}
		in, err := info.Info(ctx)
		if err != nil {
			continue
		}
		label := st.label
		if label == "" {
			label = short(id)
		}
		p.add(topic, clean(label), in.Cursor, head)
	}
	return p
}

func printSync(w io.Writer, out syncJSON, after map[string]state) {
	for _, ev := range out.Events {
		conv := ""
		if ev.Conversation != "" {
			conv = short(ev.Conversation) + " "
		}
		fmt.Fprintf(w, "%-16s %s%s\n", ev.Kind, conv, clean(ev.Detail))
	}
	for _, c := range out.Conversations {
		var notes []string
		if c.Joined {
			notes = append(notes, "joined")
		}
		if c.Epoch != c.EpochBefore && !c.Joined {
			notes = append(notes, fmt.Sprintf("epoch %d → %d", c.EpochBefore, c.Epoch))
		}
		if c.ForkState != c.StateBefore && !c.Joined {
			notes = append(notes, fmt.Sprintf("fork state %s → %s", c.StateBefore, c.ForkState))
		}
		if c.NewMessages > 0 {
			notes = append(notes, fmt.Sprintf("%d new message(s)", c.NewMessages))
		}
		if !c.Active {
			notes = append(notes, "inactive")
		}
		if len(notes) == 0 {
			notes = append(notes, "no change")
		}
		fmt.Fprintf(w, "%s  %-12s epoch %d, %s: %s\n", short(c.ID), clean(after[c.ID].label), c.Epoch, c.ForkState, strings.Join(notes, ", "))
	}
	if len(out.Conversations) == 0 {
		fmt.Fprintln(w, "synced; no conversations yet")
	}
	if f := out.Fault; f != nil {
		if f.Fired {
			fmt.Fprintf(w, "fault injector: %s fired on %s (a deliberate fork, for demonstration)\n", f.Name, short(f.Conversation))
		} else {
			fmt.Fprintf(w, "fault injector: %s did not fire on %s: this sync merged no commit there; "+
				"have another member commit (e.g. `regroup group rename`) and run this sync again\n", f.Name, short(f.Conversation))
		}
	}
}

func sortedKeys(m map[string]state) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// collector gathers the client's events while a command runs.
type collector struct {
	ch   chan eventJSON
	done chan []eventJSON
}

// collect starts gathering the events of ch.
func collect(ch <-chan client.Event) *collector {
	c := &collector{ch: make(chan eventJSON, 64), done: make(chan []eventJSON, 1)}
	go func() {
		for ev := range ch {
			if j, ok := describeEvent(ev); ok {
				c.ch <- j
			}
		}
		close(c.ch)
	}()
	return c
}

// drain returns the events gathered so far: those the client emitted
// during the command are queued already, so it waits until none has
// arrived for a moment (the client's event stream has no end marker
// before Close).
func (c *collector) drain() []eventJSON {
	var out []eventJSON
	for {
		select {
		case j, ok := <-c.ch:
			if !ok {
				return out
			}
			out = append(out, j)
		case <-time.After(100 * time.Millisecond):
			return out
		}
	}
}

// describeEvent renders the events a sync reports; messages are counted
// per conversation instead.
func describeEvent(ev client.Event) (eventJSON, bool) {
	switch e := ev.(type) {
	case client.JoinedEvent:
		d := fmt.Sprintf("added by %s at epoch %d", short(e.AdderInbox), e.Epoch)
		kind := "joined"
		if e.Rejoined {
			kind = "rejoined"
		}
		return eventJSON{Kind: kind, Conversation: hex.EncodeToString(e.GroupID), Detail: d}, true
	case client.ForkStateEvent:
		d := "now " + e.State.String()
		if e.State == ports.ForkForked {
			d += fmt.Sprintf(" at commit %d: local authenticator %s…, accepted remote %s…", e.SharedCommit, hexShort(e.Local), hexShort(e.Remote))
		}
		return eventJSON{Kind: "fork state", Conversation: hex.EncodeToString(e.GroupID), Detail: d}, true
	case client.WelcomeEvent:
		kind := "welcome held"
		if e.Rejected {
			kind = "welcome rejected"
		}
		return eventJSON{Kind: kind, Conversation: hex.EncodeToString(e.GroupID), Detail: e.Reason}, true
	case client.MembershipEvent:
		var parts []string
		for _, a := range e.Added {
			parts = append(parts, "added "+short(a))
		}
		for _, r := range e.Removed {
			parts = append(parts, "removed "+short(r))
		}
		for _, k := range e.Readded {
			parts = append(parts, "readded installation "+hexShort(k))
		}
		if e.RemovedSelf {
			parts = append(parts, "removed this installation")
		}
		return eventJSON{Kind: "membership", Conversation: hex.EncodeToString(e.GroupID),
			Detail: fmt.Sprintf("commit %d: %s", e.CommitSequenceID, strings.Join(parts, ", "))}, true
	case client.CommitRejectedEvent:
		return eventJSON{Kind: "commit rejected", Conversation: hex.EncodeToString(e.GroupID),
			Detail: fmt.Sprintf("commit %d: %s", e.CommitSequenceID, e.Reason)}, true
	case client.RecoveryEvent:
		d := e.Reason
		if len(e.InstallationKey) > 0 {
			d = fmt.Sprintf("installation %s… %s", hexShort(e.InstallationKey), d)
		}
		return eventJSON{Kind: string(e.Kind), Conversation: hex.EncodeToString(e.GroupID), Detail: strings.TrimSpace(d)}, true
	}
	return eventJSON{}, false
}
