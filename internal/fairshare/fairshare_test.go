package fairshare

import (
	"context"
	"testing"
	"time"
)

// COMP-321: a principal that holds its whole share waits on it; another
// principal still gets bytes from the budget at once.
func TestCOMP321_FullShareWaitsAlone(t *testing.T) {
	b := New(100, 10)
	slow := []Principal{{Key: "addr:a", Kind: "address", Share: 30}}
	h, err := b.Acquire(context.Background(), slow, 30)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(ctx, slow, 10); err == nil {
		t.Fatal("a principal beyond its share was granted")
	}
	other, err := b.Acquire(context.Background(), []Principal{{Key: "addr:b", Kind: "address", Share: 30}}, 30)
	if err != nil {
		t.Fatal(err)
	}
	if b.Waits()["address"] != 1 || b.InUse() != 60 {
		t.Fatalf("waits %v, in use %d", b.Waits(), b.InUse())
	}
	h.Close()
	other.Close()
	if b.InUse() != 0 || len(b.shares) != 0 {
		t.Fatalf("in use %d, %d shares remembered after every hold closed", b.InUse(), len(b.shares))
	}
}

// An oversize hold proceeds alone; partial releases add up.
func TestBudget_OversizeAndPartialRelease(t *testing.T) {
	b := New(10, 5)
	h, err := b.Acquire(context.Background(), nil, 25)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		h2, err := b.Acquire(context.Background(), nil, 5)
		if err == nil {
			h2.Close()
		}
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("granted while an oversize hold fills the budget")
	case <-time.After(10 * time.Millisecond):
	}
	h.Release(10)
	h.Release(10)
	h.Release(10) // more than held: clamps
	<-done
	h.Close()
	if b.InUse() != 0 {
		t.Fatalf("in use %d", b.InUse())
	}
}
