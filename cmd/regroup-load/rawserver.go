package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// rawServer is the fan-out run's reference: a gRPC server with regroupd's
// transport settings (HTTP/2 windows, streams per connection) that does
// nothing but write. Subscribe registers the stream; Publish encodes the
// published envelope once as a subscription message and hands those same
// bytes to every registered stream, whose handler writes them (a
// grpc.PreparedMsg: no store, no read, no per-stream encoding). It runs
// as its own process (regroup-load -raw-server), as regroupd does.
type rawServer struct {
	deliverypb.UnimplementedDeliveryServer

	mu      sync.Mutex
	streams map[*rawStream]struct{}
	seq     atomic.Uint64
}

type rawStream struct {
	ss  grpc.ServerStream
	out chan *grpc.PreparedMsg
}

func (r *rawServer) Subscribe(_ *deliverypb.SubscribeRequest, stream grpc.ServerStreamingServer[deliverypb.SubscribeResponse]) error {
	if err := stream.SendHeader(metadata.Pairs(subscribedHeader, "1")); err != nil {
		return err
	}
	st := &rawStream{ss: stream, out: make(chan *grpc.PreparedMsg, 16)}
	r.mu.Lock()
	r.streams[st] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.streams, st)
		r.mu.Unlock()
	}()
	for {
		select {
		case m := <-st.out:
			if err := stream.SendMsg(m); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return nil
		}
	}
}

// Publish hands each envelope, as one subscription message, to every
// stream and answers once all have it queued.
func (r *rawServer) Publish(_ context.Context, req *deliverypb.PublishRequest) (*deliverypb.PublishResponse, error) {
	r.mu.Lock()
	streams := make([]*rawStream, 0, len(r.streams))
	for st := range r.streams {
		streams = append(streams, st)
	}
	r.mu.Unlock()
	if len(streams) == 0 {
		return nil, errors.New("no subscribers")
	}
	resp := &deliverypb.PublishResponse{}
	for _, e := range req.GetEnvelopes() {
		id := r.seq.Add(1)
		msg := &deliverypb.SubscribeResponse{Envelopes: []*backendpb.OriginatorEnvelope{{
			SequenceId: id, ServerTimestampNs: time.Now().UnixNano(), Envelope: e}}}
		pm := new(grpc.PreparedMsg)
		if err := pm.Encode(streams[0].ss, msg); err != nil {
			return nil, err
		}
		for _, st := range streams {
			st.out <- pm
		}
		resp.SequenceIds = append(resp.SequenceIds, id)
	}
	return resp, nil
}

// newRawGRPC returns a gRPC server with regroupd's default transport
// settings serving a rawServer.
func newRawGRPC() *grpc.Server {
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(16<<20),
		grpc.MaxConcurrentStreams(32),
		grpc.InitialWindowSize(64<<10),
		grpc.InitialConnWindowSize(1<<20),
	)
	deliverypb.RegisterDeliveryServer(gs, &rawServer{streams: map[*rawStream]struct{}{}})
	return gs
}

// serveRaw is the -raw-server mode: it prints its address on stdout and
// serves until stdin closes.
func serveRaw() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gs := newRawGRPC()
	fmt.Println(ln.Addr().String())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		gs.Stop()
	}()
	return gs.Serve(ln)
}

// rawProcess is a running -raw-server child.
type rawProcess struct {
	cmd  *exec.Cmd
	addr string
	stop func()
}

// startRaw runs this program again as the reference server.
func startRaw() (*rawProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-raw-server")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("raw server: %w", err)
	}
	return &rawProcess{cmd: cmd, addr: strings.TrimSpace(line), stop: func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}}, nil
}
