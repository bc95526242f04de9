package client_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// publishCounter counts the Publish calls of group messages and their
// envelopes; gate, when set, runs before the first such call.
type publishCounter struct {
	ports.Transport
	calls, envs atomic.Int64
	gate        func()
	once        sync.Once
}

func (p *publishCounter) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	if len(envs) > 0 && envs[0].GetGroupMessage() != nil && envs[0].GetTargetTopic()[0] == byte(ports.TopicGroupMessages) {
		p.calls.Add(1)
		p.envs.Add(int64(len(envs)))
		if p.gate != nil {
			p.once.Do(p.gate)
		}
	}
	return p.Transport.Publish(ctx, envs)
}

// COMP-550: messages sent concurrently share publish calls: while one
// call is out, the envelopes of the sends that stored theirs meanwhile
// wait and go together in the next call, and every send gets its own
// sequence id, which the receiver reads them at.
func TestCOMP550_ConcurrentSendsSharePublishCalls(t *testing.T) {
	w := world.New(t, "embedded")
	const n = 16
	pc := &publishCounter{}
	alice := w.Member("alice", world.Config{Transport: func(tr ports.Transport) ports.Transport { pc.Transport = tr; return pc }})
	bob := newMember(w, "bob", nil)
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	bob.Sync()
	// Only the sends' calls count. The first waits until every other send has stored its message
	// (unconfirmed, at the end of the list), so they queue behind it.
	pc.gate = func() {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			ms, err := g.Messages(w.Ctx, 0, 0)
			unconfirmed := 0
			for _, m := range ms {
				if m.Own && m.SequenceID == 0 && m.Kind == ports.MessageApplication {
					unconfirmed++
				}
			}
			if err == nil && unconfirmed == n {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	pc.calls.Store(0)
	pc.envs.Store(0)
	seqs := make([]uint64, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := g.Send(w.Ctx, []byte(fmt.Sprintf("m%02d", i)))
			seqs[i] = s
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if calls, envs := pc.calls.Load(), pc.envs.Load(); envs != n || calls > 2 {
		t.Errorf("%d sends made %d publish calls of %d envelopes, want them to share: at most 2 calls", n, calls, envs)
	}
	bob.Sync()
	ms, err := bob.Conv(g.ID()).Messages(w.Ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]uint64{}
	for _, m := range ms {
		if m.Kind == ports.MessageApplication {
			at[string(m.Content)] = m.SequenceID
		}
	}
	for i, s := range seqs {
		if got := at[fmt.Sprintf("m%02d", i)]; got != s || s == 0 {
			t.Errorf("message %d: bob read it at %d, its send returned %d", i, got, s)
		}
	}
}

// relaxCounter counts the transactions a client runs relaxed.
type relaxCounter struct {
	ports.Store
	relaxed atomic.Int64
}

func (r *relaxCounter) TxRelaxed(ctx context.Context, fn func(tx ports.Tx) error) error {
	r.relaxed.Add(1)
	return r.Store.(ports.RelaxedStore).TxRelaxed(ctx, fn)
}

// COMP-551: what a send writes after its publish — the confirmation of
// its sequence id — and the next send's read of it, which moves only the
// cursor, commit relaxed: a read of the topic redoes both.
func TestCOMP551_ConfirmationAndOwnReadCommitRelaxed(t *testing.T) {
	w := world.New(t, "embedded")
	rc := &relaxCounter{}
	alice := w.Member("alice", world.Config{Store: func(s ports.Store) ports.Store { rc.Store = s; return rc }})
	bob := newMember(w, "bob", nil)
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	before := rc.relaxed.Load()
	for i := range n {
		if _, err := g.Send(w.Ctx, []byte(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// n confirmations, and n-1 reads of the previous own message.
	if got := rc.relaxed.Load() - before; got != 2*n-1 {
		t.Errorf("%d sends ran %d relaxed transactions, want %d", n, got, 2*n-1)
	}
	bob.Sync()
	if got := texts(t, bob, g.ID()); len(got) != n {
		t.Fatalf("bob holds %v", got)
	}
}

// The environment that turns the test binary into the sending child.
const (
	envSendStore  = "REGROUP_CLIENT_SEND_STORE"
	envSendServer = "REGROUP_CLIENT_SEND_SERVER"
	envSendGroup  = "REGROUP_CLIENT_SEND_GROUP"
)

// COMP-551: every send acknowledged to the app survives a SIGKILL of the
// sending process. A child process on alice's SQLite store sends from 16
// goroutines at once through a regroupd process, printing each send's
// content and sequence id when Send returns; the parent kills it with
// SIGKILL part way. Then alice's store holds every acknowledged message,
// confirmed at the id its send returned (its relaxed confirmation
// survived), and bob reads every one of them from the topic.
func TestCOMP551_AcknowledgedSendsSurviveSIGKILL(t *testing.T) {
	if path := os.Getenv(envSendStore); path != "" {
		sendChild(t, path, os.Getenv(envSendServer), os.Getenv(envSendGroup))
		return
	}
	w := world.New(t, "sqlite")
	alice, bob := newMember(w, "alice", nil), newMember(w, "bob", nil)
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	bob.Sync()
	alicePath := alice.Path
	alice.Close()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestCOMP551_AcknowledgedSendsSurviveSIGKILL$", "-test.timeout", "2m")
	cmd.Env = append(os.Environ(), envSendStore+"="+alicePath, envSendServer+"="+w.Regroupd.Addr, envSendGroup+"="+hex.EncodeToString(g.ID()))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]uint64{}
	sc := bufio.NewScanner(out)
	for len(acked) < 30 && sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "ack" {
			continue
		}
		seq, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		acked[f[1]] = seq
	}
	_ = cmd.Process.Kill() // SIGKILL
	// Acknowledgements already written to the pipe count too.
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "ack" {
			seq, _ := strconv.ParseUint(f[2], 10, 64)
			acked[f[1]] = seq
		}
	}
	_ = cmd.Wait()
	if len(acked) < 30 {
		t.Fatalf("the child acknowledged %d sends before it ended: %s", len(acked), stderr.String())
	}
	stored := storedOwn(t, alicePath, g.ID())
	for text, seq := range acked {
		got, ok := stored[text]
		if !ok {
			t.Errorf("acknowledged message %s (id %d) is not in alice's store after SIGKILL", text, seq)
		} else if got != seq {
			t.Errorf("acknowledged message %s: stored at id %d after SIGKILL, its send returned %d", text, got, seq)
		}
	}
	bob.Sync()
	read := map[string]bool{}
	for _, s := range texts(t, bob, g.ID()) {
		read[s] = true
	}
	for text := range acked {
		if !read[text] {
			t.Errorf("acknowledged message %s never reached bob", text)
		}
	}
	t.Logf("%d sends acknowledged before SIGKILL, %d messages in alice's store", len(acked), len(stored))
}

// storedOwn returns alice's own application messages in the SQLite store
// at path by content, with their sequence ids.
func storedOwn(t *testing.T, path string, id []byte) map[string]uint64 {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, &sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := map[string]uint64{}
	err = st.Tx(ctx, func(tx ports.Tx) error {
		ms, err := tx.(ports.MessageTx).Messages().List(ctx, id, 0, 0)
		for _, m := range ms {
			if m.Kind == ports.MessageApplication && m.Own {
				out[string(m.Content)] = m.SequenceID
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sendChild opens alice's store and sends from 16 goroutines until
// killed, printing "ack <content> <sequence id>" as each send returns.
func sendChild(t *testing.T, path, server, group string) {
	ctx := context.Background()
	gid, err := hex.DecodeString(group)
	if err != nil {
		t.Fatal(err)
	}
	c, cleanup, err := regroup.NewNetworked(ctx, regroup.NetworkedConfig{Server: server, SQLitePath: path})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	cv, err := c.Conversation(ctx, gid)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				text := fmt.Sprintf("k%06d", next.Add(1))
				seq, err := cv.Send(ctx, []byte(text))
				if err != nil {
					fmt.Fprintf(os.Stderr, "send %s: %v\n", text, err)
					os.Exit(3)
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "ack %s %d\n", text, seq)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// queryCounter counts the Query calls of one topic; the first waits for
// gate.
type queryCounter struct {
	ports.Transport
	topic []byte
	calls atomic.Int64
	gate  chan struct{}
}

func (q *queryCounter) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	if q.topic != nil && string(topic) == string(q.topic) {
		if q.calls.Add(1) == 1 {
			<-q.gate
		}
	}
	return q.Transport.Query(ctx, topic, after, limit)
}

// COMP-550: a send skips its catch-up when one of the same group that
// started after the send was called has completed: sixteen sends called
// while a catch-up is reading make two passes over the topic between
// them (the one reading, and one that starts after they were called),
// not sixteen.
func TestCOMP550_ConcurrentSendsShareCatchUps(t *testing.T) {
	w := world.New(t, "embedded")
	const n = 16
	qc := &queryCounter{gate: make(chan struct{})}
	alice := w.Member("alice", world.Config{Transport: func(tr ports.Transport) ports.Transport { qc.Transport = tr; return qc }})
	bob := newMember(w, "bob", nil)
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	qc.topic = append([]byte{byte(ports.TopicGroupMessages)}, g.ID()...)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := g.Send(w.Ctx, []byte(fmt.Sprintf("m%02d", i)))
			errs <- err
		}()
	}
	// Every send is called while the first pass waits in its read.
	time.Sleep(time.Second)
	close(qc.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// A pass reads one page, or two when the first is not empty.
	if got := qc.calls.Load(); got > 4 {
		t.Errorf("%d concurrent sends read their topic %d times, want two passes (at most 4 reads)", n, got)
	}
	bob.Sync()
	if got := texts(t, bob, g.ID()); len(got) != n {
		t.Fatalf("bob holds %d messages, want %d", len(got), n)
	}
}
