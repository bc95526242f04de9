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

type result struct {
	acked    int
	elapsed  time.Duration
	p50, p99 time.Duration
	summary  string
}

type ack struct {
	topic   int
	id      uint64
	payload []byte
}

// runLoad runs one timed load against a fresh regroupd; with fault it
// kills regroupd with SIGKILL halfway and restarts it on the same address.
func runLoad(ctx context.Context, p params, database, schema string, fault bool) (result, error) {
	da := daemonArgs{bin: p.bin, listen: "127.0.0.1:0", database: database, schema: schema, pprof: p.profileDir != ""}
	d, err := startDaemon(da)
	if err != nil {
		return result{}, err
	}
	addr := d.addr
	defer func() { d.stop() }()
	if p.profileDir != "" && !fault {
		go func() {
			path := filepath.Join(p.profileDir, fmt.Sprintf("regroupd-%s.pprof", map[bool]string{true: "postgres", false: "sqlite"}[schema != ""]))
			if err := d.profile(ctx, max(int(p.duration/time.Second)-2, 1), path); err != nil {
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
	dial := func() (*grpctransport.Client, error) {
		_, key, _ := ed25519.GenerateKey(nil)
		return grpctransport.Dial(addr, &grpctransport.ClientOptions{InstallationKey: key, ResubscribeBackoff: 20 * time.Millisecond})
	}

	// The reader: one subscription over every topic, checking order.
	rc, err := dial()
	if err != nil {
		return result{}, err
	}
	defer rc.Close()
	cursors := make([]ports.TopicCursor, len(topics))
	index := map[string]int{}
	for i, t := range topics {
		cursors[i] = ports.TopicCursor{Topic: t}
		index[string(t)] = i
	}
	readCtx, stopReader := context.WithCancel(ctx)
	defer stopReader()
	sub, err := rc.Subscribe(readCtx, cursors)
	if err != nil {
		return result{}, fmt.Errorf("subscribe: %w", err)
	}
	var readMu sync.Mutex
	delivered := make([][]uint64, len(topics)) // ids per topic, as delivered
	var readErr error
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			e, err := sub.Next(readCtx)
			if err != nil {
				return
			}
			i := index[string(e.GetEnvelope().GetTargetTopic())]
			readMu.Lock()
			if d := delivered[i]; len(d) > 0 && e.GetSequenceId() <= d[len(d)-1] && readErr == nil {
				readErr = fmt.Errorf("reader: topic %d delivered id %d after %d (duplicate or disorder)", i, e.GetSequenceId(), d[len(d)-1])
			}
			delivered[i] = append(delivered[i], e.GetSequenceId())
			readMu.Unlock()
		}
	}()

	// Publishers.
	var mu sync.Mutex
	var acks []ack
	var lats []time.Duration
	retries := 0
	start := time.Now()
	deadline := start.Add(p.duration)
	var wg sync.WaitGroup
	pubErr := make(chan error, p.publishers)
	for w := 0; w < p.publishers; w++ {
		c, err := dial()
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			payload := make([]byte, p.payload)
			for n := 0; time.Now().Before(deadline); n++ {
				ti := (w + n) % len(topics)
				_, _ = rand.Read(payload)
				binary.BigEndian.PutUint32(payload, uint32(w))
				env := &backendpb.ClientEnvelope{TargetTopic: topics[ti],
					Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: append([]byte(nil), payload...)}}
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				t0 := time.Now()
				ids, err := c.Publish(cctx, []*backendpb.ClientEnvelope{env})
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
				acks = append(acks, ack{topic: ti, id: ids[0], payload: env.GetGroupMessage()})
				lats = append(lats, lat)
				mu.Unlock()
			}
		}()
	}
	restart := time.Duration(0)
	if fault {
		time.Sleep(p.duration / 2)
		d.kill()
		t0 := time.Now()
		if d, err = restartDaemon(da, d); err != nil {
			wg.Wait()
			return result{}, err
		}
		restart = time.Since(t0)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(pubErr)
	if err := <-pubErr; err != nil {
		return result{}, fmt.Errorf("publish: %w", err)
	}
	res := result{acked: len(acks), elapsed: elapsed}
	if len(lats) == 0 {
		return res, errors.New("no publish was acknowledged")
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	res.p50, res.p99 = lats[len(lats)/2], lats[len(lats)*99/100]

	// Every topic read back in full: ids strictly increasing (they have
	// gaps, since one counter serves every topic), and every acknowledged
	// envelope at the id it was acknowledged with.
	vc, err := dial()
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
	// The reader must end with exactly what each topic holds, in order:
	// nothing missed (an id of a topic never became visible after a
	// higher one), nothing twice.
	catchUp := time.Now().Add(20 * time.Second)
	for {
		readMu.Lock()
		done := readErr != nil
		behind := false
		for i := range topics {
			if len(delivered[i]) < len(storedIDs[i]) {
				behind = true
			}
		}
		readMu.Unlock()
		if done || !behind {
			break
		}
		if time.Now().After(catchUp) {
			readMu.Lock()
			got, want := 0, 0
			for i := range topics {
				got, want = got+len(delivered[i]), want+len(storedIDs[i])
			}
			readMu.Unlock()
			return res, fmt.Errorf("reader did not catch up within 20s: it delivered %d of %d stored envelopes (a missed envelope, or a reader slower than the publishers)", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopReader()
	<-readerDone
	if readErr != nil {
		return res, readErr
	}
	for i := range topics {
		if fmt.Sprint(delivered[i]) != fmt.Sprint(storedIDs[i]) {
			return res, fmt.Errorf("reader: topic %d delivered %d ids, the topic holds %d (missed or extra envelopes)", i, len(delivered[i]), len(storedIDs[i]))
		}
	}
	res.summary = fmt.Sprintf("reader got exactly the stored ids of each topic, in order; %d stored, all %d acked present with their ids", total, len(acks))
	if fault {
		res.summary += fmt.Sprintf("; SIGKILL+restart in %s, %d unacked attempts retried", restart.Round(time.Millisecond), retries)
	}
	return res, nil
}
