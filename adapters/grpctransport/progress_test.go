package grpctransport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// roomConn is a connection accepted by the server's listener over
// loopback TCP, with the per-connection state its reads wait on; the
// peer reads everything written until the connection closes (peerGone).
type roomConn struct {
	srv      *Server
	c        *conn
	peerGone chan struct{}
}

func newRoomConn(t *testing.T, opts *ServerOptions) *roomConn {
	t.Helper()
	srv := NewServer(&fakeService{}, opts)
	t.Cleanup(srv.Shutdown)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := srv.Listener(lis)
	t.Cleanup(func() { l.Close() })
	peer, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	accepted, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { accepted.Close() })
	r := &roomConn{srv: srv, peerGone: make(chan struct{}),
		c: &conn{raw: accepted.(*countedConn), seq: 1, reads: make(chan struct{}, 4)}}
	go func() {
		defer close(r.peerGone)
		io.Copy(io.Discard, peer)
	}()
	return r
}

// write writes n bytes through the counted connection, as gRPC's writer
// does.
func (r *roomConn) write(t *testing.T, n int) {
	t.Helper()
	if _, err := r.c.raw.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
}

// await runs awaitRoom on r's connection; its result arrives on the
// channel returned.
func (r *roomConn) await(t *testing.T) <-chan error {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- r.srv.awaitRoom(ctx, r.c) }()
	return done
}

// registered waits until a wait for room is registered on r's
// connection.
func (r *roomConn) registered(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.c.raw.progress.wakeAt.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no wait for room registered")
		}
		time.Sleep(time.Millisecond)
	}
}

// COMP-559, COMP-322: a read waiting for room on its connection goes on
// as soon as the connection has written enough, woken by that write: no
// poll, no timer. The progress timeout is longer than the test's
// deadline, so without the wake the wait would end only at its timer.
func TestCOMP559_WaitForRoomWokenByTheWrite(t *testing.T) {
	r := newRoomConn(t, &ServerOptions{MaxQueuedBytesPerConnection: 1000, ResponseProgressTimeout: time.Minute})
	r.srv.enqueue(r.c, 3000, func() {}) // room once 2000 bytes are written
	done := r.await(t)
	r.registered(t)
	r.write(t, 1500)
	select {
	case err := <-done:
		t.Fatalf("the wait ended (%v) with %d bytes unsent, limit 1000", err, r.c.unsent())
	default:
	}
	r.write(t, 600)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the wait for room was not woken by the write that made it (%d bytes unsent, limit 1000)", r.c.unsent())
	}
	if n := r.srv.Stats().Refused[LimitQueuedBytes]; n != 0 {
		t.Fatalf("%d connections shed", n)
	}
}

// COMP-559: a write that ends while a wait registers is not missed,
// whichever side of the wait's check it falls on: a wait and the write
// that makes its room start together, many times over.
func TestCOMP559_WriteAsTheWaitStartsIsNotMissed(t *testing.T) {
	r := newRoomConn(t, &ServerOptions{MaxQueuedBytesPerConnection: 1, ResponseProgressTimeout: time.Minute})
	for i := 0; i < 500; i++ {
		r.srv.enqueue(r.c, 100, func() {})
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			for range i % 64 { // the write lands at a different point of the wait each round
				runtime.Gosched()
			}
			r.c.raw.Write(make([]byte, 100))
		}()
		select {
		case err := <-r.await(t):
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: the wait missed the write that made its room (%d bytes unsent)", i, r.c.unsent())
		}
		<-wrote
	}
}

// COMP-559: a write that ends while the wait is registering (here: while
// the test holds the registration's lock, so the write is counted and
// finds no wait to wake) is seen by the wait's check after registering.
// A wait that checked before registering would sleep until its timer.
func TestCOMP559_WriteWhileTheWaitRegistersIsSeen(t *testing.T) {
	r := newRoomConn(t, &ServerOptions{MaxQueuedBytesPerConnection: 1, ResponseProgressTimeout: time.Minute})
	r.srv.enqueue(r.c, 100, func() {})
	p := &r.c.raw.progress
	p.mu.Lock()
	done := r.await(t)
	time.Sleep(50 * time.Millisecond) // lets the wait reach its registration
	r.write(t, 100)
	p.mu.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the wait missed the write made while it registered (%d bytes unsent)", r.c.unsent())
	}
}

// COMP-322: a connection whose queued responses write nothing while a
// read waits for room is shed once the progress timeout has passed: the
// wait fails as rate-limited and the connection is closed and counted.
func TestCOMP322_WaitForRoomShedWhenNothingIsWritten(t *testing.T) {
	r := newRoomConn(t, &ServerOptions{MaxQueuedBytesPerConnection: 1000, ResponseProgressTimeout: 200 * time.Millisecond})
	r.srv.enqueue(r.c, 3000, func() {})
	select {
	case err := <-r.await(t):
		if !errors.Is(err, ports.ErrRateLimited) || !strings.Contains(err.Error(), LimitQueuedBytes) {
			t.Fatalf("got %v, want a refusal by %s", err, LimitQueuedBytes)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a connection that writes nothing was not shed")
	}
	if n := r.srv.Stats().Refused[LimitQueuedBytes]; n != 1 {
		t.Fatalf("%d connections counted as shed, want 1", n)
	}
	select {
	case <-r.peerGone:
	case <-time.After(20 * time.Second):
		t.Fatal("the shed connection is still open")
	}
}

// COMP-322, COMP-560: a connection that keeps writing, if too little to
// make room, is not shed while it writes, although no single write wakes
// the wait (COMP-559); once it stops writing it is shed.
func TestCOMP322_WaitForRoomKeptWhileTheConnectionWrites(t *testing.T) {
	// The timeout leaves the writing goroutine a wide margin on a loaded
	// machine; writing for twice as long still outlasts one timeout.
	const timeout = 1500 * time.Millisecond
	r := newRoomConn(t, &ServerOptions{MaxQueuedBytesPerConnection: 1000, ResponseProgressTimeout: timeout})
	r.srv.enqueue(r.c, 100_000, func() {})
	done := r.await(t)
	r.registered(t)
	for end := time.Now().Add(2 * timeout); time.Now().Before(end); {
		if _, err := r.c.raw.Write([]byte{0}); err != nil {
			t.Fatalf("the connection was shed while it wrote every 5 ms (progress timeout %s): %v", timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the wait ended (%v) while the connection wrote every 5 ms (progress timeout %s)", err, timeout)
	default:
	}
	select {
	case err := <-done:
		if !errors.Is(err, ports.ErrRateLimited) {
			t.Fatalf("got %v, want a refusal by %s", err, LimitQueuedBytes)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the connection was not shed after it stopped writing")
	}
}

// COMP-559 through the real server and delivery service (SQLite): a
// subscription whose response is larger than its connection may have
// unsent waits for room before its next read, and reads the next commit
// once the client has taken the first, woken by the connection's writes.
// The progress timeout is longer than the test's deadline.
func TestCOMP559_SubscriptionReadsOnOnceItsResponseIsWritten(t *testing.T) {
	const size = 256 << 10
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := deliverydb.OpenSQLite(ctx, filepath.Join(t.TempDir(), "delivery.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	svc := delivery.New(store, &delivery.Options{Clock: clock.System{}, MaxEnvelopeBytes: 2 * size, MaxPageBytes: 2 * size})
	srv := NewServer(svc, &ServerOptions{
		RatePerSecond: -1, IdentityRatePerSecond: -1, GlobalRatePerSecond: -1, AddressRatePerSecond: -1,
		MaxQueuedBytesPerConnection: 64 << 10, ResponseProgressTimeout: 2 * time.Minute, SlowReaderTimeout: 2 * time.Minute,
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := srv.GRPCServer()
	go gs.Serve(srv.Listener(lis))
	t.Cleanup(func() { srv.Shutdown(); gs.Stop() })
	api := authedClient(t, ctx, lis.Addr().String())
	topic := transporttest.RandomGroupTopic()
	st, err := api.Subscribe(ctx, &deliverypb.SubscribeRequest{Cursors: []*deliverypb.TopicCursor{{Topic: topic}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Header(); err != nil {
		t.Fatal(err)
	}
	for i := byte(1); i <= 3; i++ {
		payload := bytes.Repeat([]byte{i}, size)
		if _, err := api.Publish(ctx, &deliverypb.PublishRequest{Envelopes: []*backendpb.ClientEnvelope{
			transporttest.GroupMessage(topic, payload)}}); err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("commit %d not delivered: %v", i, err)
		}
		if es := resp.GetEnvelopes(); len(es) != 1 || !bytes.Equal(es[0].GetEnvelope().GetGroupMessage(), payload) {
			t.Fatalf("commit %d: got %d envelopes, want the published one", i, len(es))
		}
	}
	if n := srv.Stats().Refused[LimitQueuedBytes]; n != 0 {
		t.Fatalf("%d connections shed", n)
	}
}

// The cost COMP-559 adds to every write of a connection: counting it
// with its time and checking for a wait to wake, next to counting it
// alone (what a write cost before), in the same run. gRPC's writer
// writes up to 32 KiB at a time; one such write's syscall on loopback
// takes microseconds.
func BenchmarkCOMP559_WriteAccounting(b *testing.B) {
	b.Run("count-only", func(b *testing.B) {
		var written atomic.Int64
		for b.Loop() {
			written.Add(32 << 10)
		}
	})
	b.Run("count-time-wake-check", func(b *testing.B) {
		var p writeProgress
		for b.Loop() {
			p.wrote(32 << 10)
		}
	})
	b.Run("count-time-wake-check, a wait registered", func(b *testing.B) {
		var p writeProgress
		p.register(newWriteWait(), 1<<62)
		for b.Loop() {
			p.wrote(32 << 10)
		}
	})
	b.Run("loopback-write-32KiB", func(b *testing.B) { // what each write costs anyway
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer lis.Close()
		go func() {
			c, err := lis.Accept()
			if err == nil {
				io.Copy(io.Discard, c)
				c.Close()
			}
		}()
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		buf := make([]byte, 32<<10)
		for b.Loop() {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
