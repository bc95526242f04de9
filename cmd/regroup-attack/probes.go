package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// cursorWrap is finding 5: a cursor above 2^63-1 must be refused, not
// wrap around and serve the topic again.
func cursorWrap(ctx context.Context, tg target, _ sizes) outcome {
	o := outcome{finding: 5, name: "cursor-wrap", bound: "Query(after=2^64-1) is InvalidArgument"}
	d, err := tg.start(o.name)
	if err != nil {
		return o.fail(err)
	}
	defer d.stop()
	c, err := dial(d.addr, newKey())
	if err != nil {
		return o.fail(err)
	}
	defer c.Close()
	topic := transporttest.RandomGroupTopic()
	if _, err := c.Publish(ctx, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, []byte("old"))}); err != nil {
		return o.fail(err)
	}
	page, err := c.Query(ctx, topic, math.MaxUint64, 0)
	o.measured = fmt.Sprintf("%d envelopes, %v", len(page), err)
	if !errors.Is(err, ports.ErrInvalidArgument) {
		return o.fail(errors.New("not refused"))
	}
	return o
}

// rawCodec sends a request's bytes as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*(v.(*[]byte)))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "proto" }

// badProtobuf is finding 7: a request whose identity update carries an
// inbox id that is not UTF-8 must be InvalidArgument, not Internal.
func badProtobuf(ctx context.Context, tg target, _ sizes) outcome {
	o := outcome{finding: 7, name: "bad-protobuf", bound: "InvalidArgument"}
	d, err := tg.start(o.name)
	if err != nil {
		return o.fail(err)
	}
	defer d.stop()
	cc, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return o.fail(err)
	}
	defer cc.Close()
	update := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff\xfe")
	env := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), transporttest.Topic(ports.TopicIdentityUpdates, make([]byte, 32)))
	env = protowire.AppendBytes(protowire.AppendTag(env, 4, protowire.BytesType), update)
	body := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), env)
	var out []byte
	err = cc.Invoke(ctx, "/regroup.delivery.v1.Delivery/Publish", &body, &out, grpc.ForceCodecV2(rawCodec{}))
	o.measured = status.Code(err).String()
	if status.Code(err) != codes.InvalidArgument {
		return o.fail(fmt.Errorf("answered %v", err))
	}
	return o
}

// replay is finding 8: a sealed commit-log entry published again and
// again is stored once.
func replay(ctx context.Context, tg target, _ sizes) outcome {
	o := outcome{finding: 8, name: "commit-log-replay", bound: "1 stored envelope"}
	d, err := tg.start(o.name)
	if err != nil {
		return o.fail(err)
	}
	defer d.stop()
	c, err := dial(d.addr, newKey())
	if err != nil {
		return o.fail(err)
	}
	defer c.Close()
	_, priv, _ := ed25519.GenerateKey(nil)
	entry := transporttest.SealedEntry(priv, randomBytes(12), []byte("ciphertext"))
	batch := make([]*backendpb.ClientEnvelope, 100)
	for i := range batch {
		batch[i] = entry
	}
	for i := 0; i < 5; i++ {
		if _, err := c.Publish(ctx, batch); err != nil {
			return o.fail(err)
		}
	}
	n, err := countTopic(ctx, c, entry.GetTargetTopic())
	o.measured = fmt.Sprintf("500 publishes of one entry: %d stored", n)
	if err != nil || n != 1 {
		return o.fail(fmt.Errorf("%d stored: %v", n, err))
	}
	return o
}

// oneIdentity is finding 9: one installation key over many connections
// gets no more subscriptions than the per-identity cap, however many
// connections it opens: regroupd's default of 32 per installation
// (COMP-278).
func oneIdentity(ctx context.Context, tg target, _ sizes) outcome {
	o := outcome{finding: 9, name: "one-identity", bound: "at most 32 subscriptions for one key"}
	d, err := tg.start(o.name)
	if err != nil {
		return o.fail(err)
	}
	defer d.stop()
	key := newKey()
	opened := 0
	for i := 0; i < 40; i++ {
		c, err := dial(d.addr, key)
		if err != nil {
			return o.fail(err)
		}
		defer c.Close()
		for j := 0; j < 4; j++ {
			sub, err := c.Subscribe(ctx, []ports.TopicCursor{{Topic: transporttest.RandomGroupTopic()}})
			if err == nil {
				defer sub.Close()
				opened++
			}
		}
	}
	o.measured = fmt.Sprintf("%d of 160 subscriptions opened over 40 connections of one key", opened)
	if opened > 32 {
		return o.fail(errors.New("the key got more than its cap"))
	}
	return o
}

// dbOutage is finding 6 (PostgreSQL: the database is cut through a
// proxy): an anonymous client must learn nothing about the database.
func dbOutage(ctx context.Context, tg target, _ sizes) outcome {
	o := outcome{finding: 6, name: "database-outage", bound: "the error names no user, database, host or port"}
	if tg.db != "postgres" {
		o.measured = "skipped: cut by closing the store in cmd/regroupd's TestCOMP147 on SQLite"
		return o
	}
	u, err := url.Parse(tg.dsn)
	if err != nil {
		return o.fail(err)
	}
	p, err := newProxy(u.Host)
	if err != nil {
		return o.fail(err)
	}
	defer p.close()
	_, port, _ := net.SplitHostPort(p.addr())
	u.Host = p.addr()
	tg.dsn = u.String()
	d, err := tg.start(o.name)
	if err != nil {
		return o.fail(err)
	}
	defer d.stop()
	c, err := dial(d.addr, nil)
	if err != nil {
		return o.fail(err)
	}
	defer c.Close()
	topic := transporttest.Topic(ports.TopicCommitLog, make([]byte, 32))
	p.cut()
	// The first failures are broken pooled connections; the next ones
	// are failed dials, whose driver text names the database.
	var errs []string
	for i := 0; i < 40 && len(errs) < 5; i++ {
		if _, err := c.Query(ctx, topic, 0, 0); err != nil {
			errs = append(errs, err.Error())
		}
	}
	o.measured = strings.Join(errs, " | ")
	if len(errs) == 0 {
		return o.fail(errors.New("no query failed with the database cut off"))
	}
	for _, e := range errs {
		for _, s := range []string{"user=", u.User.Username(), port, strings.TrimPrefix(u.Path, "/")} {
			if s != "" && strings.Contains(e, s) {
				return o.fail(fmt.Errorf("the client's error names %q", s))
			}
		}
	}
	return o
}

// proxy forwards to a database until cut.
type proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	down  bool
}

func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			up, err := net.Dial("tcp", target)
			if p.down || err != nil {
				c.Close()
				p.mu.Unlock()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *proxy) close() { p.ln.Close(); p.cut() }
