// Command custom-store runs a regroup client on a store of the
// application's own: regroup's tables live in the application's SQLite
// database, opened through the application's gorm connection and
// gormstore.New, and a decorator (SealedStore) encrypts every blob — the
// MLS group secrets and identity keys — at rest under a key the
// application keeps in a file of its own.
//
// The test file runs ports/storetest against the decorated store: the
// contract suite decides whether a store of your own keeps the promises
// the specs depend on. docs/adapter-guide.md walks through it.
//
//	go run ./examples/custom-store            # in a temporary directory
//	go run ./examples/custom-store -dir app   # keeps app/app.db and app/blob.key
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/delivery"
)

func main() {
	dir := flag.String("dir", "", "directory of app.db and blob.key (default: a temporary one, removed at exit)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if *dir == "" {
		tmp, err := os.MkdirTemp("", "regroup-custom-store-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		*dir = tmp
	}
	if err := run(ctx, *dir, os.Stdout); err != nil {
		log.Print(err)
		cancel()
		os.Exit(1)
	}
}

// run starts a client on the sealed application database twice — the
// second start finds the identity the first one stored — and prints what
// it did.
func run(ctx context.Context, dir string, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key, err := loadOrCreateKey(filepath.Join(dir, "blob.key"))
	if err != nil {
		return err
	}
	svc, closeService, err := regroup.OpenEmbeddedService(ctx, filepath.Join(dir, "delivery.db"), nil)
	if err != nil {
		return err
	}
	defer closeService()

	var inbox string
	for start := 1; start <= 2; start++ {
		app, err := OpenAppDB(ctx, filepath.Join(dir, "app.db"))
		if err != nil {
			return err
		}
		store, err := NewSealedStore(app.Store, key)
		if err != nil {
			app.Store.Close()
			return err
		}
		c, closeClient, err := newClient(ctx, store, svc)
		if err != nil {
			store.Close()
			return err
		}
		if start == 2 && c.InboxID() != inbox {
			err = fmt.Errorf("restart loaded inbox %s, want %s", c.InboxID(), inbox)
		} else {
			inbox = c.InboxID()
			err = useClient(ctx, c, app, start, out)
		}
		closeClient()
		store.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "start %d: inbox %.8s, %d blobs sealed, %d opened\n", start, inbox, store.Sealed.Load(), store.Opened.Load())
	}
	return nil
}

// newClient builds a client on the application's store: the store is one
// field of the injector's configuration.
func newClient(ctx context.Context, store *SealedStore, svc *delivery.Service) (*client.Client, func(), error) {
	return regroup.NewEmbedded(ctx, regroup.EmbeddedConfig{Store: store, Service: svc})
}

// useClient writes a note to the application's own table and a message to
// a group of one, in the same database.
func useClient(ctx context.Context, c *client.Client, app *AppDB, start int, out io.Writer) error {
	note := Note{Text: fmt.Sprintf("start %d", start)}
	if err := app.DB.WithContext(ctx).Create(&note).Error; err != nil {
		return fmt.Errorf("write note: %w", err)
	}
	group, err := c.CreateGroup(ctx, client.GroupOptions{Name: "notes"})
	if err != nil {
		return err
	}
	if _, err := group.Send(ctx, []byte(note.Text)); err != nil {
		return err
	}
	convs, err := c.Conversations(ctx, nil)
	if err != nil {
		return err
	}
	var notes int64
	if err := app.DB.WithContext(ctx).Model(&Note{}).Count(&notes).Error; err != nil {
		return err
	}
	fmt.Fprintf(out, "start %d: %d conversations, %d notes in the application's table\n", start, len(convs), notes)
	return nil
}

// loadOrCreateKey reads the 32-byte blob key at path, creating it (mode
// 0600) on first use.
func loadOrCreateKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		return key, os.WriteFile(path, key, 0o600)
	}
	if err != nil {
		return nil, err
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("%s holds %d bytes, want 32", path, len(key))
	}
	return key, nil
}
