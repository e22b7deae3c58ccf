package xrootd

import (
	"bufio"
	"encoding/binary"
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
func (w *respWriter) write(bufs ...[]byte) error { return w.writeMsg(false, bufs...) }

// writeMsg is write; server marks the server's own answers at shutdown,
// which are never dropped.
func (w *respWriter) writeMsg(server bool, bufs ...[]byte) error {
	w.mu.Lock()
	if !server && len(bufs) > 0 && w.settleLocked(bufs[0]) {
		w.mu.Unlock()
		return nil
	}
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
	w.mu.Lock()
	if w.settleLocked(hdr) {
		w.mu.Unlock()
		return nil
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
