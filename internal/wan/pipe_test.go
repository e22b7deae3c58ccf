package wan

import (
	"bytes"
	"github.com/hepcache/hepcache/internal/eventually"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBackpressure drives one pipe over synchronous net.Pipes (no kernel
// buffers), so every byte the pipe's reader took is in its queue: with a
// destination that does not read, the reader must stop at maxInFlight (plus
// the one read that crossed it), and once the destination reads, every byte
// must come out in order.
func TestBackpressure(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxInFlight int64
		delay       time.Duration
		writeSize   int
		total       int
		maxSent     int64 // the most the source can get into a stalled pipe
	}{
		{"tiny bound", 1, 0, 1000, 1 << 20, 1 + 1000},
		{"below one chunk", 10_000, 0, 1000, 1 << 20, 10_000 + 1000},
		{"several chunks", 4 * chunkSize, time.Millisecond, 1000, 1 << 20, 4*chunkSize + 1000},
		// One byte per read: the per-chunk overhead keeps the count bounded.
		{"tiny messages", 10_000, 0, 1, 20_000, 10_000/(1+chunkOverhead) + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcW, srcR := net.Pipe()
			dstW, dstR := net.Pipe()
			done := make(chan struct{})
			var written atomic.Int64
			p := newPipe(srcR, dstW, tc.delay, time.Now(), nil, tc.maxInFlight, done, &written)
			var wg sync.WaitGroup
			wg.Go(p.read)
			werr := make(chan error, 1)
			wg.Go(func() {
				werr <- p.write()
				dstW.Close() // net.Pipe cannot half-close
			})

			data := randomBytes(7, tc.total)
			var sent atomic.Int64
			wg.Go(func() {
				for b := data; len(b) > 0; {
					n, err := srcW.Write(b[:min(len(b), tc.writeSize)])
					sent.Add(int64(n))
					if err != nil {
						return
					}
					b = b[n:]
				}
				srcW.Close()
			})

			// Wait until the pipe has filled up to its bound.
			eventually.True(t, func() bool {
				p.mu.Lock()
				defer p.mu.Unlock()
				return p.inflight >= tc.maxInFlight
			}, "the pipe filled to its bound")
			if s := sent.Load(); s > tc.maxSent {
				t.Errorf("the source wrote %d bytes into a stalled pipe, bound %d", s, tc.maxSent)
			}

			got, err := io.ReadAll(dstR)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Errorf("got %d bytes, want %d, equal=%v", len(got), len(data), bytes.Equal(got, data))
			}
			if err := <-werr; err != errHalfClosed && err != nil {
				t.Errorf("write: %v", err)
			}
			p.mu.Lock()
			peak := p.peak
			p.mu.Unlock()
			if bound := tc.maxInFlight + chunkSize + chunkOverhead; peak > bound {
				t.Errorf("peak in flight %d, bound %d", peak, bound)
			}
			close(done)
			dstR.Close()
			wg.Wait()
		})
	}
}

// TestDelayLine checks that the pipe is a delay line, not stop-and-wait:
// while the first bytes are still waiting out a long delay, the reader
// keeps accepting more, up to the in-flight bound.
func TestDelayLine(t *testing.T) {
	srcW, srcR := net.Pipe()
	dstW, dstR := net.Pipe()
	defer dstR.Close()
	done := make(chan struct{})
	var written atomic.Int64
	const total = 10 * chunkSize
	p := newPipe(srcR, dstW, time.Hour, time.Now(), nil, 2*total, done, &written)
	var wg sync.WaitGroup
	wg.Go(p.read)
	wg.Go(func() { p.write() })
	data := randomBytes(3, total)
	// net.Pipe is synchronous: each Write returns once the pipe's reader
	// has taken the bytes, so this returns only if nothing waits for the
	// delay.
	for b := data; len(b) > 0; b = b[1000:] {
		if _, err := srcW.Write(b[:min(len(b), 1000)]); err != nil {
			t.Fatal(err)
		}
		if len(b) <= 1000 {
			break
		}
	}
	p.mu.Lock()
	queued := len(p.queue)
	p.mu.Unlock()
	if n := written.Load(); n != 0 {
		t.Errorf("%d bytes delivered before the delay", n)
	}
	if queued < 2 {
		t.Errorf("%d chunks queued, want the whole stream in flight", queued)
	}
	close(done)
	srcW.Close()
	wg.Wait()
}
