package regroup_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/core/client"
)

// NewEmbedded builds a client whose state lives in a directory and whose
// delivery service runs in this process; two clients sharing one service
// chat.
func ExampleNewEmbedded() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "regroup-example-")
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
	if _, err := group.Send(ctx, []byte("hello")); err != nil {
		log.Fatal(err)
	}
	if err := bob.SyncAll(ctx); err != nil {
		log.Fatal(err)
	}
	joined, err := bob.Conversation(ctx, group.ID())
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := joined.Messages(ctx, 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("bob read %q\n", msgs[len(msgs)-1].Content)
	// Output: bob read "hello"
}

// A client on a store of the application's own: any ports.Store that
// passes ports/storetest is one field of the configuration. Here it is
// regroup's SQLite adapter opened by hand; examples/custom-store uses the
// application's gorm database behind an encrypting decorator. The
// application opens and closes its store, and runs one client on it at a
// time.
func ExampleEmbeddedConfig_store() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "regroup-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), &sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	c, cleanup, err := regroup.NewEmbedded(ctx, regroup.EmbeddedConfig{Store: store, Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer cleanup()
	fmt.Println("inbox id of", len(c.InboxID()), "hex digits")
	// Output: inbox id of 64 hex digits
}
