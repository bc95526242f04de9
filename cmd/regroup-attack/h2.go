package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// h2conn is a raw HTTP/2 connection (golang.org/x/net/http2's framer, no
// gRPC client) that announced a receive window of zero: the server may
// send headers but no response body.
type h2conn struct {
	nc   net.Conn
	mu   sync.Mutex
	fr   *http2.Framer
	done chan struct{}
}

// zeroWindowConn connects to addr, sets its stream window to zero, and
// sends streams Query calls of topic. It acknowledges the server's
// settings and pings, and never opens a window.
func zeroWindowConn(addr string, topic []byte, streams int) (*h2conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c := &h2conn{nc: nc, fr: http2.NewFramer(nc, nc), done: make(chan struct{})}
	fail := func(err error) (*h2conn, error) { nc.Close(); return nil, err }
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		return fail(err)
	}
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		return fail(err)
	}
	go c.read()
	req, _ := proto.Marshal(&deliverypb.QueryRequest{Topic: topic})
	body := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(req)))
	body = append(body, req...)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := 0; i < streams; i++ {
		hb.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", deliverypb.Delivery_Query_FullMethodName},
			{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		id := uint32(2*i + 1)
		c.mu.Lock()
		err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
		if err == nil {
			err = c.fr.WriteData(id, true, body)
		}
		c.mu.Unlock()
		if err != nil {
			return fail(err)
		}
	}
	return c, nil
}

func (c *h2conn) read() {
	defer close(c.done)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		c.mu.Lock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.fr.WritePing(true, f.Data)
			}
		case *http2.GoAwayFrame:
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
}

// wait returns when the server closed the connection.
func (c *h2conn) wait() { <-c.done }

func (c *h2conn) close() { c.nc.Close() }

// identityAdd returns an identity-update envelope adding a fresh
// installation to the inbox of recovery.
func identityAdd(recovery ed25519.PrivateKey) (*backendpb.ClientEnvelope, error) {
	_, inst, _ := ed25519.GenerateKey(nil)
	u, err := identity.NewAdd(recovery, inst, time.Now().UnixNano())
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(recovery.Public().(ed25519.PublicKey))
	return &backendpb.ClientEnvelope{TargetTopic: transporttest.Topic(ports.TopicIdentityUpdates, sum[:]),
		Payload: &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: u}}, nil
}
