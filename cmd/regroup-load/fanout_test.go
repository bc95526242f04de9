package main

import (
	"net"
	"os"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// TestFanoutDeliversEveryStreamOnce runs the fan-out's client side
// against the in-process reference server: every stream must receive each
// round's envelope exactly once, and a round reports its figures.
func TestFanoutDeliversEveryStreamOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := newRawGRPC()
	go gs.Serve(ln)
	defer gs.Stop()
	topic := make([]byte, 33)
	topic[0] = byte(ports.TopicGroupMessages)
	fp := fanoutParams{subs: 50, conns: 7, bytes: 100 << 10, rounds: 1}
	ft, err := connectFan(ln.Addr().String(), "raw", false, fp, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer ft.close()
	ft.pid = os.Getpid()
	if len(ft.conns) != fp.conns+1 {
		t.Fatalf("%d connections, want %d streams' and a publisher's", len(ft.conns), fp.conns+1)
	}
	for id := uint64(1); id <= 3; id++ {
		res, err := ft.publish(id)
		if err != nil {
			t.Fatalf("round %d: %v", id, err)
		}
		if res.last <= 0 || res.p50 > res.last || res.mem.rss <= 0 {
			t.Fatalf("round %d: implausible figures %+v", id, res)
		}
	}
}

func TestProcStatusReadsOwnRSS(t *testing.T) {
	rss, ok := procStatus(os.Getpid(), "VmRSS:")
	if !ok || rss < 1<<20 {
		t.Fatalf("VmRSS of this process: %d, %v", rss, ok)
	}
}
