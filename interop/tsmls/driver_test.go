package tsmls_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/interop/tsmls"
)

// TestDriverErrors checks the driver client's error classes: a request
// ts-mls rejects is ErrDriver and leaves the driver usable; a context that
// ended before the answer is ErrClosed; a finished context of an earlier
// call never stops the driver.
func TestDriverErrors(t *testing.T) {
	d := startDriver(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := d.Call(ctx, "noSuchOp", nil, nil); !errors.Is(err, tsmls.ErrDriver) {
		t.Fatalf("unknown op: %v, want ErrDriver", err)
	}
	if _, err := d.Join(ctx, &tsmls.KeyPackage{Handle: "missing"}, []byte{0}); !errors.Is(err, tsmls.ErrDriver) {
		t.Fatalf("join with an unknown key package: %v, want ErrDriver", err)
	}
	for range 20 {
		short, stop := context.WithCancel(ctx)
		if _, err := d.NewKeyPackage(short, []byte("x")); err != nil {
			t.Fatal(err)
		}
		stop()
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := d.CreateGroup(ctx, []byte("g"), []byte("a")); err != nil {
		t.Fatalf("driver after finished contexts: %v", err)
	}
	done, stop := context.WithCancel(ctx)
	stop()
	if _, err := d.CreateGroup(done, []byte("g"), []byte("a")); !errors.Is(err, tsmls.ErrClosed) {
		t.Fatalf("call under an ended context: %v, want ErrClosed", err)
	}
}
