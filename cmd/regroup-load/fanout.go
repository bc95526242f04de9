package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// The fan-out run: one big commit published to a group topic that
// fanSubs subscription streams follow, spread over fanConns connections,
// each connection authenticated as its own installation (regroupd binds
// one installation key per connection, and caps a connection's and an
// installation's subscriptions at 32 by default). The time from the
// publish call to the last stream's receipt is measured against a
// reference measured in the same run, alternating with it: a server that
// only writes (rawServer) sending the same bytes to as many streams over
// as many connections, with the same client code reading both.

// subscribedHeader is the response header by which a server accepts a
// subscription (adapters/grpctransport).
const subscribedHeader = "regroup-subscribed"

// fanoutParams shapes the fan-out run.
type fanoutParams struct {
	subs, conns, bytes, rounds int
}

// fanRound is one publish being fanned out.
type fanRound struct {
	id        uint64 // carried in the payload's first 8 bytes
	start     time.Time
	delays    []time.Duration // per stream, publish call to receipt
	remaining atomic.Int64
	done      chan struct{}
	err       atomic.Pointer[error]
}

func (r *fanRound) fail(err error) {
	if r.err.CompareAndSwap(nil, &err) {
		select {
		case <-r.done:
		default:
			close(r.done)
		}
	}
}

// fanTarget is one server's side: its connections, their streams and
// the publisher.
type fanTarget struct {
	name    string
	pid     int
	health  string // regroupd's /metrics address; empty for the reference
	conns   []*grpc.ClientConn
	pub     deliverypb.DeliveryClient
	topic   []byte
	bytes   int
	streams int
	round   atomic.Pointer[fanRound]
	broken  atomic.Pointer[error] // the first stream that ended
	ctx     context.Context
	cancel  context.CancelFunc
}

func (t *fanTarget) close() {
	t.cancel()
	for _, c := range t.conns {
		c.Close()
	}
}

// connectFan opens conns connections to addr (authenticating each as a
// fresh installation when auth is set) and subs streams over them, plus
// a publisher connection.
func connectFan(addr, name string, auth bool, fp fanoutParams, topic []byte) (*fanTarget, error) {
	ctx, cancel := context.WithCancel(context.Background())
	t := &fanTarget{name: name, topic: topic, bytes: fp.bytes, streams: fp.subs, ctx: ctx, cancel: cancel}
	dial := func() (*grpc.ClientConn, deliverypb.DeliveryClient, error) {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
		if err != nil {
			return nil, nil, err
		}
		t.conns = append(t.conns, cc)
		api := deliverypb.NewDeliveryClient(cc)
		if auth {
			_, key, _ := ed25519.GenerateKey(nil)
			ch, err := api.Challenge(ctx, &deliverypb.ChallengeRequest{})
			if err != nil {
				return nil, nil, fmt.Errorf("challenge: %w", err)
			}
			sig, err := key.Sign(nil, ch.GetChallenge(), &ed25519.Options{Context: ports.AuthContext})
			if err != nil {
				return nil, nil, err
			}
			if _, err := api.Authenticate(ctx, &deliverypb.AuthenticateRequest{
				InstallationKey: key.Public().(ed25519.PublicKey), Signature: sig}); err != nil {
				return nil, nil, fmt.Errorf("authenticate: %w", err)
			}
		}
		return cc, api, nil
	}
	fail := func(err error) (*fanTarget, error) {
		t.close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	_, pub, err := dial()
	if err != nil {
		return fail(err)
	}
	t.pub = pub
	req := &deliverypb.SubscribeRequest{Cursors: []*deliverypb.TopicCursor{{Topic: topic}}}
	stream := 0
	for c := 0; c < fp.conns; c++ {
		_, api, err := dial()
		if err != nil {
			return fail(err)
		}
		// Streams spread evenly: the first subs%conns connections carry one more.
		n := fp.subs / fp.conns
		if c < fp.subs%fp.conns {
			n++
		}
		for k := 0; k < n; k++ {
			st, err := api.Subscribe(ctx, req)
			if err != nil {
				return fail(fmt.Errorf("subscribe: %w", err))
			}
			md, err := st.Header()
			if err != nil {
				return fail(fmt.Errorf("subscribe: %w", err))
			}
			if len(md.Get(subscribedHeader)) == 0 {
				_, err := st.Recv()
				return fail(fmt.Errorf("subscription %d refused: %v", stream, err))
			}
			go t.receive(st, stream)
			stream++
		}
	}
	return t, nil
}

// receive records, for each envelope a stream delivers, the time since
// its round's publish call started.
func (t *fanTarget) receive(st grpc.ServerStreamingClient[deliverypb.SubscribeResponse], i int) {
	for {
		resp, err := st.Recv()
		if err != nil {
			if t.ctx.Err() == nil {
				err = fmt.Errorf("stream %d ended: %w", i, err)
				t.broken.CompareAndSwap(nil, &err)
				if r := t.round.Load(); r != nil {
					r.fail(err)
				}
			}
			return
		}
		now := time.Now()
		r := t.round.Load()
		for _, e := range resp.GetEnvelopes() {
			p := e.GetEnvelope().GetGroupMessage()
			switch {
			case r == nil:
				continue
			case len(p) != t.bytes || binary.BigEndian.Uint64(p) != r.id:
				r.fail(fmt.Errorf("stream %d: got a %d-byte payload of round %d in round %d", i, len(p), binary.BigEndian.Uint64(p), r.id))
				continue
			case r.delays[i] != 0:
				r.fail(fmt.Errorf("stream %d: round %d delivered twice", i, r.id))
				continue
			}
			r.delays[i] = now.Sub(r.start)
			if r.remaining.Add(-1) == 0 {
				close(r.done)
			}
		}
	}
}

// fanResult is one round's figures.
type fanResult struct {
	last, p50 time.Duration
	mem       memPeak
}

// publish runs one round: publishes a payload of round id and waits for
// every stream to deliver it, sampling the server's memory meanwhile.
func (t *fanTarget) publish(id uint64) (fanResult, error) {
	if e := t.broken.Load(); e != nil {
		return fanResult{}, fmt.Errorf("%s: %w", t.name, *e)
	}
	payload := make([]byte, t.bytes)
	_, _ = rand.Read(payload)
	binary.BigEndian.PutUint64(payload, id)
	r := &fanRound{id: id, delays: make([]time.Duration, t.streams), done: make(chan struct{})}
	r.remaining.Store(int64(t.streams))
	stopMem := make(chan struct{})
	memDone := make(chan memPeak, 1)
	go func() { memDone <- sampleMemory(t.pid, t.health, stopMem) }()
	defer t.round.Store(nil)
	r.start = time.Now()
	t.round.Store(r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := t.pub.Publish(ctx, &deliverypb.PublishRequest{Envelopes: []*backendpb.ClientEnvelope{{TargetTopic: t.topic,
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: payload}}}})
	if err != nil {
		close(stopMem)
		<-memDone
		return fanResult{}, fmt.Errorf("%s: publish: %w", t.name, err)
	}
	select {
	case <-r.done:
	case <-time.After(120 * time.Second):
		r.fail(fmt.Errorf("%d of %d streams delivered nothing within 120s", r.remaining.Load(), t.streams))
	}
	close(stopMem)
	mem := <-memDone
	if e := r.err.Load(); e != nil {
		return fanResult{}, fmt.Errorf("%s: %w", t.name, *e)
	}
	d := slices.Clone(r.delays)
	slices.Sort(d)
	return fanResult{last: d[len(d)-1], p50: d[len(d)/2], mem: mem}, nil
}

// memPeak is the highest memory a server showed while sampled.
type memPeak struct {
	rss, heap, budgetInUse int64
}

// sampleMemory reads the resident size of pid (/proc) every 20 ms and,
// when health is set, regroupd's Go heap in use and read budget in use
// (/metrics) every 100 ms, until stop closes; it returns the peaks.
func sampleMemory(pid int, health string, stop <-chan struct{}) memPeak {
	var m memPeak
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		if v, ok := procStatus(pid, "VmRSS:"); ok {
			m.rss = max(m.rss, v)
		}
		if health != "" && n%5 == 0 {
			heap, inUse := scrapeMemory(health)
			m.heap, m.budgetInUse = max(m.heap, heap), max(m.budgetInUse, inUse)
		}
		select {
		case <-stop:
			return m
		case <-tick.C:
		}
	}
}

// procStatus returns a field of /proc/pid/status in bytes (VmRSS:, VmHWM:).
func procStatus(pid int, field string) (int64, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// scrapeMemory returns regroupd's Go heap in use and read budget in use.
func scrapeMemory(health string) (heap, budget int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+health+"/metrics", nil)
	if err != nil {
		return 0, 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, _, v, ok := parseSample(sc.Text())
		switch {
		case !ok:
		case name == "go_memstats_heap_inuse_bytes":
			heap = int64(v)
		case name == "regroupd_read_budget_bytes_in_use":
			budget = int64(v)
		}
	}
	return heap, budget
}

// runFanout runs the fan-out on one database: regroupd and the reference
// server side by side, fp.rounds publishes to each, alternating.
func runFanout(ctx context.Context, p params, fp fanoutParams, dbName, database, schema string) error {
	// Rate limits off as in the other runs (a 10,000-stream fan-out of a
	// 320 KiB commit costs 60,000 tokens at the default costs), and the
	// subscription caps raised to hold the run's streams from one
	// loopback address; the per-connection and per-installation caps
	// (32 subscriptions) stay.
	extra := []string{"-max-subscriptions", strconv.Itoa(fp.subs + 64),
		"-max-connections", strconv.Itoa(fp.conns + 64),
		"-max-connections-per-address", "-1", "-max-subscriptions-per-address", "-1",
		"-max-cursors-per-address", "-1", "-read-share-address-kib", "-1", "-max-envelope-bytes", strconv.Itoa(max(1<<20, 2*fp.bytes))}
	d, err := startDaemon(daemonArgs{bin: p.bin, listen: "127.0.0.1:0", database: database, schema: schema,
		pprof: p.profileDir != "", extra: extra})
	if err != nil {
		return err
	}
	defer d.stop()
	raw, err := startRaw()
	if err != nil {
		return err
	}
	defer raw.stop()

	topic := make([]byte, 33)
	_, _ = rand.Read(topic[1:])
	topic[0] = byte(ports.TopicGroupMessages)
	t0 := time.Now()
	svc, err := connectFan(d.addr, "regroupd", true, fp, topic)
	if err != nil {
		return err
	}
	defer svc.close()
	svc.pid, svc.health = d.cmd.Process.Pid, d.healthAddr
	setup := time.Since(t0)
	ref, err := connectFan(raw.addr, "raw writes", false, fp, topic)
	if err != nil {
		return err
	}
	defer ref.close()
	ref.pid = raw.cmd.Process.Pid
	idleRSS, _ := procStatus(svc.pid, "VmRSS:")
	idleHeap, _ := scrapeMemory(svc.health)
	fmt.Printf("%-9s fan-out: %d streams on %d connections (+1 publisher) each, %d-byte group message; regroupd: subscribed in %s, idle RSS %.0f MiB, heap %.0f MiB; load average %s\n",
		dbName, fp.subs, fp.conns, fp.bytes, setup.Round(time.Millisecond), mib(idleRSS), mib(idleHeap), loadAverage())

	// One untimed round each first, then the timed ones, alternating.
	var svcRes, refRes []fanResult
	id := uint64(0)
	for r := 0; r <= fp.rounds; r++ {
		for _, t := range []*fanTarget{svc, ref} {
			id++
			res, err := t.publish(id)
			if err != nil {
				return err
			}
			if r == 0 {
				continue
			}
			if t == svc {
				svcRes = append(svcRes, res)
			} else {
				refRes = append(refRes, res)
			}
		}
	}
	if p.profileDir != "" {
		// A CPU profile of regroupd over rounds beyond the timed ones.
		path := filepath.Join(p.profileDir, fmt.Sprintf("regroupd-%s-fanout.pprof", dbName))
		perr := make(chan error, 1)
		go func() { perr <- d.profile(ctx, 10, path) }()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			id++
			if _, err := svc.publish(id); err != nil {
				return err
			}
		}
		if err := <-perr; err != nil {
			fmt.Fprintln(os.Stderr, "regroup-load: profile:", err)
		} else {
			fmt.Printf("%-9s fan-out: CPU profile of regroupd over 10 s of rounds: %s\n", dbName, path)
		}
	}
	hwm, _ := procStatus(svc.pid, "VmHWM:")
	refHWM, _ := procStatus(ref.pid, "VmHWM:")
	med := func(rs []fanResult, f func(fanResult) time.Duration) time.Duration {
		v := make([]time.Duration, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	peak := func(rs []fanResult) memPeak {
		var m memPeak
		for _, r := range rs {
			m.rss, m.heap, m.budgetInUse = max(m.rss, r.mem.rss), max(m.heap, r.mem.heap), max(m.budgetInUse, r.mem.budgetInUse)
		}
		return m
	}
	last := func(r fanResult) time.Duration { return r.last }
	p50 := func(r fanResult) time.Duration { return r.p50 }
	sl, rl := med(svcRes, last), med(refRes, last)
	fmt.Printf("%-9s fan-out: %-10s publish to last delivery, median of %d: %8s (rounds %s), p50 delivery %8s\n",
		dbName, "regroupd", fp.rounds, sl.Round(time.Millisecond), fmtRounds(svcRes), med(svcRes, p50).Round(time.Millisecond))
	fmt.Printf("%-9s fan-out: %-10s publish to last delivery, median of %d: %8s (rounds %s), p50 delivery %8s\n",
		dbName, "raw writes", fp.rounds, rl.Round(time.Millisecond), fmtRounds(refRes), med(refRes, p50).Round(time.Millisecond))
	fmt.Printf("%-9s fan-out: regroupd ÷ raw writes: %.2f×; load average %s\n", dbName, float64(sl)/float64(rl), loadAverage())
	sp, rp := peak(svcRes), peak(refRes)
	// The ceiling regroupd's memory governor works to (COMP-337): its Go
	// memory at start-up, the read budget and 1.25 MiB per connection; its
	// soft limit is 1/16 below.
	ceiling := d.memBase + d.readBudget + int64(fp.conns+1)*(5<<18)
	fmt.Printf("%-9s fan-out: regroupd peak RSS %.0f MiB (high-water mark %.0f MiB), peak Go heap in use %.0f MiB, peak read budget in use %.0f of %.0f MiB; budget ceiling %.0f MiB (start-up %.0f + read budget %.0f + %d connections × 1.25), soft limit %.0f MiB; reference server peak RSS %.0f MiB (high-water mark %.0f MiB)\n",
		dbName, mib(sp.rss), mib(hwm), mib(sp.heap), mib(sp.budgetInUse), mib(d.readBudget), mib(ceiling), mib(d.memBase), mib(d.readBudget), fp.conns+1,
		mib(ceiling-ceiling/16), mib(rp.rss), mib(refHWM))
	if d.readBudget == 0 {
		return errors.New("regroupd logged no memory limit line: its budget is unknown")
	}
	return nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func fmtRounds(rs []fanResult) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.last.Round(time.Millisecond).String()
	}
	return strings.Join(s, " ")
}

// loadAverage is the machine's 1-, 5- and 15-minute load average.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
