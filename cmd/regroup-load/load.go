package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// run is one timed load.
type run struct {
	name string
	// replicas is the number of regroupd processes sharing the database;
	// publishers spread their calls over all of them.
	replicas int
	// fault SIGKILLs one regroupd halfway and restarts it on the same
	// addresses.
	fault bool
}

type result struct {
	acked    int
	elapsed  time.Duration
	p50, p99 time.Duration
	summary  string
	// metrics is what the regroupd processes' /metrics said at the end of
	// publishing (steady runs only: a restarted process starts at zero).
	metrics *scrape
	// loadCPU is the load generator's CPU time while publishing.
	loadCPU time.Duration
}

type ack struct {
	topic   int
	id      uint64
	payload []byte
}

// reader is one subscription over every topic, checking order as it goes.
type reader struct {
	mu        sync.Mutex
	delivered [][]uint64 // ids per topic, as delivered
	err       error
	done      chan struct{}
}

func (r *reader) follow(ctx context.Context, sub ports.Subscription, index map[string]int, replica int) {
	defer close(r.done)
	for {
		e, err := sub.Next(ctx)
		if err != nil {
			return
		}
		i := index[string(e.GetEnvelope().GetTargetTopic())]
		r.mu.Lock()
		if d := r.delivered[i]; len(d) > 0 && e.GetSequenceId() <= d[len(d)-1] && r.err == nil {
			r.err = fmt.Errorf("reader of replica %d: topic %d delivered id %d after %d (duplicate or disorder)", replica, i, e.GetSequenceId(), d[len(d)-1])
		}
		r.delivered[i] = append(r.delivered[i], e.GetSequenceId())
		r.mu.Unlock()
	}
}

// runLoad runs one timed load against fresh regroupd processes on one
// database: publishers spread over every process, one reader subscribed
// to each process. With fault it kills one process with SIGKILL halfway
// and restarts it on the same addresses.
func runLoad(ctx context.Context, p params, database, schema string, rn run) (result, error) {
	da := daemonArgs{bin: p.bin, listen: "127.0.0.1:0", database: database, schema: schema,
		notify: rn.replicas > 1, pprof: p.profileDir != ""}
	daemons := make([]*daemon, rn.replicas)
	defer func() {
		for _, d := range daemons {
			if d != nil {
				d.stop()
			}
		}
	}()
	addrs := make([]string, rn.replicas)
	for i := range daemons {
		d, err := startDaemon(da)
		if err != nil {
			return result{}, err
		}
		daemons[i], addrs[i] = d, d.addr
	}
	if p.profileDir != "" && !rn.fault {
		go func() {
			db := map[bool]string{true: "postgres", false: "sqlite"}[schema != ""]
			path := filepath.Join(p.profileDir, fmt.Sprintf("regroupd-%s-%s.pprof", db, rn.name))
			if err := daemons[0].profile(ctx, max(int(p.duration/time.Second)-2, 1), path); err != nil {
				fmt.Fprintln(os.Stderr, "regroup-load: profile:", err)
			}
		}()
	}

	topics := make([][]byte, p.topics)
	for i := range topics {
		topics[i] = make([]byte, 33)
		_, _ = rand.Read(topics[i][1:])
		topics[i][0] = byte(ports.TopicGroupMessages)
	}
	dial := func(targets ...string) (*grpctransport.Client, error) {
		_, key, _ := ed25519.GenerateKey(nil)
		return grpctransport.DialReplicas(targets, &grpctransport.ClientOptions{InstallationKey: key, ResubscribeBackoff: 20 * time.Millisecond})
	}

	// The readers: on each process, one subscription over every topic.
	cursors := make([]ports.TopicCursor, len(topics))
	index := map[string]int{}
	for i, t := range topics {
		cursors[i] = ports.TopicCursor{Topic: t}
		index[string(t)] = i
	}
	readCtx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	readers := make([]*reader, rn.replicas)
	for i, addr := range addrs {
		rc, err := dial(addr)
		if err != nil {
			return result{}, err
		}
		defer rc.Close()
		sub, err := rc.Subscribe(readCtx, cursors)
		if err != nil {
			return result{}, fmt.Errorf("subscribe to replica %d: %w", i, err)
		}
		readers[i] = &reader{delivered: make([][]uint64, len(topics)), done: make(chan struct{})}
		go readers[i].follow(readCtx, sub, index, i)
	}

	// Publishers, each spreading its calls over every process.
	var mu sync.Mutex
	var acks []ack
	var lats []time.Duration
	retries := 0
	start, cpu0 := time.Now(), cpuTime()
	deadline := start.Add(p.duration)
	var wg sync.WaitGroup
	pubErr := make(chan error, p.publishers)
	for w := 0; w < p.publishers; w++ {
		c, err := dial(addrs...)
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			payload := make([]byte, p.payload)
			for n := 0; time.Now().Before(deadline); n++ {
				// A batch of p.batch envelopes, each to the next topic in turn.
				envs := make([]*backendpb.ClientEnvelope, max(p.batch, 1))
				tis := make([]int, len(envs))
				for k := range envs {
					tis[k] = (w + n*len(envs) + k) % len(topics)
					_, _ = rand.Read(payload)
					binary.BigEndian.PutUint32(payload, uint32(w))
					envs[k] = &backendpb.ClientEnvelope{TargetTopic: topics[tis[k]],
						Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: append([]byte(nil), payload...)}}
				}
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				t0 := time.Now()
				ids, err := c.Publish(cctx, envs)
				lat := time.Since(t0)
				cancel()
				if err != nil {
					if errors.Is(err, ports.ErrUnavailable) || errors.Is(err, ports.ErrRateLimited) {
						mu.Lock()
						retries++
						mu.Unlock()
						time.Sleep(20 * time.Millisecond)
						continue // outcome unknown: a new attempt, never counted as acked
					}
					pubErr <- err
					return
				}
				mu.Lock()
				for k, env := range envs {
					acks = append(acks, ack{topic: tis[k], id: ids[k], payload: env.GetGroupMessage()})
				}
				lats = append(lats, lat)
				mu.Unlock()
			}
		}()
	}
	restart := time.Duration(0)
	if rn.fault {
		time.Sleep(p.duration / 2)
		victim := len(daemons) - 1
		daemons[victim].kill()
		t0 := time.Now()
		d, err := restartDaemon(da, daemons[victim])
		if err != nil {
			daemons[victim] = nil
			wg.Wait()
			return result{}, err
		}
		daemons[victim] = d
		restart = time.Since(t0)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(pubErr)
	if err := <-pubErr; err != nil {
		return result{}, fmt.Errorf("publish: %w", err)
	}
	res := result{acked: len(acks), elapsed: elapsed, loadCPU: cpuTime() - cpu0}
	if len(lats) == 0 {
		return res, errors.New("no publish was acknowledged")
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	res.p50, res.p99 = lats[len(lats)/2], lats[len(lats)*99/100]
	if !rn.fault {
		sc, err := scrapeAll(ctx, daemons)
		if err != nil {
			return res, fmt.Errorf("scrape /metrics: %w", err)
		}
		res.metrics = sc
	}

	// Every topic read back in full: ids strictly increasing (they have
	// gaps, since one counter serves every topic), and every acknowledged
	// envelope at the id it was acknowledged with.
	vc, err := dial(addrs...)
	if err != nil {
		return res, err
	}
	defer vc.Close()
	stored := make([]map[uint64][]byte, len(topics))
	storedIDs := make([][]uint64, len(topics))
	for i, t := range topics {
		stored[i] = map[uint64][]byte{}
		var after uint64
		for {
			page, err := vc.Query(ctx, t, after, 1000)
			if err != nil {
				return res, fmt.Errorf("verify query: %w", err)
			}
			if len(page) == 0 {
				break
			}
			for _, e := range page {
				if e.GetSequenceId() <= after {
					return res, fmt.Errorf("topic %d: id %d follows %d in a read", i, e.GetSequenceId(), after)
				}
				after = e.GetSequenceId()
				stored[i][after] = e.GetEnvelope().GetGroupMessage()
				storedIDs[i] = append(storedIDs[i], after)
			}
		}
	}
	ackedIDs := make(map[uint64]bool, len(acks))
	for _, a := range acks {
		got, ok := stored[a.topic][a.id]
		if !ok || string(got) != string(a.payload) {
			return res, fmt.Errorf("acknowledged envelope topic %d id %d is missing or changed", a.topic, a.id)
		}
		if ackedIDs[a.id] {
			return res, fmt.Errorf("id %d acknowledged twice", a.id)
		}
		ackedIDs[a.id] = true
	}
	// Without a retried attempt (whose outcome was unknown) the topics hold
	// exactly the acknowledged envelopes.
	total := 0
	for i := range storedIDs {
		total += len(storedIDs[i])
	}
	if retries == 0 && total != len(acks) {
		return res, fmt.Errorf("%d envelopes stored, %d acknowledged, and no outcome was unknown", total, len(acks))
	}
	// Every reader must end with exactly what each topic holds, in order:
	// nothing missed (an id of a topic never became visible after a
	// higher one, and a publish to any replica woke every replica's
	// subscribers), nothing twice.
	for ri, r := range readers {
		if err := r.catchUp(storedIDs, ri); err != nil {
			return res, err
		}
	}
	stopReaders()
	for ri, r := range readers {
		<-r.done
		if r.err != nil {
			return res, r.err
		}
		for i := range topics {
			if fmt.Sprint(r.delivered[i]) != fmt.Sprint(storedIDs[i]) {
				return res, fmt.Errorf("reader of replica %d: topic %d delivered %d ids, the topic holds %d (missed or extra envelopes)", ri, i, len(r.delivered[i]), len(storedIDs[i]))
			}
		}
	}
	who := "the reader"
	if rn.replicas > 1 {
		who = fmt.Sprintf("the reader of each of %d replicas", rn.replicas)
	}
	res.summary = fmt.Sprintf("%s got exactly the stored ids of each topic, in order; %d stored, all %d acked present with their ids", who, total, len(acks))
	if rn.fault {
		res.summary += fmt.Sprintf("; SIGKILL+restart of one process in %s, %d unacked attempts retried", restart.Round(time.Millisecond), retries)
	}
	return res, nil
}

// catchUp waits until the reader has delivered as many ids per topic as
// stored holds. It fails when the reader delivers nothing new for 15s
// short of that: a reader that missed an envelope stalls below it.
func (r *reader) catchUp(stored [][]uint64, replica int) error {
	last, lastAt := -1, time.Now()
	for {
		r.mu.Lock()
		failed := r.err != nil
		got, want := 0, 0
		for i := range stored {
			got, want = got+min(len(r.delivered[i]), len(stored[i])), want+len(stored[i])
		}
		r.mu.Unlock()
		if failed || got == want {
			return nil
		}
		if got != last {
			last, lastAt = got, time.Now()
		}
		if time.Since(lastAt) > 15*time.Second {
			return fmt.Errorf("reader of replica %d stopped at %d of %d stored envelopes for 15s (it missed an envelope)", replica, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
