package wan

import (
	"sync"
	"time"
)

// bucket is a token bucket shared by all connections in one direction. It
// hands out reservations: a writer takes its bytes at once, possibly going
// into debt, and waits until the debt is paid, so writers are served in
// the order they ask and a late wake-up is not lost (tokens keep
// accumulating up to the burst while a writer oversleeps).
type bucket struct {
	rate  float64 // bytes per second
	burst float64 // bytes

	// mu protects tokens and last.
	mu     sync.Mutex
	tokens float64 // negative while in debt
	last   time.Time
}

func newBucket(rate, burst int64) *bucket {
	return &bucket{rate: float64(rate), burst: float64(burst), tokens: float64(burst), last: time.Now()}
}

// reserve takes n bytes and returns when they may be sent.
func (b *bucket) reserve(n int) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return now
	}
	return now.Add(time.Duration(-b.tokens / b.rate * float64(time.Second)))
}

// piece is how many bytes a writer sends per reservation: about 1 ms of
// link time, so that pacing is smooth, but at least 1 KiB to bound the
// number of writes.
func (b *bucket) piece() int {
	return int(min(max(b.rate/1000, 1<<10), chunkSize))
}
