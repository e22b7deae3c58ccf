package membudget

import (
	"context"
	"testing"
)

func TestDemandBeforePrefetch(t *testing.T) {
	b := New(100, 30)
	ctx := context.Background()
	if err := b.Acquire(ctx, 70, true); err != nil {
		t.Fatal(err)
	}
	// Prefetch is over its share now; demand still fits in the reserve.
	pf := make(chan error, 1)
	go func() { pf <- b.Acquire(ctx, 10, true) }()
	if err := b.Acquire(ctx, 30, false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pf:
		t.Fatal("prefetch granted while only the reserve was free")
	default:
	}
	b.Release(70)
	if err := <-pf; err != nil {
		t.Fatal(err)
	}
	if got := b.Used(); got != 40 {
		t.Fatalf("used=%d want 40", got)
	}
}

func TestCancelReturnsCapacity(t *testing.T) {
	b := New(10, 0)
	ctx := context.Background()
	if err := b.Acquire(ctx, 10, false); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Acquire(cctx, 5, false) }()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("acquire after cancel succeeded while budget was full")
	}
	b.Release(10)
	if got := b.Used(); got != 0 {
		t.Fatalf("used=%d want 0 after cancel and release", got)
	}
}

func TestOversizeRequestProceedsAlone(t *testing.T) {
	b := New(10, 2)
	if err := b.Acquire(context.Background(), 50, false); err != nil {
		t.Fatal(err)
	}
	b.Release(50)
}
