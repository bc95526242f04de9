package grpctransport_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/ports"
)

// A client connects to a regroupd with Dial, proving its installation key
// on each connection. Here the delivery service runs in-process on
// 127.0.0.1, as regroupd serves it; against a real regroupd the address is
// its -listen address and TLS is set when it runs with -tls-cert.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, stop := startDeliveryService(ctx)
	defer stop()

	// The installation's signing key; a client built by regroup.NewNetworked
	// uses the one its store holds.
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		log.Fatal(err)
	}
	c, err := grpctransport.Dial(addr, &grpctransport.ClientOptions{
		InstallationKey: key,
		TLS:             nil, // &tls.Config{...} for a regroupd started with -tls-cert; nil is plain text
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// A group's topic is its kind byte, then the group id.
	topic := append([]byte{byte(ports.TopicGroupMessages)}, make([]byte, 32)...)
	n, err := c.HighestSequenceID(ctx, topic)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("highest sequence id of an empty topic:", n)
	// Output: highest sequence id of an empty topic: 0
}

// startDeliveryService serves a delivery service on a SQLite file in a
// temporary directory over gRPC on 127.0.0.1 at a free port, and returns
// its address and a function that stops it.
func startDeliveryService(ctx context.Context) (string, func()) {
	dir, err := os.MkdirTemp("", "regroup-dial-example-")
	if err != nil {
		log.Fatal(err)
	}
	svc, closeService, err := regroup.OpenEmbeddedService(ctx, filepath.Join(dir, "delivery.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpctransport.NewServer(svc, nil)
	gs := srv.GRPCServer()
	go gs.Serve(srv.Listener(lis))
	return lis.Addr().String(), func() {
		srv.Shutdown()
		gs.Stop()
		closeService()
		os.RemoveAll(dir)
	}
}
