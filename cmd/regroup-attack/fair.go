package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// The fair-share run: a regroupd with its default limits and a stated
// read budget, honest clients on [::1] and one adversary (or all of them)
// on 127.0.0.1, so per-address limits tell them apart. For each adversary
// it prints the server's peak RSS against the read budget plus a
// per-connection allowance, and the honest clients' p50/p99 latency
// against the same server before the adversary started.

// fairSizes are the dimensions of the fair-share run.
type fairSizes struct {
	budgetMiB      int           // -read-budget-mib
	fillEnvelopes  int           // 512 KiB Welcomes on the topic adversaries read
	honestClients  int           // each publishes and queries in a loop
	measure        time.Duration // honest load per phase
	adversaryConns int           // connections per adversary (scaled per kind)
	// rounds is how many times each row alternates an unloaded and an
	// attacked phase; the row reports the median of the rounds' p99
	// ratios, so one noisy phase on a shared machine moves it little.
	rounds int
}

var fairShort = fairSizes{budgetMiB: 64, fillEnvelopes: 24, honestClients: 4, measure: 2 * time.Second, adversaryConns: 8, rounds: 1}
var fairLong = fairSizes{budgetMiB: 64, fillEnvelopes: 48, honestClients: 8, measure: 4 * time.Second, adversaryConns: 32, rounds: 5}

// connAllowanceMiB is the memory regroupd may use per open connection
// beyond the read budget: its HTTP/2 receive window (1 MiB by default),
// read and write buffers (64 KiB) and goroutine stacks.
const connAllowanceMiB = 1.25

// fairEnv is what an adversary attacks.
type fairEnv struct {
	d     *daemon
	topic []byte // a Welcome topic of large envelopes, readable anonymously
	conns atomic.Int64
}

type adversary struct {
	name string
	run  func(ctx context.Context, env *fairEnv, n int) string // until ctx ends; returns what it did
}

var adversaries = []adversary{
	{"non-reading", nonReading},
	{"zero-window", zeroWindowFlood},
	{"hoarding", hoarding},
	{"querynewest", queryNewestFlood},
	{"replay", replayFlood},
	{"storage", storageFlood},
}

// fairRow is one line of the table.
type fairRow struct {
	db, adversary, did             string
	baseRSS, peakRSS, boundRSS     float64
	conns                          int64
	p50, p99, loadedP50, loadedP99 time.Duration // medians over the rounds
	// ratio is the median over the rounds of the attacked phase's honest
	// p99 over the unloaded phase's just before it; ratios lists them.
	ratio                   float64
	ratios                  []float64
	slowest                 string // the honest call whose attacked p99 was highest
	honestOps, honestFailed int
	err                     error
}

// maxRatio is the goal: honest p99 under attack at most 3× unloaded.
const maxRatio = 3

func (r fairRow) ok() bool {
	return r.err == nil && r.honestFailed == 0 && r.peakRSS <= r.boundRSS && r.ratio <= maxRatio
}

func fairSettings(sz fairSizes) map[string]string {
	return map[string]string{
		"REGROUPD_EXTRA_LISTEN":              "[::1]:0",
		"REGROUPD_READ_BUDGET_MIB":           fmt.Sprint(sz.budgetMiB),
		"REGROUPD_SLOW_READER_TIMEOUT":       "2s",
		"REGROUPD_RESPONSE_PROGRESS_TIMEOUT": "2s",
	}
}

// runFair runs, on tg's database, each adversary alone (when each is
// set) and then all at once; only, when not empty, names the rows to run
// (adversary names, "all" for all at once).
func runFair(ctx context.Context, tg target, sz fairSizes, each bool, only map[string]bool, report func(fairRow)) []fairRow {
	tg.settings = fairSettings(sz)
	var rows []fairRow
	sets := [][]adversary{}
	for _, a := range adversaries {
		if each && (len(only) == 0 || only[a.name]) {
			sets = append(sets, []adversary{a})
		}
	}
	if len(only) == 0 || only["all"] {
		sets = append(sets, adversaries)
	}
	for _, set := range sets {
		actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		r := fairOne(actx, tg, sz, set)
		cancel()
		report(r)
		rows = append(rows, r)
	}
	return rows
}

func fairOne(ctx context.Context, tg target, sz fairSizes, set []adversary) fairRow {
	r := fairRow{db: tg.db, adversary: set[0].name}
	if len(set) > 1 {
		r.adversary = "all at once"
	}
	d, err := tg.start("fair-" + strings.ReplaceAll(r.adversary, " ", "-"))
	if err != nil {
		r.err = err
		return r
	}
	defer d.stop()
	if len(d.extra) == 0 {
		r.err = errors.New("regroupd did not listen on [::1] (-extra-listen): an older build?")
		return r
	}
	honestAddr := d.extra[0]
	pub, err := dial(honestAddr, newKey())
	if err != nil {
		r.err = err
		return r
	}
	defer pub.Close()
	env := &fairEnv{d: d}
	if env.topic, err = fillWelcomes(ctx, pub, sz.fillEnvelopes, 512); err != nil {
		r.err = err
		return r
	}
	honest, err := startHonest(honestAddr, sz.honestClients)
	if err != nil {
		r.err = err
		return r
	}
	defer honest.close()
	honest.run(ctx, sz.measure/2) // warm up
	d.idle(3 * time.Second)
	r.baseRSS, _ = d.rssMiB()
	// Rounds alternate the same honest workload unloaded and attacked, so
	// that a phase of machine noise (other processes on shared cores)
	// lands in one round's ratio, and the row takes the median.
	var p50s, p99s, lp50s, lp99s []time.Duration
	var dids []string
	var errs []error
	slowest := map[string]int{}
	for round := 0; round < max(sz.rounds, 1) && ctx.Err() == nil; round++ {
		if round > 0 {
			d.idle(3 * time.Second) // the last round's adversaries are gone
		}
		base := honest.run(ctx, sz.measure)
		actx, stop := context.WithCancel(ctx)
		peak := make(chan float64, 1)
		go func() { peak <- d.peak(actx) }()
		var wg sync.WaitGroup
		did := make([]string, len(set))
		for i, a := range set {
			wg.Add(1)
			go func() {
				defer wg.Done()
				did[i] = a.run(actx, env, sz.adversaryConns)
			}()
		}
		time.Sleep(time.Second) // let the adversaries take what they can
		loaded := honest.run(ctx, sz.measure)
		stop()
		wg.Wait()
		r.peakRSS = max(r.peakRSS, <-peak)
		dids = append(dids, strings.Join(did, "; "))
		p50s, p99s = append(p50s, base.percentile(50)), append(p99s, base.percentile(99))
		lp50s, lp99s = append(lp50s, loaded.percentile(50)), append(lp99s, loaded.percentile(99))
		r.ratios = append(r.ratios, float64(loaded.percentile(99))/float64(max(base.percentile(99), 1)))
		slowest[loaded.slowestOp()]++
		r.honestOps += base.ops + loaded.ops
		r.honestFailed += base.failed + loaded.failed
		errs = append(errs, base.firstErr, loaded.firstErr)
	}
	r.p50, r.p99, r.loadedP50, r.loadedP99 = medianDur(p50s), medianDur(p99s), medianDur(lp50s), medianDur(lp99s)
	r.ratio = medianFloat(r.ratios)
	for op, n := range slowest {
		if r.slowest == "" || n > slowest[r.slowest] {
			r.slowest = op
		}
	}
	r.did = dids[len(dids)-1]
	r.conns = env.conns.Load()
	if r.honestFailed > 0 {
		r.err = errors.Join(errs...)
	}
	r.boundRSS = r.baseRSS + float64(sz.budgetMiB) + float64(r.conns)*connAllowanceMiB
	return r
}

func medianDur(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = append([]time.Duration(nil), d...)
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

func medianFloat(f []float64) float64 {
	if len(f) == 0 {
		return 0
	}
	f = append([]float64(nil), f...)
	sort.Float64s(f)
	if len(f)%2 == 0 {
		return (f[len(f)/2-1] + f[len(f)/2]) / 2
	}
	return f[len(f)/2]
}

// honestLoad is a set of honest clients, each with its own installation
// key, connection and group topic.
type honestLoad struct {
	clients []*grpctransport.Client
	topics  [][]byte
	// after is each client's cursor, kept across phases: a phase that
	// started from 0 would read its topic's whole history in its first
	// query (and spend the address's rate on it).
	after []uint64
}

func newHonest(addr string, n int) (*honestLoad, error) {
	h := &honestLoad{}
	for i := 0; i < n; i++ {
		c, err := dial(addr, newKey())
		if err != nil {
			h.close()
			return nil, err
		}
		h.clients = append(h.clients, c)
		h.topics = append(h.topics, transporttest.RandomGroupTopic())
		h.after = append(h.after, 0)
	}
	return h, nil
}

func (h *honestLoad) close() {
	for _, c := range h.clients {
		c.Close()
	}
}

type latencies struct {
	mu          sync.Mutex
	d           []time.Duration
	byOp        map[string][]time.Duration
	ops, failed int
	firstErr    error
}

func (l *latencies) add(op string, d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops++
	if err != nil {
		l.failed++
		if l.firstErr == nil {
			l.firstErr = err
		}
		return
	}
	l.d = append(l.d, d)
	if l.byOp == nil {
		l.byOp = map[string][]time.Duration{}
	}
	l.byOp[op] = append(l.byOp[op], d)
}

// slowestOp names the honest call with the highest p99, with that p99.
func (l *latencies) slowestOp() string {
	var name string
	var worst time.Duration
	for op, d := range l.byOp {
		if p := (&latencies{d: d}).percentile(99); p > worst {
			name, worst = op, p
		}
	}
	return name
}

func (l *latencies) percentile(p int) time.Duration {
	if len(l.d) == 0 {
		return 0
	}
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	return l.d[min(len(l.d)-1, len(l.d)*p/100)]
}

// honestPause paces each honest client: about 20 publishes and 20
// queries a second, well inside the address's share of the rates (all
// honest clients share [::1]).
const honestPause = 50 * time.Millisecond

// run makes each client publish a 1 KiB message and query its topic
// after its cursor, in a loop, for d; every call is one sample.
func (h *honestLoad) run(ctx context.Context, d time.Duration) *latencies {
	l := &latencies{}
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for i, c := range h.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			after := h.after[i]
			defer func() { h.after[i] = after }()
			for time.Now().Before(end) && ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				t := time.Now()
				_, err := c.Publish(cctx, []*backendpb.ClientEnvelope{transporttest.GroupMessage(h.topics[i], randomBytes(1024))})
				l.add("publish", time.Since(t), err)
				t = time.Now()
				page, err := c.Query(cctx, h.topics[i], after, 0)
				l.add("query", time.Since(t), err)
				if len(page) > 0 {
					after = page[len(page)-1].GetSequenceId()
				}
				cancel()
				time.Sleep(honestPause)
			}
		}()
	}
	wg.Wait()
	return l
}

// rawClient is a gRPC connection from the adversary's address with fixed
// 64 KiB windows, authenticated as key when key is not nil.
func rawClient(ctx context.Context, env *fairEnv, key ed25519.PrivateKey) (deliverypb.DeliveryClient, func(), error) {
	cc, err := grpc.NewClient(env.d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		return nil, nil, err
	}
	env.conns.Add(1)
	closer := func() { cc.Close() }
	c := deliverypb.NewDeliveryClient(cc)
	if key == nil {
		return c, closer, nil
	}
	ch, err := c.Challenge(ctx, &deliverypb.ChallengeRequest{})
	if err == nil {
		sig, _ := key.Sign(nil, ch.GetChallenge(), &ed25519.Options{Context: ports.AuthContext})
		_, err = c.Authenticate(ctx, &deliverypb.AuthenticateRequest{InstallationKey: key.Public().(ed25519.PublicKey), Signature: sig})
	}
	if err != nil {
		closer()
		return nil, nil, err
	}
	return c, closer, nil
}

// nonReading: installations on one address subscribe to the large topic
// and never read.
func nonReading(ctx context.Context, env *fairEnv, n int) string {
	opened, refused := 0, 0
	for i := 0; i < 4*n && ctx.Err() == nil; i++ {
		c, closer, err := rawClient(ctx, env, newKey())
		if err != nil {
			refused++
			continue
		}
		defer closer()
		if _, err := c.Subscribe(ctx, &deliverypb.SubscribeRequest{Cursors: []*deliverypb.TopicCursor{{Topic: env.topic}}}); err != nil {
			refused++
			continue
		}
		opened++
	}
	<-ctx.Done()
	return fmt.Sprintf("%d subscriptions never read, %d refused", opened, refused)
}

// zeroWindowFlood: raw HTTP/2 connections announcing a zero window, each
// with 30 queries of the large topic, reconnecting when shed.
func zeroWindowFlood(ctx context.Context, env *fairEnv, n int) string {
	var opened, shed atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				nc, err := zeroWindowConn(env.d.addr, env.topic, 30)
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				opened.Add(1)
				env.conns.Add(1)
				closed := make(chan struct{})
				go func() { nc.wait(); close(closed) }()
				select {
				case <-ctx.Done():
				case <-closed:
					shed.Add(1)
				}
				nc.close()
			}
		}()
	}
	wg.Wait()
	return fmt.Sprintf("%d zero-window connections × 30 queries, %d shed by the server", opened.Load(), shed.Load())
}

// hoarding: anonymous connections from one address, each opening as many
// subscriptions of 256 Welcome topics as the server allows.
func hoarding(ctx context.Context, env *fairEnv, n int) string {
	conns, subs := 0, 0
	for i := 0; i < 200 && ctx.Err() == nil; i++ {
		c, closer, err := rawClient(ctx, env, nil)
		if err != nil {
			break
		}
		defer closer()
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = c.HighestSequenceId(hctx, &deliverypb.HighestSequenceIdRequest{Topic: env.topic})
		cancel()
		if err != nil {
			break // the address has its connections
		}
		conns++
		for j := 0; j < 8; j++ {
			req := &deliverypb.SubscribeRequest{}
			for k := 0; k < 256; k++ {
				req.Cursors = append(req.Cursors, &deliverypb.TopicCursor{Topic: transporttest.Topic(ports.TopicWelcomes, randomBytes(32))})
			}
			st, err := c.Subscribe(ctx, req)
			if err == nil {
				if _, err = st.Header(); err == nil {
					subs++
				}
			}
		}
	}
	<-ctx.Done()
	return fmt.Sprintf("%d connections and %d subscriptions held from one address", conns, subs)
}

// queryNewestFlood: connections asking for the newest large envelope as
// fast as they are answered.
func queryNewestFlood(ctx context.Context, env *fairEnv, n int) string {
	var calls, refused atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		c, closer, err := rawClient(ctx, env, nil)
		if err != nil {
			continue
		}
		defer closer()
		for j := 0; j < 4; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					_, err := c.QueryNewest(ctx, &deliverypb.QueryNewestRequest{Topic: env.topic})
					calls.Add(1)
					if err != nil {
						refused.Add(1)
						pause(err)
					}
				}
			}()
		}
	}
	wg.Wait()
	return fmt.Sprintf("%d QueryNewest calls of a 512 KiB envelope, %d refused", calls.Load(), refused.Load())
}

// replayFlood: one valid identity update published again and again.
func replayFlood(ctx context.Context, env *fairEnv, n int) string {
	_, recovery, _ := ed25519.GenerateKey(nil)
	u, err := identityAdd(recovery)
	if err != nil {
		return "identity update: " + err.Error()
	}
	batch := make([]*backendpb.ClientEnvelope, 64)
	for i := range batch {
		batch[i] = u
	}
	var calls atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < max(n/4, 1); i++ {
		c, closer, err := rawClient(ctx, env, newKey())
		if err != nil {
			continue
		}
		defer closer()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := c.Publish(ctx, &deliverypb.PublishRequest{Envelopes: batch}); err == nil {
					calls.Add(int64(len(batch)))
				} else {
					pause(err)
				}
			}
		}()
	}
	wg.Wait()
	stored, err := countIdentity(env, u.GetTargetTopic())
	if err != nil {
		return fmt.Sprintf("%d publishes of one identity update; count: %v", calls.Load(), err)
	}
	return fmt.Sprintf("%d publishes of one identity update, %d stored", calls.Load(), stored)
}

func countIdentity(env *fairEnv, topic []byte) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := dial(env.d.extra[0], nil)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return countTopic(ctx, c, topic)
}

// storageFlood: one installation publishing 512 KiB Welcomes in batches
// of 8 as fast as it is answered.
func storageFlood(ctx context.Context, env *fairEnv, n int) string {
	c, closer, err := rawClient(ctx, env, newKey())
	if err != nil {
		return "connect: " + err.Error()
	}
	defer closer()
	inst := randomBytes(32)
	var stored, quota, other int
	for ctx.Err() == nil {
		var batch []*backendpb.ClientEnvelope
		for i := 0; i < 8; i++ {
			batch = append(batch, transporttest.Welcome(inst, randomBytes(512<<10)))
		}
		_, err := c.Publish(ctx, &deliverypb.PublishRequest{Envelopes: batch})
		switch {
		case err == nil:
			stored += len(batch)
		case strings.Contains(err.Error(), "storage quota"):
			quota++
			time.Sleep(10 * time.Millisecond)
		default:
			other++
			time.Sleep(10 * time.Millisecond)
		}
	}
	return fmt.Sprintf("%d MiB of Welcomes stored, then %d publishes refused by the quota (%d otherwise)", stored/2, quota, other)
}

// pause keeps an adversary whose connection failed (the server closed or
// refused it) from spinning on this machine's CPU, which the server and
// the honest clients share here; refusals by the server are already
// answered no faster than its buckets refill.
func pause(err error) {
	if status.Code(err) == codes.Unavailable {
		time.Sleep(20 * time.Millisecond)
	}
}

// printFair prints one row of the table.
func printFair(r fairRow) {
	verdict := "ok"
	if !r.ok() {
		var why []string
		if r.err != nil {
			why = append(why, r.err.Error())
		}
		if r.honestFailed > 0 {
			why = append(why, fmt.Sprintf("%d honest calls failed", r.honestFailed))
		}
		if r.peakRSS > r.boundRSS {
			why = append(why, "RSS above bound")
		}
		if r.ratio > maxRatio {
			why = append(why, fmt.Sprintf("honest p99 above %d× unloaded", maxRatio))
		}
		verdict = "FAILED: " + strings.Join(why, ", ")
	}
	ratios := make([]string, len(r.ratios))
	for i, x := range r.ratios {
		ratios[i] = fmt.Sprintf("%.1f", x)
	}
	fmt.Printf("%-8s %-12s RSS %4.0f → peak %4.0f MiB (bound %4.0f = idle + %d budget + %d conns × %.2f) | honest p50 %6s → %6s, p99 %6s → %6s (%.1f× median of %s; slowest %s) | %d calls, %d failed | %s\n         %s\n",
		r.db, r.adversary, r.baseRSS, r.peakRSS, r.boundRSS, int(r.boundRSS-r.baseRSS-float64(r.conns)*connAllowanceMiB), r.conns, connAllowanceMiB,
		r.p50.Round(10*time.Microsecond), r.loadedP50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.loadedP99.Round(10*time.Microsecond),
		r.ratio, strings.Join(ratios, ", "), r.slowest, r.honestOps, r.honestFailed, verdict, r.did)
}
