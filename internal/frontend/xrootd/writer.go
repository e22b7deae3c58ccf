package xrootd

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// respWriter serialises the responses of one connection: every call writes
// one complete response message, so concurrent request handlers never
// interleave bytes. On a plain TCP connection a message goes out in one
// writev of the caller's buffers (no copy); on TLS the buffers are gathered
// into a bufio.Writer first so that small pieces (pgread CRCs) do not each
// become a TLS record.
//
// A write never holds the caller's buffers while the client does not read:
// a writev that has not finished within stallAfter (and every write on
// TLS, whose state a timed-out write would corrupt) leaves what is unsent
// to a queue, copied, that a flusher goroutine sends in order with the
// connection's write timeout; later writes join the queue until it is
// sent. The caller's buffers may be the cache's RAM: a client that stops
// reading then holds a copy of at most one block (Ready), not the cache's
// memory. maxQueued bounds the queue for writers that do not pace
// themselves: they wait for it to drain.
type respWriter struct {
	timeout time.Duration
	onErr   func(error) // called once, without mu held, after a failed write
	// token is held from Ready to its done: one stream at a time hands
	// the cache's memory to this connection (backend.Pacer).
	token chan struct{}

	// mu protects everything below and serialises writes.
	mu  sync.Mutex
	nc  net.Conn
	tcp bool          // nc supports writev (net.Buffers)
	bw  *bufio.Writer // non-nil on TLS
	err error         // first write error; later writes fail with it
	// backing is reused to hold the buffer list of one writev.
	backing [][]byte
	// queue holds copies of what could not be sent at once, in order;
	// flushing is set while the flusher sends it, drained is closed when
	// it stops.
	queue    [][]byte
	queued   int
	flushing bool
	drained  chan struct{}
	// pending are the requests handed to handlers and not yet answered
	// with a final response (begin; write ends them); stopped are those
	// answered by the server itself at shutdown (answerPending), whose
	// handlers' later responses are dropped.
	pending map[proto.StreamID]bool
	stopped map[proto.StreamID]bool
}

// begin records that the request sid waits for its answer.
func (w *respWriter) begin(sid proto.StreamID) {
	w.mu.Lock()
	if w.pending == nil {
		w.pending = map[proto.StreamID]bool{}
	}
	w.pending[sid] = true
	w.mu.Unlock()
}

// answerPending answers every request still waiting with resp(sid) (the
// server is going away: the client must not be left without an answer),
// and drops what their handlers send afterwards. It returns how many it
// answered.
func (w *respWriter) answerPending(resp func(proto.StreamID) []byte) int {
	w.mu.Lock()
	var sids []proto.StreamID
	for sid := range w.pending {
		sids = append(sids, sid)
	}
	if w.stopped == nil {
		w.stopped = map[proto.StreamID]bool{}
	}
	for _, sid := range sids {
		w.stopped[sid] = true
	}
	w.mu.Unlock()
	n := 0
	for _, sid := range sids {
		if w.writeMsg(true, resp(sid)) == nil {
			n++
		}
	}
	return n
}

// settleLocked drops a message of a request answered at shutdown (true),
// and ends a pending request at its final response. MUST be called with
// mu held, with the message's first buffer.
func (w *respWriter) settleLocked(first []byte) (drop bool) {
	if len(first) < proto.ResponseHeaderLen || len(w.pending)+len(w.stopped) == 0 {
		return false
	}
	sid := proto.StreamID{first[0], first[1]}
	if w.stopped[sid] {
		return true
	}
	if final(first) {
		delete(w.pending, sid)
	}
	return false
}

// final reports whether the response message starting with b ends its
// request: not kXR_oksofar, kXR_waitresp, kXR_authmore, a kXR_attn, nor a
// kXR_status with kXR_PartialResult.
func final(b []byte) bool {
	switch proto.Status(binary.BigEndian.Uint16(b[2:4])) {
	case proto.StatusOKSoFar, proto.StatusWaitResp, proto.StatusAuthMore, proto.StatusAttn:
		return false
	case proto.StatusStatus:
		// crc32c, streamid, requestid, then resptype.
		const at = proto.ResponseHeaderLen + 4 + 2 + 1
		return len(b) <= at || proto.RespType(b[at]) == proto.FinalResult
	}
	return true
}

// stallAfter is how long a direct write may take before the rest of it is
// copied and queued: far longer than a send to any client that reads (a
// MiB to a client at 100 Mbit/s takes 80 ms), short enough that a client
// that stopped reading never holds the cache's memory for long.
const stallAfter = 200 * time.Millisecond

// maxQueued bounds the bytes queued on one connection for writers that do
// not pace themselves (vector reads, whose buffers are their own): beyond
// it they wait for the queue to drain.
const maxQueued = 8 << 20

func newRespWriter(nc net.Conn, timeout time.Duration, onErr func(error)) *respWriter {
	w := &respWriter{timeout: timeout, onErr: onErr, token: make(chan struct{}, 1)}
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

// Ready implements backend.Pacer: it returns once the queue is sent (the
// client has taken what was handed over before) and this caller holds the
// connection's token, released by done.
func (w *respWriter) Ready(ctx context.Context) (done func(), err error) {
	select {
	case w.token <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := w.waitDrained(ctx); err != nil {
		<-w.token
		return nil, err
	}
	return func() { <-w.token }, nil
}

// waitDrained returns once nothing is queued, or the connection failed.
func (w *respWriter) waitDrained(ctx context.Context) error {
	for {
		w.mu.Lock()
		err, flushing, ch := w.err, w.flushing, w.drained
		w.mu.Unlock()
		if err != nil {
			return err
		}
		if !flushing {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// write sends the concatenation of bufs as one message. The caller keeps
// ownership of bufs; they are not retained after return (what is queued is
// a copy). A nil error means sent or queued; a failed connection's error
// comes with a later write.
func (w *respWriter) write(bufs ...[]byte) error { return w.writeMsg(false, bufs...) }

// writeMsg is write; server marks the server's own answers at shutdown,
// which are never dropped.
func (w *respWriter) writeMsg(server bool, bufs ...[]byte) error {
	w.mu.Lock()
	if !server && len(bufs) > 0 && w.settleLocked(bufs[0]) {
		w.mu.Unlock()
		return nil
	}
	for w.flushing && w.queued > maxQueued && w.err == nil {
		ch := w.drained
		w.mu.Unlock()
		<-ch
		w.mu.Lock()
	}
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	if w.flushing || !w.tcp {
		w.enqueueLocked(bufs, 0)
		w.mu.Unlock()
		return nil
	}
	limit := stallAfter
	if w.timeout > 0 && w.timeout < limit {
		limit = w.timeout
	}
	w.nc.SetWriteDeadline(time.Now().Add(limit))
	var n int64
	var err error
	if len(bufs) == 1 {
		var k int
		k, err = w.nc.Write(bufs[0])
		n = int64(k)
	} else {
		// WriteTo consumes the slice header it is given (nb), so the
		// backing array keeps its capacity for the next write.
		w.backing = append(w.backing[:0], bufs...)
		nb := net.Buffers(w.backing)
		n, err = nb.WriteTo(w.nc)
		clear(w.backing)
	}
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() && (w.timeout == 0 || limit < w.timeout) {
		// The client is slow or stopped reading: the rest waits in the
		// queue, copied, and the caller's buffers are free.
		w.enqueueLocked(bufs, n)
		err = nil
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

// enqueueLocked appends a copy of bufs, less their first skip bytes, to
// the queue and starts the flusher. MUST be called with mu held.
func (w *respWriter) enqueueLocked(bufs [][]byte, skip int64) {
	size := 0
	for _, b := range bufs {
		size += len(b)
	}
	c := make([]byte, 0, size-int(skip))
	for _, b := range bufs {
		if skip >= int64(len(b)) {
			skip -= int64(len(b))
			continue
		}
		c = append(c, b[skip:]...)
		skip = 0
	}
	w.queue = append(w.queue, c)
	w.queued += len(c)
	if !w.flushing {
		w.flushing = true
		w.drained = make(chan struct{})
		go w.flush()
	}
}

// flush sends the queue in order, with the connection's write timeout,
// until it is empty or the connection fails.
func (w *respWriter) flush() {
	for {
		w.mu.Lock()
		q := w.queue
		w.queue, w.queued = nil, 0
		if len(q) == 0 || w.err != nil {
			w.flushing = false
			close(w.drained)
			w.mu.Unlock()
			return
		}
		nc, bw := w.nc, w.bw
		w.mu.Unlock()
		if w.timeout > 0 {
			nc.SetWriteDeadline(time.Now().Add(w.timeout))
		}
		var err error
		if bw != nil {
			for _, b := range q {
				if _, err = bw.Write(b); err != nil {
					break
				}
			}
			if err == nil {
				err = bw.Flush()
			}
		} else {
			nb := net.Buffers(q)
			_, err = nb.WriteTo(nc)
		}
		if err != nil {
			w.mu.Lock()
			if w.err == nil {
				w.err = fmt.Errorf("write response: %w", err)
			}
			err = w.err
			w.flushing = false
			w.queue, w.queued = nil, 0
			close(w.drained)
			w.mu.Unlock()
			if w.onErr != nil {
				w.onErr(err)
			}
			return
		}
	}
}

// canSendFile reports whether writeFile may be used (plain TCP, no TLS).
func (w *respWriter) canSendFile() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tcp
}

// writeFile sends hdr and then n bytes of f at off with sendfile(2), as one
// message. The bytes must exist: the header announced them, so a short
// file breaks the framing and fails the connection.
func (w *respWriter) writeFile(hdr []byte, f *os.File, off int64, n int) error {
	if err := w.waitDrained(context.Background()); err != nil {
		return err
	}
	w.mu.Lock()
	if w.settleLocked(hdr) {
		w.mu.Unlock()
		return nil
	}
	for w.flushing && w.err == nil {
		// Queued meanwhile: what was queued goes first.
		ch := w.drained
		w.mu.Unlock()
		<-ch
		w.mu.Lock()
	}
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	if w.timeout > 0 {
		w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	err := w.sendFileLocked(hdr, f, off, n)
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

// sendFileLocked does the work of writeFile. The header goes out with
// MSG_MORE so that the kernel sends it in the same segment as the data
// instead of as an 8-byte packet of its own (the socket has TCP_NODELAY).
// MUST be called with mu held.
func (w *respWriter) sendFileLocked(hdr []byte, f *os.File, off int64, n int) error {
	dst, err := w.nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		return err
	}
	src, err := f.SyscallConn()
	if err != nil {
		return err
	}
	remain := n
	var serr error
	cerr := src.Control(func(sfd uintptr) {
		werr := dst.Write(func(dfd uintptr) bool {
			for len(hdr) > 0 {
				k, err := syscall.SendmsgN(int(dfd), hdr, nil, nil, syscall.MSG_MORE)
				if k > 0 {
					hdr = hdr[k:]
				}
				switch {
				case err == syscall.EAGAIN:
					return false // wait until the socket is writable
				case err == syscall.EINTR:
				case err != nil:
					serr = fmt.Errorf("send: %w", err)
					return true
				}
			}
			for remain > 0 {
				k, err := syscall.Sendfile(int(dfd), int(sfd), &off, min(remain, 1<<30))
				if k > 0 {
					remain -= k
				}
				switch {
				case err == syscall.EAGAIN:
					return false
				case err == syscall.EINTR:
				case err != nil:
					serr = fmt.Errorf("sendfile: %w", err)
					return true
				case k == 0:
					serr = fmt.Errorf("sendfile: %s ends %d bytes early: %w", f.Name(), remain, io.ErrUnexpectedEOF)
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if serr != nil {
		return serr
	}
	return cerr
}

// failed reports the first write error, or nil.
func (w *respWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
