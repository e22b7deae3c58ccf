package cache

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hepcache/hepcache/internal/eventually"
)

func TestDiskQueueRunsOnAtMostMax(t *testing.T) {
	before := runtime.NumGoroutine()
	q := newDiskQueue(3)
	release := make(chan struct{})
	var running, peak atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
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
	eventually.True(t, func() bool { return runtime.NumGoroutine() <= before }, "drainers exit when the queue is empty")
}

// With one drainer the jobs run in the order they were queued. (With more,
// a drainer may be descheduled between taking a job and running it, so the
// order in which jobs start is not observable.)
func TestDiskQueueFirstInFirstOut(t *testing.T) {
	q := newDiskQueue(1)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		q.do(func() {
			defer wg.Done()
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
	}
	wg.Wait()
	for k, i := range order {
		if i != k {
			t.Fatalf("job %d ran %dth: not first in, first out (%v)", i, k, order)
		}
	}
}
