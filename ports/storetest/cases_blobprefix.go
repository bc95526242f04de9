package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// COMP-573: a store whose Blobs implement [ports.BlobPrefixReader]
// returns the first n bytes of the value Get returns — bytes, not
// characters: the values hold every byte value, a NUL and invalid UTF-8
// among them — all of a shorter value, none for n <= 0, an empty value
// for an empty one, and ErrNotFound for none; it reads the transaction's
// own writes, not those of a transaction rolled back, and what it
// returns is the caller's.
func testBlobPrefix(t *testing.T, h Harness) {
	s := open(t, h)
	var has bool
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		_, has = tx.Blobs().(ports.BlobPrefixReader)
		return nil
	})
	if !has {
		t.Skip("the store's Blobs do not implement ports.BlobPrefixReader (optional)")
	}
	large := pattern(2<<20, 9) // a staged Welcome of 10,000 members is about this size
	large[0], large[1], large[2] = 0x82, 0x00, 0xff
	utf8ish := []byte("é\x00\xc3(abc")
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for k, v := range map[string][]byte{"large": large, "text-like": utf8ish, "empty": {}, "nil": nil} {
			if err := tx.Blobs().Put(ctx, "mls.welcome", k, v); err != nil {
				return err
			}
		}
		return nil
	})
	prefix := func(ctx context.Context, tx ports.Tx, k string, n int) ([]byte, error) {
		return tx.Blobs().(ports.BlobPrefixReader).GetPrefix(ctx, "mls.welcome", k, n)
	}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, c := range []struct {
			key  string
			n    int
			want []byte
		}{
			{"large", 29, large[:29]},     // a staged Welcome's header
			{"large", 1, large[:1]},       // one byte
			{"large", 0, []byte{}},        // none asked
			{"large", -3, []byte{}},       // none asked
			{"large", len(large), large},  // exactly all
			{"text-like", 3, utf8ish[:3]}, // bytes, not characters: half of a character, then NUL
			{"text-like", 100, utf8ish},   // a shorter value whole
			{"empty", 29, []byte{}},       // an empty value is a value
			{"nil", 29, []byte{}},         // stored as nil: empty
		} {
			got, err := prefix(ctx, tx, c.key, c.n)
			if err != nil {
				return fmt.Errorf("GetPrefix(%s, %d): %w", c.key, c.n, err)
			}
			if got == nil || !bytes.Equal(got, c.want) {
				t.Errorf("GetPrefix(%s, %d) = %d bytes %x…, want %d bytes %x…", c.key, c.n, len(got), head(got), len(c.want), head(c.want))
			}
		}
		if _, err := prefix(ctx, tx, "absent", 29); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("GetPrefix of an absent key: %v, want ErrNotFound", err)
		}
		if _, err := tx.Blobs().(ports.BlobPrefixReader).GetPrefix(ctx, "mls.other", "large", 29); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("GetPrefix in another namespace: %v, want ErrNotFound", err)
		}
		// The caller's to change: a second read is not affected.
		got, err := prefix(ctx, tx, "large", 29)
		if err != nil {
			return err
		}
		got[0] ^= 0xff
		if again, err := prefix(ctx, tx, "large", 29); err != nil || again[0] != large[0] {
			t.Errorf("GetPrefix after the caller changed what it returned: %x, %v", head(again), err)
		}
		return nil
	})
	// The transaction's own writes, and no rolled-back one.
	replaced := pattern(64, 5)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if err := tx.Blobs().Put(ctx, "mls.welcome", "large", replaced); err != nil {
			return err
		}
		if got, err := prefix(ctx, tx, "large", 29); err != nil || !bytes.Equal(got, replaced[:29]) {
			t.Errorf("GetPrefix after a Put in the same transaction = %x, %v; want %x", head(got), err, replaced[:29])
		}
		return nil
	})
	errRollback := errors.New("roll back")
	err := s.Tx(ctxFor(t), func(tx ports.Tx) error {
		if err := tx.Blobs().Put(ctxFor(t), "mls.welcome", "large", large); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("rolled-back tx: %v", err)
	}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if got, err := prefix(ctx, tx, "large", 29); err != nil || !bytes.Equal(got, replaced[:29]) {
			t.Errorf("GetPrefix after a rolled-back Put = %x, %v; want the committed %x", head(got), err, replaced[:29])
		}
		if err := tx.Blobs().Delete(ctx, "mls.welcome", "large"); err != nil {
			return err
		}
		if _, err := prefix(ctx, tx, "large", 29); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("GetPrefix after Delete: %v, want ErrNotFound", err)
		}
		return nil
	})
}

// head returns at most the first 8 bytes of b, for messages.
func head(b []byte) []byte { return b[:min(len(b), 8)] }
