// Package membudget bounds the memory held by in-flight origin fetches, with
// demand reads served before prefetch: prefetch may only use the budget while
// a reserve is left for clients that are waiting.
package membudget

import (
	"context"
	"fmt"
	"sync"
)

// Budget is a counting semaphore over bytes. Safe for concurrent use.
type Budget struct {
	total   int64
	reserve int64 // prefetch leaves this much for demand reads

	// mu protects used and waiters.
	mu      sync.Mutex
	used    int64
	waiters []*waiter
}

type waiter struct {
	n        int64
	prefetch bool
	ready    chan struct{}
}

// New returns a budget of total bytes of which reserve is kept for demand.
func New(total, reserve int64) *Budget {
	if total <= 0 || reserve < 0 || reserve >= total {
		panic(fmt.Sprintf("membudget: bad sizes total=%d reserve=%d", total, reserve))
	}
	return &Budget{total: total, reserve: reserve}
}

func (b *Budget) fitsLocked(n int64, prefetch bool) bool {
	limit := b.total
	if prefetch {
		limit -= b.reserve
	}
	// A request larger than the whole budget is let through alone so that
	// it cannot wait forever.
	return b.used+n <= limit || (b.used == 0 && n > limit)
}

// Acquire blocks until n bytes are available or ctx ends. Demand requests
// are granted in FIFO order; prefetch requests also wait for the reserve.
func (b *Budget) Acquire(ctx context.Context, n int64, prefetch bool) error {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.fitsLocked(n, prefetch) {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, prefetch: prefetch, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.grantLocked() // a waiting prefetch must not hold back this demand
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Granted while we were giving up: hand it back.
			b.used -= n
			b.grantLocked()
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.grantLocked()
		}
		b.mu.Unlock()
		return ctx.Err()
	}
}

// Release returns n bytes.
func (b *Budget) Release(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		b.mu.Unlock()
		panic("membudget: released more than acquired")
	}
	b.grantLocked()
	b.mu.Unlock()
}

// Used returns the bytes currently held.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Waiting returns the bytes demand requests wait for.
func (b *Budget) Waiting() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	for _, w := range b.waiters {
		if !w.prefetch {
			n += w.n
		}
	}
	return n
}

// grantLocked wakes waiters in order. A prefetch waiter that does not fit does
// not block demand waiters behind it.
func (b *Budget) grantLocked() {
	kept := b.waiters[:0]
	blocked := false
	for _, w := range b.waiters {
		if !blocked && b.fitsLocked(w.n, w.prefetch) {
			b.used += w.n
			close(w.ready)
			continue
		}
		if !w.prefetch {
			blocked = true // keep FIFO among demand requests
		}
		kept = append(kept, w)
	}
	for i := len(kept); i < len(b.waiters); i++ {
		b.waiters[i] = nil
	}
	b.waiters = kept
}
