package cache

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hepcache/hepcache/internal/eventually"
)

func TestDiskQueueRunsInOrderOnAtMostMax(t *testing.T) {
	before := runtime.NumGoroutine()
	q := newDiskQueue(3)
	release := make(chan struct{})
	var running, peak atomic.Int32
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		q.do(func() {
			defer wg.Done()
			r := running.Add(1)
			for {
				p := peak.Load()
				if r <= p || peak.CompareAndSwap(p, r) {
					break
				}
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			<-release
			running.Add(-1)
		})
	}
	// 50 jobs queued, 3 started, none finished: the others wait without a
	// goroutine each.
	eventually.True(t, func() bool { return running.Load() == 3 }, "3 jobs running")
	if g := runtime.NumGoroutine() - before; g > 3 {
		t.Fatalf("%d goroutines for 50 queued jobs, want at most 3", g)
	}
	close(release)
	wg.Wait()
	if p := peak.Load(); p != 3 {
		t.Fatalf("at most %d jobs ran at once, want 3", p)
	}
	// Started first in, first out (the three drainers may finish a job's
	// append in any order, so compare with a window of 3).
	for k, i := range order {
		if i < k-2 || i > k+2 {
			t.Fatalf("job %d started %dth: not first in, first out (%v)", i, k, order)
		}
	}
	eventually.True(t, func() bool { return runtime.NumGoroutine() <= before }, "drainers exit when the queue is empty")
}
