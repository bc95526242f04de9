package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// fanout runs publishes to one shared topic followed by subscribers
// that each also follow cursors-1 other (empty) topics, and returns the
// server CPU seconds from the first publish until every subscriber has
// every envelope.
func fanout(ctx context.Context, d *daemon, subscribers, cursors, publishes int) (float64, error) {
	shared := transporttest.RandomGroupTopic()
	var clients []*grpctransport.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	got := make([]atomic.Int64, subscribers)
	var wg sync.WaitGroup
	runCtx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); wg.Wait() }()
	for i := 0; i < subscribers; i++ {
		c, err := dial(d.addr, newKey())
		if err != nil {
			return 0, err
		}
		clients = append(clients, c)
		cs := []ports.TopicCursor{{Topic: shared}}
		for len(cs) < cursors {
			cs = append(cs, ports.TopicCursor{Topic: transporttest.RandomGroupTopic()})
		}
		var sub ports.Subscription
		for {
			sub, err = c.Subscribe(runCtx, cs)
			if err == nil {
				break
			}
			if !errors.Is(err, ports.ErrRateLimited) || runCtx.Err() != nil {
				return 0, fmt.Errorf("subscribe: %w", err)
			}
			time.Sleep(100 * time.Millisecond) // refused by a rate limit: wait for the refill
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			for {
				if _, err := sub.Next(runCtx); err != nil {
					return
				}
				got[i].Add(1)
			}
		}()
	}
	d.idle(30 * time.Second) // every subscription has read its backlog
	before, err := d.cpuSeconds()
	if err != nil {
		return 0, err
	}
	pub, err := dial(d.addr, newKey())
	if err != nil {
		return 0, err
	}
	clients = append(clients, pub)
	for i := 0; i < publishes; i++ {
		for {
			_, err := pub.Publish(runCtx, []*backendpb.ClientEnvelope{transporttest.GroupMessage(shared, []byte{byte(i)})})
			if err == nil {
				break
			}
			if !errors.Is(err, ports.ErrRateLimited) {
				return 0, fmt.Errorf("publish: %w", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for {
		done := true
		for i := range got {
			if got[i].Load() < int64(publishes) {
				done = false
			}
		}
		if done {
			break
		}
		if runCtx.Err() != nil {
			after, _ := d.cpuSeconds()
			return after - before, errors.New("subscribers did not get every envelope in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
	after, err := d.cpuSeconds()
	return after - before, err
}

// cpuAmplification is finding 4: subscribers following many topics must
// not make a publish to one of them cost the server more than when they
// follow that topic alone.
func cpuAmplification(ctx context.Context, tg target, sz sizes) outcome {
	o := outcome{finding: 4, name: "cpu-amplification"}
	subs, cursors, publishes := 50, 1024, 100
	bound := 3.0
	run := func(cursors int) (float64, error) {
		d, err := tg.start(o.name)
		if err != nil {
			return 0, err
		}
		defer d.stop()
		rctx, cancel := context.WithTimeout(ctx, 4*sz.watch+20*time.Second)
		defer cancel()
		return fanout(rctx, d, subs, cursors, publishes)
	}
	ref, err := run(1)
	if err != nil {
		return o.fail(fmt.Errorf("reference run: %w", err))
	}
	cpu, err := run(cursors)
	o.measured = fmt.Sprintf("%d publishes to %d subscribers of %d topics: %.2fs server CPU; of 1 topic: %.2fs (%.1f×)",
		publishes, subs, cursors, cpu, ref, cpu/max(ref, 0.01))
	o.bound = fmt.Sprintf("≤ %.0f× the single-topic run", bound)
	if err != nil {
		return o.fail(err)
	}
	if cpu > bound*max(ref, 0.05) {
		return o.fail(fmt.Errorf("%.1f× the CPU", cpu/max(ref, 0.01)))
	}
	return o
}

// cancelledPublishers is finding 3: publishers whose deadlines end while
// their commit runs must not leave a subscriber behind what is stored.
func cancelledPublishers(ctx context.Context, tg target, sz sizes) outcome {
	o := outcome{finding: 3, name: "cancelled-publishers"}
	d, err := tg.start(o.name)
	if err != nil {
		return o.fail(err)
	}
	defer d.stop()
	topic := transporttest.RandomGroupTopic()
	reader, err := dial(d.addr, newKey())
	if err != nil {
		return o.fail(err)
	}
	defer reader.Close()
	sub, err := reader.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		return o.fail(err)
	}
	defer sub.Close()
	var last atomic.Uint64
	go func() {
		for {
			e, err := sub.Next(ctx)
			if err != nil {
				return
			}
			last.Store(e.GetSequenceId())
		}
	}()
	observer, err := dial(d.addr, newKey())
	if err != nil {
		return o.fail(err)
	}
	defer observer.Close()
	var pubs []*grpctransport.Client
	for w := 0; w < 16; w++ {
		c, err := dial(d.addr, newKey())
		if err != nil {
			return o.fail(err)
		}
		defer c.Close()
		pubs = append(pubs, c)
	}
	// Rounds of concurrent publishes with deadlines of 0.5 to 20ms; after
	// each round nothing is published until the subscriber has caught up
	// with what is stored, so a round whose last commits were reported as
	// failures leaves it behind for good if they woke no one.
	end := time.Now().Add(sz.watch)
	var cancelled atomic.Int64
	rounds := 0
	var highest uint64
	for ; time.Now().Before(end); rounds++ {
		var wg sync.WaitGroup
		for _, c := range pubs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pctx, cancel := context.WithTimeout(ctx, time.Duration(500+rand.IntN(19500))*time.Microsecond)
				defer cancel()
				if _, err := c.Publish(pctx, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, []byte("x"))}); err != nil {
					cancelled.Add(1)
				}
			}()
		}
		wg.Wait()
		for highest, err = observer.HighestSequenceID(ctx, topic); errors.Is(err, ports.ErrRateLimited); {
			time.Sleep(20 * time.Millisecond)
			highest, err = observer.HighestSequenceID(ctx, topic)
		}
		if err != nil {
			return o.fail(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for last.Load() < highest && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if last.Load() < highest {
			break
		}
	}
	o.measured = fmt.Sprintf("%d rounds of 16 publishes, %d failed with their deadline; stored up to id %d, subscriber at %d",
		rounds, cancelled.Load(), highest, last.Load())
	o.bound = "after each round the subscriber reaches the highest stored id within 10s, with no further publish"
	// A publish whose deadline passed may still be stored after the last
	// reading of the highest id: the subscriber may be ahead, never behind.
	if last.Load() < highest {
		return o.fail(errors.New("the subscriber stayed behind"))
	}
	return o
}
