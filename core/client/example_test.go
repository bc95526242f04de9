package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/client"
)

// A client is built by an injector of the root package: NewEmbedded keeps
// its state in a SQLite file and reaches an in-process delivery service
// (NewNetworked reaches a regroupd). Alice creates a group with Bob, sends
// to it, and Bob reads the message after a sync.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "regroup-client-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	svc, closeService, err := regroup.OpenEmbeddedService(ctx, filepath.Join(dir, "delivery.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer closeService()
	alice, closeAlice, err := regroup.NewEmbedded(ctx, regroup.EmbeddedConfig{Dir: filepath.Join(dir, "alice"), Service: svc})
	if err != nil {
		log.Fatal(err)
	}
	defer closeAlice()
	bob, closeBob, err := regroup.NewEmbedded(ctx, regroup.EmbeddedConfig{Dir: filepath.Join(dir, "bob"), Service: svc})
	if err != nil {
		log.Fatal(err)
	}
	defer closeBob()

	group, err := alice.CreateGroup(ctx, client.GroupOptions{Name: "ops", Members: []string{bob.InboxID()}})
	if err != nil {
		log.Fatal(err)
	}
	members, err := group.Members(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("installations in the group:", len(members))
	if _, err := group.Send(ctx, []byte("hello, bob")); err != nil {
		log.Fatal(err)
	}

	// A long-running program calls bob.Start(ctx) and reads bob.Events().
	if err := bob.SyncAll(ctx); err != nil {
		log.Fatal(err)
	}
	bobGroup, err := bob.Conversation(ctx, group.ID())
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := bobGroup.Messages(ctx, 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("bob read %q\n", m.Content)
	}
	// Output:
	// installations in the group: 2
	// bob read "hello, bob"
}
