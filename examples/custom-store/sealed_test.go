package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// TestBlobsAreSealedAtRest reads the blobs table behind the decorator:
// the stored bytes are not the value, and a value moved to another key or
// changed on disk does not open.
func TestBlobsAreSealedAtRest(t *testing.T) {
	ctx := t.Context()
	app, err := OpenAppDB(ctx, filepath.Join(t.TempDir(), "app.db"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSealedStore(app.Store, testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	secret := []byte("group epoch secret")
	if err := s.Tx(ctx, func(tx ports.Tx) error {
		if err := tx.Blobs().Put(ctx, "mls", "a", secret); err != nil {
			return err
		}
		return tx.Blobs().Put(ctx, "mls", "b", secret)
	}); err != nil {
		t.Fatal(err)
	}
	var rows []struct{ BlobKey, Value []byte }
	if err := app.DB.Table("blobs").Select("blob_key, value").Order("blob_key").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows in blobs, want 2", len(rows))
	}
	for _, r := range rows {
		if bytes.Contains(r.Value, secret) {
			t.Fatalf("blob %s is stored in the clear", r.BlobKey)
		}
	}
	if bytes.Equal(rows[0].Value, rows[1].Value) {
		t.Fatal("two seals of one value are equal: the nonce is not fresh")
	}
	// b's ciphertext under key a: the additional data binds it to b.
	if err := app.DB.Table("blobs").Where("blob_key = ?", []byte("a")).Update("value", rows[1].Value).Error; err != nil {
		t.Fatal(err)
	}
	err = s.Tx(ctx, func(tx ports.Tx) error {
		got, err := tx.Blobs().Get(ctx, "mls", "b")
		if err != nil || !bytes.Equal(got, secret) {
			t.Errorf("Get(b) = %q, %v; want the secret", got, err)
		}
		_, err = tx.Blobs().Get(ctx, "mls", "a")
		return err
	})
	if !errors.Is(err, ErrBlobTampered) {
		t.Fatalf("a moved blob: %v, want ErrBlobTampered", err)
	}
}

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), t.TempDir(), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"start 1: 1 conversations, 1 notes", "start 2: 2 conversations, 2 notes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
