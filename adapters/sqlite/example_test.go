package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
)

// Open creates the file and its tables on first use; later opens migrate
// what a newer build added. Everything happens in transactions.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "regroup-sqlite-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := sqlite.Open(ctx, filepath.Join(dir, "client.db"), nil)
	if err != nil {
		log.Fatal(err) // wraps gormstore.ErrSchemaTooNew for a file a newer build migrated
	}
	defer store.Close()

	err = store.Tx(ctx, func(tx ports.Tx) error {
		return tx.Blobs().Put(ctx, "app", "greeting", []byte("hello"))
	})
	if err != nil {
		log.Fatal(err)
	}
	var v []byte
	err = store.Tx(ctx, func(tx ports.Tx) error {
		v, err = tx.Blobs().Get(ctx, "app", "greeting")
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", v)
	// Output: hello
}
