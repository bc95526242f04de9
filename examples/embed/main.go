// Command embed is the program of the README's "Embedding regroup": two
// installations on one machine create a group, exchange a message and
// print their fork state.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/client"
)

func main() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "regroup-embed-")
	check(err)
	defer os.RemoveAll(dir)
	// One in-process delivery service; each client keeps its own SQLite file.
	svc, closeService, err := regroup.OpenEmbeddedService(ctx, filepath.Join(dir, "delivery.db"), nil)
	check(err)
	defer closeService()
	alice, closeAlice, err := regroup.NewEmbedded(ctx, regroup.EmbeddedConfig{Dir: filepath.Join(dir, "alice"), Service: svc})
	check(err)
	defer closeAlice()
	bob, closeBob, err := regroup.NewEmbedded(ctx, regroup.EmbeddedConfig{Dir: filepath.Join(dir, "bob"), Service: svc})
	check(err)
	defer closeBob()

	group, err := alice.CreateGroup(ctx, client.GroupOptions{Name: "ops", Members: []string{bob.InboxID()}})
	check(err)
	_, err = group.Send(ctx, []byte("hello, bob"))
	check(err)

	check(bob.SyncAll(ctx)) // a long-running program calls bob.Start(ctx) and reads bob.Events()
	bobGroup, err := bob.Conversation(ctx, group.ID())
	check(err)
	msgs, err := bobGroup.Messages(ctx, 0, 0)
	check(err)
	for _, m := range msgs {
		fmt.Printf("bob read %q from inbox %.8s\n", m.Content, m.SenderInbox)
	}
	check(alice.SyncAll(ctx)) // publishes and reads the commit log
	st, err := group.ForkState(ctx)
	check(err)
	fmt.Println("alice's fork state:", st.State)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
