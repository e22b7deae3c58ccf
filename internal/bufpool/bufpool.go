// Package bufpool keeps fixed-size buffers for reuse, up to a bound. Unlike
// sync.Pool it does not drop its buffers at every garbage collection, so a
// burst of cold reads reuses the previous burst's buffers instead of
// allocating anew (and letting the heap grow to twice what is live before
// the collector runs); Trim hands back, now and then, what was not needed.
package bufpool

import "sync"

// Pool is a free list of buffers of one size. Safe for concurrent use.
type Pool struct {
	size, max int

	// mu protects free and low.
	mu   sync.Mutex
	free []*[]byte
	// low is the fewest free buffers since the last Trim: that many were
	// never needed.
	low int
}

// New returns a pool of buffers of size bytes keeping at most max free.
func New(size, max int) *Pool {
	return &Pool{size: size, max: max}
}

// Get returns a buffer of the pool's size, reused or new. The caller owns it
// until Put.
func (p *Pool) Get() *[]byte {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		if n-1 < p.low {
			p.low = n - 1
		}
		p.mu.Unlock()
		return b
	}
	p.low = 0
	p.mu.Unlock()
	b := make([]byte, p.size)
	return &b
}

// Put returns a buffer obtained from Get. The caller must not use it after.
func (p *Pool) Put(b *[]byte) {
	if cap(*b) < p.size {
		return
	}
	*b = (*b)[:p.size]
	p.mu.Lock()
	if len(p.free) < p.max {
		p.free = append(p.free, b)
	}
	p.mu.Unlock()
}

// Trim releases the buffers that stayed free since the previous Trim and
// returns how many. Call it periodically (the cache does, every sync).
func (p *Pool) Trim() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.low
	for i := 0; i < n; i++ {
		p.free[i] = nil
	}
	p.free = append(p.free[:0], p.free[n:]...)
	p.low = len(p.free)
	return n
}

// Free returns the number of free buffers held.
func (p *Pool) Free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}
