package xrootd

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"time"
)

// respWriter serialises the responses of one connection: every call writes
// one complete response message, so concurrent request handlers never
// interleave bytes. On a plain TCP connection a message goes out in one
// writev of the caller's buffers (no copy); on TLS the buffers are gathered
// into a bufio.Writer first so that small pieces (pgread CRCs) do not each
// become a TLS record.
type respWriter struct {
	timeout time.Duration
	onErr   func(error) // called once, without mu held, after a failed write

	// mu protects everything below and serialises writes.
	mu  sync.Mutex
	nc  net.Conn
	tcp bool          // nc supports writev (net.Buffers)
	bw  *bufio.Writer // non-nil on TLS
	err error         // first write error; later writes fail with it
	// backing is reused to hold the buffer list of one writev.
	backing [][]byte
}

func newRespWriter(nc net.Conn, timeout time.Duration, onErr func(error)) *respWriter {
	w := &respWriter{timeout: timeout, onErr: onErr}
	w.setConnLocked(nc)
	return w
}

// setConnLocked switches the writer to nc (after a TLS upgrade). MUST be
// called with mu held, or before the writer is shared.
func (w *respWriter) setConnLocked(nc net.Conn) {
	w.nc = nc
	_, w.tcp = nc.(*net.TCPConn)
	if w.tcp {
		w.bw = nil
	} else {
		w.bw = bufio.NewWriterSize(nc, 64<<10)
	}
}

// write sends the concatenation of bufs as one message. The caller keeps
// ownership of bufs; they are not retained after return.
func (w *respWriter) write(bufs ...[]byte) error {
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	if w.timeout > 0 {
		w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	var err error
	if w.tcp {
		if len(bufs) == 1 {
			_, err = w.nc.Write(bufs[0])
		} else {
			// WriteTo consumes the slice header it is given (nb), so the
			// backing array keeps its capacity for the next write.
			w.backing = append(w.backing[:0], bufs...)
			nb := net.Buffers(w.backing)
			_, err = nb.WriteTo(w.nc)
			clear(w.backing)
		}
	} else {
		for _, b := range bufs {
			if _, err = w.bw.Write(b); err != nil {
				break
			}
		}
		if err == nil {
			err = w.bw.Flush()
		}
	}
	if err != nil {
		w.err = fmt.Errorf("write response: %w", err)
		err = w.err
	}
	w.mu.Unlock()
	if err != nil && w.onErr != nil {
		w.onErr(err)
	}
	return err
}

// failed reports the first write error, or nil.
func (w *respWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
