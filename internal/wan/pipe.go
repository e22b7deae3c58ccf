package wan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// chunkSize is the largest read from a socket, and so the largest unit the
// delay line stamps.
const chunkSize = 64 << 10

// smallChunk is the size up to which a read is copied out of its pooled
// buffer, so that a stream of small messages does not pin 64 KiB each.
const smallChunk = 4 << 10

// chunkOverhead is what a queued chunk costs beyond its bytes (header and
// slice), counted against MaxInFlight so that many tiny chunks stay bounded
// too.
const chunkOverhead = 64

var chunkPool = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// chunk is what a reader took from its socket, due at the other side at due.
// A chunk without data marks the end of the stream: err is io.EOF for a
// half-close, anything else for an abort.
type chunk struct {
	data   []byte
	pooled *[]byte // data's buffer, to return to chunkPool; nil if data is a copy
	due    time.Time
	err    error
}

// cost is what c counts against MaxInFlight.
func (c chunk) cost() int64 { return int64(len(c.data)) + chunkOverhead }

// pipe is one direction of a connection: a delay line from src to dst.
//
// # Why a delay line
//
// The obvious emulator, "read, sleep RTT/2, write", is stop-and-wait: at
// most one read's worth of bytes is in flight, so a bulk transfer crawls at
// chunk/(RTT/2) however fast the link is meant to be. A real link is a pipe
// that holds bandwidth×delay bytes at once. So the reader never sleeps: it
// stamps each chunk with due = arrival + delay and queues it; the writer
// takes chunks in order, waits until each is due, then paces it through the
// direction's shared token bucket. Latency is then the configured delay,
// throughput is the bandwidth, and neither limits the other.
//
// # Bounded memory
//
// The queue is bounded in bytes by maxInFlight: when it is full the reader
// stops reading, the kernel's socket buffer fills and TCP flow control
// slows the sender, exactly as a slow link would. maxInFlight is derived
// from the bandwidth-delay product (Config.MaxInFlight), so the bound does
// not cap throughput below the configured bandwidth.
//
// # Ends of the stream
//
// EOF travels down the line like data: the writer half-closes dst when the
// marker is due, so a peer sees the FIN one delay after it was sent. A read
// error (connection reset) does the same but aborts the whole connection;
// a write error aborts at once.
type pipe struct {
	src, dst    net.Conn
	delay       time.Duration
	start       time.Time // no byte is due before start (handshake emulation)
	bucket      *bucket   // nil: unlimited bandwidth
	maxInFlight int64
	done        <-chan struct{} // closed when the connection is torn down
	written     *atomic.Int64   // bytes delivered to dst (Stats)

	// mu protects queue, inflight and peak.
	mu       sync.Mutex
	queue    []chunk
	inflight int64 // cost of the chunks in queue and in the writer's hands
	peak     int64 // largest inflight seen, for tests

	ready chan struct{} // cap 1: queue became non-empty
	space chan struct{} // cap 1: inflight decreased
}

func newPipe(src, dst net.Conn, delay time.Duration, start time.Time, b *bucket, maxInFlight int64, done <-chan struct{}, written *atomic.Int64) *pipe {
	return &pipe{
		src: src, dst: dst, delay: delay, start: start, bucket: b,
		maxInFlight: maxInFlight, done: done, written: written,
		ready: make(chan struct{}, 1), space: make(chan struct{}, 1),
	}
}

// notify wakes a waiter on ch without ever blocking.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (p *pipe) push(c chunk) {
	p.mu.Lock()
	p.queue = append(p.queue, c)
	p.inflight += c.cost()
	p.peak = max(p.peak, p.inflight)
	p.mu.Unlock()
	notify(p.ready)
}

// pop returns the oldest chunk, waiting for one; false once done is closed.
func (p *pipe) pop() (chunk, bool) {
	for {
		p.mu.Lock()
		if len(p.queue) > 0 {
			c := p.queue[0]
			p.queue[0] = chunk{}
			p.queue = p.queue[1:]
			p.mu.Unlock()
			return c, true
		}
		p.mu.Unlock()
		select {
		case <-p.ready:
		case <-p.done:
			return chunk{}, false
		}
	}
}

// waitSpace blocks while the pipe holds maxInFlight bytes or more; false
// once done is closed.
func (p *pipe) waitSpace() bool {
	for {
		p.mu.Lock()
		full := p.inflight >= p.maxInFlight
		p.mu.Unlock()
		if !full {
			return true
		}
		select {
		case <-p.space:
		case <-p.done:
			return false
		}
	}
}

// dueAt stamps bytes that arrived at now.
func (p *pipe) dueAt(now time.Time) time.Time {
	if now.Before(p.start) {
		now = p.start
	}
	return now.Add(p.delay)
}

// read copies src into the delay line until EOF, an error or done.
func (p *pipe) read() {
	for {
		if !p.waitSpace() {
			return
		}
		buf := chunkPool.Get().(*[]byte)
		n, err := p.src.Read(*buf)
		now := time.Now()
		switch {
		case n > smallChunk:
			p.push(chunk{data: (*buf)[:n], pooled: buf, due: p.dueAt(now)})
		case n > 0:
			p.push(chunk{data: bytes.Clone((*buf)[:n]), due: p.dueAt(now)})
			chunkPool.Put(buf)
		default:
			chunkPool.Put(buf)
		}
		if err != nil {
			p.push(chunk{err: err, due: p.dueAt(now)})
			return
		}
	}
}

// errHalfClosed is write's result when the stream ended normally.
var errHalfClosed = errors.New("half-closed")

// write delivers chunks to dst when due. It returns errHalfClosed after
// propagating EOF, the cause of an abort, or nil when done was closed.
func (p *pipe) write() error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c, ok := p.pop()
		if !ok {
			return nil
		}
		if !sleepUntil(c.due, p.done, timer, true /* precise */) {
			return nil
		}
		if c.data == nil {
			if c.err == io.EOF {
				if hc, ok := p.dst.(interface{ CloseWrite() error }); ok {
					if err := hc.CloseWrite(); err != nil {
						return fmt.Errorf("half-close: %w", err)
					}
				}
				return errHalfClosed
			}
			return fmt.Errorf("read: %w", c.err)
		}
		err := p.send(c.data, timer)
		if c.pooled != nil {
			chunkPool.Put(c.pooled)
		}
		if err != nil {
			return err
		}
		p.mu.Lock()
		p.inflight -= c.cost()
		p.mu.Unlock()
		notify(p.space)
	}
}

// send writes b to dst, paced by the bucket.
func (p *pipe) send(b []byte, timer *time.Timer) error {
	for len(b) > 0 {
		n := len(b)
		if p.bucket != nil {
			n = min(n, p.bucket.piece())
			if !sleepUntil(p.bucket.reserve(n), p.done, timer, false /* precise */) {
				return nil // torn down; the connection is closing anyway
			}
		}
		if _, err := p.dst.Write(b[:n]); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		p.written.Add(int64(n))
		b = b[n:]
	}
	return nil
}
