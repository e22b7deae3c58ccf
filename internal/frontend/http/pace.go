package httpfront

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// bodyWriter sends a response body without ever blocking on the client
// while it holds the cache's memory (backend.Pacer): what the cache hands
// over is copied (take) and written by a goroutine of the request, and the
// cache waits (Ready) for those writes to be done before it pins the next
// block. A client that stops reading holds one block's copy, never a slot
// of the cache's RAM; net/http cannot resume a write that timed out, so
// unlike the root:// front end every byte is copied (about 0.05 s of CPU
// per GiB).
type bodyWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration // per write (Config.WriteChunkTimeout)

	// mu protects the fields below.
	mu      sync.Mutex
	pending []byte // copied, not yet handed to the writer goroutine
	spare   []byte
	writing bool
	idle    chan struct{} // closed when the writer goroutine stops
	err     error
}

// take copies p for the writer goroutine and returns at once.
func (b *bodyWriter) take(p []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return b.err
	}
	b.pending = append(b.pending, p...)
	if !b.writing {
		b.writing = true
		b.idle = make(chan struct{})
		go b.run()
	}
	return nil
}

// run writes what take copied until nothing is pending.
func (b *bodyWriter) run() {
	for {
		b.mu.Lock()
		buf := b.pending
		if len(buf) == 0 || b.err != nil {
			b.writing = false
			close(b.idle)
			b.mu.Unlock()
			return
		}
		b.pending, b.spare = b.spare[:0], nil
		b.mu.Unlock()
		b.rc.SetWriteDeadline(time.Now().Add(b.timeout))
		_, err := b.w.Write(buf)
		b.mu.Lock()
		b.spare = buf[:0]
		if err != nil && b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
}

// Ready implements backend.Pacer: it returns once everything taken so far
// was written.
func (b *bodyWriter) Ready(ctx context.Context) (func(), error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return func() {}, nil
}

func (b *bodyWriter) wait(ctx context.Context) error {
	b.mu.Lock()
	writing, idle := b.writing, b.idle
	b.mu.Unlock()
	if writing {
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// finish waits for the writes to be done: the handler may not return
// while the goroutine still writes to its ResponseWriter.
func (b *bodyWriter) finish() error {
	return b.wait(context.Background())
}
