package bufpool

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mapped is a free list of fixed-size buffers mapped outside the Go heap,
// for I/O buffers whose count swings with the load (a cache's piece
// buffers: many while cold reads are in flight, few after).
//
// # Why outside the heap
//
// A heap buffer that is no longer needed stays resident until a garbage
// collection frees it and the scavenger, later still, returns its pages:
// the process's memory follows the peak of past bursts, not the bytes in
// flight now. A Mapped buffer's pages go back to the kernel the moment it is
// released (madvise MADV_DONTNEED), while its address range is kept for the
// next Get: at most keep free buffers stay resident, the rest cost address
// space only, and touching them again costs page faults, not a system call
// to map them.
//
// # Risks
//
// A buffer is never unmapped, so a use after Put reads zeroes or another
// request's bytes, as with any pool, but never faults. Its callers must
// therefore Put only buffers nothing writes into any more (the origin
// clients guarantee that once a read has returned, also after an error).
//
// Safe for concurrent use.
type Mapped struct {
	size, keep int

	// mu protects warm, cold, low and the counters.
	mu sync.Mutex
	// warm are free buffers whose pages are resident (at most keep), cold
	// free buffers whose pages were released.
	warm, cold []*[]byte
	// low is the fewest warm buffers since the last Trim: that many were
	// never needed.
	low int
	// ours holds the address of every buffer this pool mapped: only those
	// are ever released (never a heap buffer that Get fell back to).
	ours map[*byte]struct{}
}

// NewMapped returns a pool of size-byte buffers mapped outside the Go heap,
// keeping at most keep free buffers resident.
func NewMapped(size, keep int) *Mapped {
	return &Mapped{size: size, keep: keep, ours: map[*byte]struct{}{}}
}

// Get returns a buffer of the pool's size: a resident free one, else a
// released one, else a newly mapped one (a heap buffer if the kernel
// refuses the mapping). The caller owns it until Put.
func (p *Mapped) Get() *[]byte {
	p.mu.Lock()
	if n := len(p.warm); n > 0 {
		b := p.warm[n-1]
		p.warm[n-1] = nil
		p.warm = p.warm[:n-1]
		p.low = min(p.low, n-1)
		p.mu.Unlock()
		return b
	}
	p.low = 0
	if n := len(p.cold); n > 0 {
		b := p.cold[n-1]
		p.cold[n-1] = nil
		p.cold = p.cold[:n-1]
		p.mu.Unlock()
		return b
	}
	p.mu.Unlock()
	b, err := unix.Mmap(-1, 0, p.size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil || len(b) == 0 {
		b = make([]byte, p.size)
		return &b
	}
	p.mu.Lock()
	p.ours[unsafe.SliceData(b)] = struct{}{}
	p.mu.Unlock()
	return &b
}

// mineLocked reports whether b is one of the pool's mappings.
// MUST be called with p.mu held.
func (p *Mapped) mineLocked(b []byte) bool {
	_, ok := p.ours[unsafe.SliceData(b)]
	return ok && cap(b) >= p.size
}

// Put returns a buffer obtained from Get. The caller must not use it after.
// Beyond keep resident free buffers, its pages are released at once.
func (p *Mapped) Put(b *[]byte) {
	p.mu.Lock()
	if !p.mineLocked(*b) {
		p.mu.Unlock()
		return // a heap buffer: left to the collector
	}
	*b = (*b)[:p.size]
	if len(p.warm) < p.keep {
		p.warm = append(p.warm, b)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	release(*b)
	p.mu.Lock()
	p.cold = append(p.cold, b)
	p.mu.Unlock()
}

// Trim releases the pages of the resident free buffers that stayed unused
// since the previous Trim and returns how many. Call it periodically.
func (p *Mapped) Trim() int {
	p.mu.Lock()
	n := p.low
	idle := append([]*[]byte(nil), p.warm[:n]...)
	p.warm = append(p.warm[:0], p.warm[n:]...)
	clear(p.warm[len(p.warm):cap(p.warm)])
	p.low = len(p.warm)
	p.mu.Unlock()
	for _, b := range idle {
		release(*b)
	}
	p.mu.Lock()
	p.cold = append(p.cold, idle...)
	p.mu.Unlock()
	return n
}

// Resident returns the number of free buffers whose pages are resident.
func (p *Mapped) Resident() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.warm)
}

// Mapped returns how many buffers were ever mapped.
func (p *Mapped) Mapped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ours)
}

// release gives b's pages back to the kernel; the range stays mapped and
// reads as zeroes until written again.
func release(b []byte) {
	// Cannot fail for a whole private anonymous mapping of ours; if it did,
	// the pages would merely stay resident.
	_ = unix.Madvise(b, unix.MADV_DONTNEED)
}
