package main

import (
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
)

// proxy forwards 127.0.0.1 connections to target until cut, which closes
// every connection and refuses new ones: a database outage.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	down   bool
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.down {
				c.Close()
				p.mu.Unlock()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
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
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// COMP-147 (finding 6): when the database fails, an anonymous client is
// told "unavailable" and nothing about the database (driver text with
// its user, database name, host or port, or a file path); the server
// log keeps the details under the reference the client's message names.
func TestCOMP147_DatabaseOutageAnswersUnavailable(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			var secrets []string
			var cut func()
			srv, cfg := startWith(t, db, func(c *config) {
				if db == "postgres" {
					u, err := url.Parse(c.Database)
					if err != nil {
						t.Fatal(err)
					}
					p := newProxy(t, u.Host)
					u.Host = p.ln.Addr().String()
					c.Database = u.String()
					cut = p.cut
					_, port, _ := net.SplitHostPort(p.ln.Addr().String())
					secrets = []string{"user=", u.User.Username(), port, strings.TrimPrefix(u.Path, "/"), "pgx", "dial"}
				} else {
					secrets = []string{c.Database, "sqlite", "closed"}
				}
			})
			if db == "sqlite" {
				cut = func() { srv.store.Close() }
			}
			anon := dialKey(t, cfg.Listen, nil)
			ctx := testCtx(t)
			topic := transporttest.Topic(ports.TopicCommitLog, make([]byte, 32))
			if _, err := anon.Query(ctx, topic, 0, 0); err != nil {
				t.Fatalf("Query before the outage: %v", err)
			}
			cut()
			// The first failures may be broken pooled connections; later
			// ones are failed dials, whose driver text names the database.
			var errs []error
			for i := 0; i < 40 && len(errs) < 5; i++ {
				if _, err := anon.Query(ctx, topic, 0, 0); err != nil {
					errs = append(errs, err)
				}
			}
			if len(errs) == 0 {
				t.Fatal("no Query failed during the outage")
			}
			for _, err := range errs {
				if !errors.Is(err, ports.ErrUnavailable) {
					t.Fatalf("Query during the outage = %v, want ErrUnavailable", err)
				}
				for _, s := range secrets {
					if s != "" && strings.Contains(err.Error(), s) {
						t.Errorf("the client's error %q names %q", err, s)
					}
				}
				if !strings.Contains(err.Error(), "unavailable (ref ") {
					t.Errorf("the client's error %q carries no log reference", err)
				}
			}
			if srv.rpc.Stats().HiddenErrors == 0 {
				t.Error("hidden error not counted")
			}
		})
	}
}

// rawCodec sends a request's bytes as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string     { return "proto" }
func (rawCodec) String() string   { return "raw" }
func ensureCodec() encoding.Codec { return rawCodec{} }

func rawConn(t *testing.T, addr string) *grpc.ClientConn {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// COMP-148 (finding 7): a request that does not decode — a string field
// that is not UTF-8, truncated protobuf — is answered InvalidArgument,
// never Internal, on every method, unary and streaming.
func TestCOMP148_UndecodableRequestInvalidArgument(t *testing.T) {
	t.Parallel()
	// PublishRequest{envelopes: [ClientEnvelope{target_topic: 0x02 ||
	// 32 bytes, identity_update: {inbox_id: "\xff\xfe"}}]}.
	update := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff\xfe")
	env := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), transporttest.Topic(ports.TopicIdentityUpdates, make([]byte, 32)))
	env = protowire.AppendBytes(protowire.AppendTag(env, 4, protowire.BytesType), update)
	badUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), env)
	truncated := []byte{0x0a, 0x40, 0x01}
	for _, db := range databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			_, cfg := startWith(t, db, nil)
			cc := rawConn(t, cfg.Listen)
			ctx := testCtx(t)
			for name, c := range map[string]struct {
				method string
				body   []byte
			}{
				"Publish, identity update inbox_id not UTF-8": {"Publish", badUTF8},
				"Publish, truncated":                          {"Publish", truncated},
				"Query, truncated":                            {"Query", truncated},
				"Authenticate, truncated":                     {"Authenticate", truncated},
			} {
				var out []byte
				err := cc.Invoke(ctx, "/regroup.delivery.v1.Delivery/"+c.method, &c.body, &out, grpc.ForceCodec(ensureCodec()))
				if status.Code(err) != codes.InvalidArgument {
					t.Errorf("%s: %v, want InvalidArgument", name, err)
				}
			}
			st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/regroup.delivery.v1.Delivery/Subscribe", grpc.ForceCodec(ensureCodec()))
			if err != nil {
				t.Fatal(err)
			}
			if err := st.SendMsg(&truncated); err != nil {
				t.Fatal(err)
			}
			st.CloseSend()
			var out []byte
			if err := st.RecvMsg(&out); status.Code(err) != codes.InvalidArgument {
				t.Errorf("Subscribe, truncated: %v, want InvalidArgument", err)
			}
		})
	}
}
