package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// sizes are the dimensions of a run: short for CI, long by flag.
type sizes struct {
	envelopeKiB, envelopes, subscribers int // slow subscribers
	queryKiB, queryEnvelopes, queriers  int // parallel queries
	watch                               time.Duration
	rssBoundMiB, queryBoundMiB          float64
}

var short = sizes{envelopeKiB: 512, envelopes: 48, subscribers: 30, queryKiB: 250, queryEnvelopes: 160, queriers: 8,
	watch: 5 * time.Second, rssBoundMiB: 350, queryBoundMiB: 200}

var long = sizes{envelopeKiB: 900, envelopes: 96, subscribers: 60, queryKiB: 250, queryEnvelopes: 400, queriers: 16,
	watch: 15 * time.Second, rssBoundMiB: 600, queryBoundMiB: 300}

func dial(addr string, key ed25519.PrivateKey) (*grpctransport.Client, error) {
	return grpctransport.Dial(addr, &grpctransport.ClientOptions{InstallationKey: key, ResubscribeBackoff: 20 * time.Millisecond})
}

func newKey() ed25519.PrivateKey {
	_, k, _ := ed25519.GenerateKey(nil)
	return k
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// fillWelcomes publishes n welcomes of kib KiB each on one welcome topic
// (anonymously readable), retrying refusals by a rate limit.
func fillWelcomes(ctx context.Context, c *grpctransport.Client, n, kib int) ([]byte, error) {
	installation := randomBytes(32)
	for i := 0; i < n; i++ {
		env := transporttest.Welcome(installation, bytes.Repeat([]byte{byte(i)}, kib<<10))
		for {
			_, err := c.Publish(ctx, []*backendpb.ClientEnvelope{env})
			if err == nil {
				break
			}
			if !errors.Is(err, ports.ErrRateLimited) || ctx.Err() != nil {
				return nil, fmt.Errorf("fill: %w", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return transporttest.Topic(ports.TopicWelcomes, installation), nil
}

// countTopic reads the whole topic page by page and returns how many
// envelopes it holds.
func countTopic(ctx context.Context, c *grpctransport.Client, topic []byte) (int, error) {
	var after uint64
	n := 0
	for {
		page, err := c.Query(ctx, topic, after, 0)
		if errors.Is(err, ports.ErrRateLimited) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			return n, err
		}
		if len(page) == 0 {
			return n, nil
		}
		n += len(page)
		after = page[len(page)-1].GetSequenceId()
	}
}

// slowSubscribers is finding 1: subscribers that never read a topic of
// large envelopes. The server's RSS must stay within the bound while they
// hang on, and an honest reader must still read the whole topic.
func slowSubscribers(ctx context.Context, tg target, sz sizes) outcome {
	o := outcome{finding: 1, name: "slow-subscribers"}
	d, err := tg.start(o.name)
	if err != nil {
		return o.fail(err)
	}
	defer d.stop()
	pub, err := dial(d.addr, newKey())
	if err != nil {
		return o.fail(err)
	}
	defer pub.Close()
	topic, err := fillWelcomes(ctx, pub, sz.envelopes, sz.envelopeKiB)
	if err != nil {
		return o.fail(err)
	}
	d.idle(5 * time.Second)
	base, _ := d.rssMiB()
	watch, stop := context.WithTimeout(ctx, sz.watch)
	defer stop()
	peak := make(chan float64, 1)
	go func() { peak <- d.peak(watch) }()
	// Each subscriber on its own connection, opens the stream and never
	// receives.
	var conns []*grpc.ClientConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	opened := 0
	for i := 0; i < sz.subscribers; i++ {
		cc, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return o.fail(err)
		}
		conns = append(conns, cc)
		_, err = deliverypb.NewDeliveryClient(cc).Subscribe(watch, &deliverypb.SubscribeRequest{
			Cursors: []*deliverypb.TopicCursor{{Topic: topic}}})
		if err == nil {
			opened++
		}
	}
	<-watch.Done()
	top := <-peak
	o.measured = fmt.Sprintf("RSS %.0f → peak %.0f MiB (+%.0f) with %d never-reading subscribers on %d × %d KiB",
		base, top, top-base, opened, sz.envelopes, sz.envelopeKiB)
	o.bound = fmt.Sprintf("growth ≤ %.0f MiB; an honest reader reads all %d", sz.rssBoundMiB, sz.envelopes)
	if top-base > sz.rssBoundMiB {
		return o.fail(fmt.Errorf("RSS grew %.0f MiB", top-base))
	}
	reader, err := dial(d.addr, nil)
	if err != nil {
		return o.fail(err)
	}
	defer reader.Close()
	if n, err := countTopic(ctx, reader, topic); err != nil || n != sz.envelopes {
		return o.fail(fmt.Errorf("honest reader read %d of %d envelopes: %v", n, sz.envelopes, err))
	}
	return o
}

// parallelQueries is finding 2: parallel queries of the largest page on
// a topic of large envelopes must not load more than a page each.
func parallelQueries(ctx context.Context, tg target, sz sizes) outcome {
	o := outcome{finding: 2, name: "parallel-queries"}
	d, err := tg.start(o.name)
	if err != nil {
		return o.fail(err)
	}
	defer d.stop()
	pub, err := dial(d.addr, newKey())
	if err != nil {
		return o.fail(err)
	}
	defer pub.Close()
	topic, err := fillWelcomes(ctx, pub, sz.queryEnvelopes, sz.queryKiB)
	if err != nil {
		return o.fail(err)
	}
	d.idle(5 * time.Second)
	base, _ := d.rssMiB()
	watch, stop := context.WithTimeout(ctx, sz.watch)
	defer stop()
	peak := make(chan float64, 1)
	go func() { peak <- d.peak(watch) }()
	var wg sync.WaitGroup
	var mu sync.Mutex
	calls, most := 0, 0
	for i := 0; i < sz.queriers; i++ {
		c, err := dial(d.addr, nil)
		if err != nil {
			return o.fail(err)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for watch.Err() == nil {
				page, err := c.Query(watch, topic, 0, 1000)
				if err != nil {
					time.Sleep(20 * time.Millisecond) // refused or ended: the attacker tries again
					continue
				}
				mu.Lock()
				calls++
				most = max(most, len(page))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	top := <-peak
	o.measured = fmt.Sprintf("RSS %.0f → peak %.0f MiB (+%.0f), %d queries of limit 1000 by %d clients, largest page %d",
		base, top, top-base, calls, sz.queriers, most)
	o.bound = fmt.Sprintf("growth ≤ %.0f MiB", sz.queryBoundMiB)
	if calls == 0 {
		return o.fail(errors.New("no query was answered"))
	}
	if top-base > sz.queryBoundMiB {
		return o.fail(fmt.Errorf("RSS grew %.0f MiB", top-base))
	}
	return o
}
