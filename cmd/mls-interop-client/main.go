// Command mls-interop-client serves regroup's MLS engine (adapters/mls) to
// the mlswg interoperability harness over gRPC: the MLSClient service of
// proto/mlsinteroppb/mls_client.proto.
//
// Usage:
//
//	mls-interop-client [-host 127.0.0.1] [-port 50051]
//
// It listens on 127.0.0.1 unless -host says otherwise, and stops on SIGINT
// or SIGTERM. It serves every method of the service, in every cipher suite
// of RFC 9420: joins, commits, PSKs, external joins, external senders and
// joiner-signed proposals, ReInit and branches.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"google.golang.org/grpc"

	"github.com/regroup-mls/regroup/proto/mlsinteroppb"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "mls-interop-client:", err)
		os.Exit(1)
	}
}

// run parses args, serves until ctx ends and reports the listening address
// on out.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mls-interop-client", flag.ContinueOnError)
	host := fs.String("host", "127.0.0.1", "address to listen on")
	port := fs.Int("port", 50051, "TCP port to listen on (0 picks a free one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *port < 0 || *port > 65535 {
		return fmt.Errorf("port %d out of range", *port)
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	mlsinteroppb.RegisterMLSClientServer(srv, newServer())
	fmt.Fprintf(out, "mls-interop-client listening on %s\n", lis.Addr())
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			srv.GracefulStop()
		case <-done:
		}
	}()
	err = srv.Serve(lis)
	close(done)
	return err
}
