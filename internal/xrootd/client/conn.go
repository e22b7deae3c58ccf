package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/xrootd/proto"
	"github.com/hepcache/hepcache/origin"
)

// maxBody bounds a response body that is buffered (not read into a caller's
// buffer): dirlist, query and error answers. A larger one means a broken or
// hostile server.
const maxBody = 64 << 20

// chunkGrace is how long an abandoned call waits for the response chunk
// that is being read into its buffer before the connection is killed.
const chunkGrace = 2 * time.Second

type callKind uint8

const (
	kindBuffered callKind = iota // body collected into call.body
	kindRead                     // kXR_ok/oksofar data read into call.dst
	kindReadV                    // kXR_ok/oksofar readv data scattered into call.segs
)

// call is one request in flight on a conn. Calls are pooled: a call belongs
// to its caller until the caller abandons it (ctx done), after which the
// read loop owns it and returns it to the pool at the final response.
type call struct {
	kind callKind
	sid  uint16
	wbuf []byte

	// done receives one value when the final response (or the connection's
	// failure) is recorded below.
	done chan struct{}
	// chunkEnd receives a value when a chunk being read into the buffers of
	// an abandoned call is finished.
	chunkEnd chan struct{}

	// Guarded by conn.mu.
	abandoned bool
	receiving bool // the read loop is writing into dst/segs without mu
	chunkWait bool // an abandoning caller waits on chunkEnd and recycles cl if completed
	completed bool
	waitResp  bool // answered kXR_waitresp; the answer comes as kXR_attn

	// Results, written by the read loop before done is signalled.
	status proto.Status
	body   []byte
	err    error

	// kindRead: the payload goes to dst[n:]. With progress set, the read
	// loop reports n as the payload arrives, every progressStep bytes.
	dst      []byte
	n        int
	progress func(int)

	// kindReadV: segments in request order, parsing state.
	segs   []origin.Segment
	seg    int // index of the element being received
	segN   int // bytes of it received
	segLen int // its length as announced
	hdr    [proto.ReadListItemLen]byte
	hdrN   int
	short  bool // an element was shorter than asked, or skipped
}

var callPool = sync.Pool{New: func() any {
	return &call{
		wbuf:     make([]byte, 0, 256),
		done:     make(chan struct{}, 1),
		chunkEnd: make(chan struct{}, 1),
	}
}}

func getCall(kind callKind) *call {
	cl := callPool.Get().(*call)
	cl.kind = kind
	return cl
}

// putCall resets cl and returns it to the pool. The caller must own cl.
func putCall(cl *call) {
	select {
	case <-cl.done:
	default:
	}
	select {
	case <-cl.chunkEnd:
	default:
	}
	cl.abandoned, cl.receiving, cl.chunkWait, cl.completed, cl.waitResp = false, false, false, false, false
	cl.status, cl.err = 0, nil
	if cap(cl.body) > 1<<20 {
		cl.body = nil // do not keep a huge listing around
	}
	cl.body = cl.body[:0]
	cl.dst, cl.n, cl.progress = nil, 0, nil
	cl.segs, cl.seg, cl.segN, cl.segLen, cl.hdrN, cl.short = nil, 0, 0, 0, 0, false
	callPool.Put(cl)
}

// conn is one logged-in connection to a server. Many goroutines send
// requests on it concurrently; one read loop routes every response to its
// call by stream id, reading payloads straight into the callers' buffers.
type conn struct {
	addr  string
	nc    net.Conn
	br    *bufio.Reader
	cfg   *Config
	flags proto.ServerFlags
	pver  int32
	tls   bool // the connection switched to TLS

	sids chan uint16 // free stream ids

	wmu sync.Mutex // serializes writes on nc

	// mu protects calls, active and dead.
	mu     sync.Mutex
	calls  []*call // by stream id
	active int     // calls waiting for an answer other than an asynresp
	dead   error

	isDead   atomic.Bool
	lastRecv atomic.Int64 // UnixNano of the last bytes received, see watch
	stalled  atomic.Bool
	readDone chan struct{}
	attnBuf  []byte // owned by the read loop
}

// dialConn connects to addr, does the handshake, kXR_protocol and kXR_login,
// and starts the read loop.
func dialConn(ctx context.Context, addr string, cfg *Config) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	dial := cfg.dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, unavailable("connect %s: %w", addr, err)
	}
	c := &conn{
		addr:     addr,
		nc:       nc,
		cfg:      cfg,
		sids:     make(chan uint16, cfg.MaxInFlight),
		calls:    make([]*call, cfg.MaxInFlight),
		readDone: make(chan struct{}),
	}
	c.br = bufio.NewReaderSize(progressReader{nc, &c.lastRecv}, 32<<10)
	// Stream ids start at 1: id 0 marks unsolicited responses (kXR_attn).
	for i := 1; i <= cfg.MaxInFlight; i++ {
		c.sids <- uint16(i)
	}
	if err := c.login(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	c.lastRecv.Store(time.Now().UnixNano())
	go c.readLoop()
	go c.watch()
	return c, nil
}

// progressReader records when bytes last arrived.
type progressReader struct {
	r    io.Reader
	last *atomic.Int64
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// errStalled is the cause of a connection killed by watch.
var errStalled = errors.New("no data from the server while requests were outstanding")

// watch kills the connection when requests are outstanding and nothing has
// arrived for StallTimeout. It ends with the read loop.
func (c *conn) watch() {
	t := time.NewTicker(max(c.cfg.StallTimeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-c.readDone:
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, c.lastRecv.Load())) < c.cfg.StallTimeout {
			continue
		}
		c.mu.Lock()
		busy := c.active > 0
		c.mu.Unlock()
		if busy {
			c.stalled.Store(true)
			c.kill()
			return
		}
	}
}

// login runs the handshake synchronously, before the read loop starts.
func (c *conn) login(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetDeadline(dl)
	}
	defer c.nc.SetDeadline(time.Time{})
	fail := func(step string, err error) error {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return unavailable("%s %s: %w", step, c.addr, err)
	}

	// The handshake and kXR_protocol go in one write, as XrdCl does.
	b := proto.AppendClientHandshake(make([]byte, 0, 128))
	preq := proto.ProtocolRequest{ClientPV: proto.ProtocolVersion, Expect: proto.ExpectLogin}
	if c.cfg.TLS != nil {
		preq.Flags |= proto.ProtoAbleTLS | proto.ProtoWantTLS
	}
	b = preq.Append(b, proto.StreamID{0, 1})
	if _, err := c.nc.Write(b); err != nil {
		return fail("handshake with", err)
	}
	var hs [proto.ServerHandshakeLen]byte
	if _, err := io.ReadFull(c.br, hs[:]); err != nil {
		return fail("handshake with", err)
	}
	if _, _, err := proto.DecodeServerHandshake(hs[:]); err != nil {
		return fail("handshake with", err)
	}
	h, body, err := c.readSync()
	if err != nil {
		return fail("kXR_protocol to", err)
	}
	if h.Status != proto.StatusOK {
		return fail("kXR_protocol to", c.syncError(h, body))
	}
	pr, err := proto.DecodeProtocolResponse(body)
	if err != nil {
		return fail("kXR_protocol to", err)
	}
	c.pver, c.flags = pr.PVal, pr.Flags
	if c.cfg.TLS != nil {
		if err := c.startTLS(ctx); err != nil {
			return err
		}
	}

	lr := proto.LoginRequest{
		PID:      int32(os.Getpid()),
		Username: c.cfg.Username,
		CapVer:   proto.CapAsync | proto.LoginVer005,
	}
	if _, err := c.nc.Write(lr.Append(b[:0], proto.StreamID{0, 2})); err != nil {
		return fail("kXR_login to", err)
	}
	h, body, err = c.readSync()
	if err != nil {
		return fail("kXR_login to", err)
	}
	if h.Status != proto.StatusOK {
		err := c.syncError(h, body)
		var pe *proto.Error
		if errors.As(err, &pe) && (pe.Code == proto.ErrNotAuthorized || pe.Code == proto.ErrAuthFailed || pe.Code == proto.ErrTLSRequired) {
			return fmt.Errorf("kXR_login to %s: %w: %w", c.addr, origin.ErrNotAuthorized, err)
		}
		return fail("kXR_login to", err)
	}
	resp, err := proto.DecodeLoginResponse(body)
	if err != nil {
		return fail("kXR_login to", err)
	}
	if len(resp.Sec) > 0 {
		return c.authenticate(string(resp.Sec))
	}
	return nil
}

// readSync reads one whole response during login.
func (c *conn) readSync() (proto.ResponseHeader, []byte, error) {
	var hb [proto.ResponseHeaderLen]byte
	if _, err := io.ReadFull(c.br, hb[:]); err != nil {
		return proto.ResponseHeader{}, nil, err
	}
	h, err := proto.DecodeResponseHeader(hb[:])
	if err != nil {
		return h, nil, err
	}
	if h.Dlen > 1<<20 {
		return h, nil, fmt.Errorf("%v response of %d bytes during login: %w", h.Status, h.Dlen, proto.ErrMalformed)
	}
	body := make([]byte, h.Dlen)
	_, err = io.ReadFull(c.br, body)
	return h, body, err
}

func (c *conn) syncError(h proto.ResponseHeader, body []byte) error {
	if h.Status == proto.StatusError {
		code, msg, err := proto.DecodeError(body)
		if err != nil {
			return err
		}
		return &proto.Error{Code: code, Message: msg}
	}
	return fmt.Errorf("unexpected %v: %w", h.Status, proto.ErrMalformed)
}

// dead reports whether the connection has failed.
func (c *conn) failed() bool { return c.isDead.Load() }

// kill closes the socket; the read loop then fails every pending call.
func (c *conn) kill() { c.nc.Close() }

// close shuts the connection down and waits for the read loop.
func (c *conn) close() {
	c.nc.Close()
	<-c.readDone
}

// start registers cl under a fresh stream id, lets enc build the request
// into cl.wbuf and sends it. After start returns nil, the caller must
// finish with wait.
func (c *conn) start(ctx context.Context, cl *call, enc func(dst []byte, sid proto.StreamID) []byte) error {
	var sid uint16
	select {
	case sid = <-c.sids:
	default:
		select {
		case sid = <-c.sids:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.readDone:
			return c.deadErr()
		}
	}
	cl.sid = sid
	c.mu.Lock()
	if c.dead != nil {
		err := c.dead
		c.mu.Unlock()
		c.sids <- sid
		return err
	}
	c.calls[sid-1] = cl
	if c.active == 0 {
		// The stall clock starts now for an idle connection.
		c.lastRecv.Store(time.Now().UnixNano())
	}
	c.active++
	c.mu.Unlock()

	cl.wbuf = enc(cl.wbuf[:0], proto.StreamID{byte(sid >> 8), byte(sid)})

	c.wmu.Lock()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(c.cfg.WriteTimeout)
	}
	c.nc.SetWriteDeadline(dl)
	_, err := c.nc.Write(cl.wbuf)
	c.wmu.Unlock()
	if err != nil {
		// The read loop fails every call, including this one, which the
		// caller then collects in wait.
		c.kill()
	}
	return nil
}

// testHookAbandonReceiving, when set by a test, runs where a caller that
// abandons a call being received may be descheduled before it waits for
// the chunk's end.
var testHookAbandonReceiving func()

// wait blocks until cl has its final response, the connection fails or ctx
// ends. On ctx end the call is abandoned (the read loop discards the rest
// of its response and recycles it): wait returns owned false and ctx's
// error, and the caller must not touch cl afterwards. wait always returns
// within chunkGrace of ctx's end.
func (c *conn) wait(ctx context.Context, cl *call) (owned bool, err error) {
	select {
	case <-cl.done:
		return true, cl.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if cl.completed {
		c.mu.Unlock()
		<-cl.done
		return true, cl.err
	}
	cl.abandoned = true
	receiving := cl.receiving
	// While we wait for the chunk's end the call must not be recycled
	// under us (a recycled call loses the token we wait for, and may be
	// someone else's by then): a completion in the meantime leaves it to us.
	cl.chunkWait = receiving
	c.mu.Unlock()
	if !receiving {
		return false, ctx.Err()
	}
	if testHookAbandonReceiving != nil {
		testHookAbandonReceiving()
	}
	// The read loop is writing into the caller's buffer right now; the
	// caller may reuse it once we return, so wait for that chunk. A server
	// that stops sending inside it gets the connection killed, which ends
	// the chunk with an error.
	t := time.NewTimer(chunkGrace)
	select {
	case <-cl.chunkEnd:
	case <-t.C:
		c.kill()
		<-cl.chunkEnd
	}
	t.Stop()
	c.mu.Lock()
	cl.chunkWait = false
	recycle := cl.completed
	c.mu.Unlock()
	if recycle {
		putCall(cl)
	}
	return false, ctx.Err()
}

func (c *conn) deadErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil {
		return c.dead
	}
	return unavailable("connection to %s closed", c.addr)
}

// releaseLocked frees cl's stream id. MUST be called with c.mu held.
func (c *conn) releaseLocked(cl *call) {
	c.calls[cl.sid-1] = nil
	if !cl.waitResp {
		c.active--
	}
	c.sids <- cl.sid // never blocks: capacity is MaxInFlight
}

// completeLocked records the final result of cl and wakes its caller, or
// recycles cl if it was abandoned (unless its caller still waits for the
// end of a chunk: then the caller recycles it). MUST be called with c.mu held.
func (c *conn) completeLocked(cl *call, status proto.Status, err error) {
	c.releaseLocked(cl)
	if cl.abandoned {
		if cl.chunkWait {
			cl.completed = true
			return
		}
		putCall(cl)
		return
	}
	cl.status, cl.err, cl.completed = status, err, true
	cl.done <- struct{}{}
}

// readLoop reads responses until the connection fails.
func (c *conn) readLoop() {
	defer close(c.readDone)
	var hb [proto.ResponseHeaderLen]byte
	for {
		if _, err := io.ReadFull(c.br, hb[:]); err != nil {
			c.fail(err)
			return
		}
		h, err := proto.DecodeResponseHeader(hb[:])
		if err != nil {
			c.fail(err)
			return
		}
		if h.Status == proto.StatusAttn {
			err = c.attn(h)
		} else {
			err = c.response(h)
		}
		if err != nil {
			c.fail(err)
			return
		}
	}
}

// response routes one response to its call.
func (c *conn) response(h proto.ResponseHeader) error {
	sid := uint16(h.StreamID[0])<<8 | uint16(h.StreamID[1])
	c.mu.Lock()
	var cl *call
	if sid >= 1 && int(sid) <= len(c.calls) {
		cl = c.calls[sid-1]
	}
	if cl == nil {
		c.mu.Unlock()
		return fmt.Errorf("%v response for unknown stream %d: %w", h.Status, sid, proto.ErrMalformed)
	}
	data := (h.Status == proto.StatusOK || h.Status == proto.StatusOKSoFar) && cl.kind != kindBuffered
	discard := cl.abandoned
	if data && !discard {
		cl.receiving = true
	}
	c.mu.Unlock()

	var err error
	switch {
	case data && discard:
		_, err = c.br.Discard(int(h.Dlen))
	case data && cl.kind == kindRead:
		if int(h.Dlen) > len(cl.dst)-cl.n {
			err = fmt.Errorf("read answer of %d bytes for %d wanted: %w", cl.n+int(h.Dlen), len(cl.dst), proto.ErrMalformed)
			break
		}
		err = c.readPayload(cl, int(h.Dlen))
	case data && cl.kind == kindReadV:
		err = c.readVChunk(cl, int(h.Dlen))
	case h.Status == proto.StatusStatus:
		err = c.statusResponse(cl, h)
	default:
		if h.Status != proto.StatusOK && h.Status != proto.StatusOKSoFar {
			cl.body = cl.body[:0] // an error after partial answers replaces them
		}
		err = c.readBody(cl, int(h.Dlen))
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if cl.receiving {
		cl.receiving = false
		if cl.abandoned {
			cl.chunkEnd <- struct{}{}
		}
	}
	if err != nil {
		return err
	}
	switch h.Status {
	case proto.StatusOKSoFar:
	case proto.StatusWaitResp:
		// The answer comes later as kXR_attn/kXR_asynresp on this stream;
		// the waitresp body (seconds, message) is not part of it.
		cl.body = cl.body[:0]
		if !cl.waitResp {
			cl.waitResp = true
			c.active--
		}
	default:
		c.completeLocked(cl, h.Status, nil)
	}
	return nil
}

// progressStep is how often a read's progress is reported: a fraction of
// the cache's pieces, so that each lands as soon as its bytes have.
const progressStep = 64 << 10

// readPayload reads n bytes of a read answer into cl.dst[cl.n:], reporting
// progress on the way when asked.
func (c *conn) readPayload(cl *call, n int) error {
	if cl.progress == nil {
		_, err := io.ReadFull(c.br, cl.dst[cl.n:cl.n+n])
		cl.n += n
		return err
	}
	for n > 0 {
		k := min(n, progressStep-cl.n%progressStep)
		if _, err := io.ReadFull(c.br, cl.dst[cl.n:cl.n+k]); err != nil {
			return err
		}
		cl.n += k
		n -= k
		cl.progress(cl.n)
	}
	return nil
}

// readBody appends n body bytes to cl.body. The caller of an abandoned call
// no longer looks at body, so the read loop may still fill it.
func (c *conn) readBody(cl *call, n int) error {
	if len(cl.body)+n > maxBody {
		return fmt.Errorf("response body of %d bytes: %w", len(cl.body)+n, proto.ErrMalformed)
	}
	l := len(cl.body)
	if cap(cl.body)-l < n {
		nb := make([]byte, l, l+n)
		copy(nb, cl.body)
		cl.body = nb
	}
	cl.body = cl.body[:l+n]
	_, err := io.ReadFull(c.br, cl.body[l:])
	return err
}

// statusResponse consumes a kXR_status response (pgread/pgwrite, which this
// client does not send) so that the stream stays in sync, and records it
// as the answer.
func (c *conn) statusResponse(cl *call, h proto.ResponseHeader) error {
	cl.body = cl.body[:0]
	if err := c.readBody(cl, int(h.Dlen)); err != nil {
		return err
	}
	sb, _, err := proto.DecodeStatus(cl.body)
	if err != nil {
		return err
	}
	_, err = c.br.Discard(int(sb.Dlen))
	return err
}

// readVChunk scatters n bytes of readv answer (16-byte element headers
// each followed by data) into cl.segs. Elements may span responses.
func (c *conn) readVChunk(cl *call, n int) error {
	for n > 0 {
		if cl.hdrN < len(cl.hdr) {
			k := min(len(cl.hdr)-cl.hdrN, n)
			if _, err := io.ReadFull(c.br, cl.hdr[cl.hdrN:cl.hdrN+k]); err != nil {
				return err
			}
			cl.hdrN += k
			n -= k
			if cl.hdrN == len(cl.hdr) {
				rs, _ := proto.DecodeReadSeg(cl.hdr[:])
				if err := cl.matchSeg(rs); err != nil {
					return err
				}
				cl.nextSegIfDone()
			}
			continue
		}
		buf := cl.segs[cl.seg].Buf[cl.segN:cl.segLen]
		k := min(len(buf), n)
		if _, err := io.ReadFull(c.br, buf[:k]); err != nil {
			return err
		}
		cl.segN += k
		n -= k
		cl.nextSegIfDone()
	}
	return nil
}

func (cl *call) nextSegIfDone() {
	if cl.segN == cl.segLen {
		cl.seg++
		cl.segN, cl.segLen, cl.hdrN = 0, 0, 0
	}
}

// matchSeg finds the requested segment an element header announces. The
// C++ server answers in request order; a shorter element (end of file) is
// accepted and recorded as short.
func (cl *call) matchSeg(rs proto.ReadSeg) error {
	for i := cl.seg; i < len(cl.segs); i++ {
		s := cl.segs[i]
		if s.Offset == rs.Offset && rs.Length >= 0 && int(rs.Length) <= len(s.Buf) {
			if int(rs.Length) < len(s.Buf) || i != cl.seg {
				cl.short = true
			}
			cl.seg, cl.segN, cl.segLen = i, 0, int(rs.Length)
			return nil
		}
	}
	return fmt.Errorf("readv answer element %d@%d matches no requested segment: %w", rs.Length, rs.Offset, proto.ErrMalformed)
}

// attn handles an unsolicited kXR_attn response.
func (c *conn) attn(h proto.ResponseHeader) error {
	if int(h.Dlen) > maxBody {
		return fmt.Errorf("kXR_attn of %d bytes: %w", h.Dlen, proto.ErrMalformed)
	}
	if cap(c.attnBuf) < int(h.Dlen) {
		c.attnBuf = make([]byte, h.Dlen)
	}
	b := c.attnBuf[:h.Dlen]
	if _, err := io.ReadFull(c.br, b); err != nil {
		return err
	}
	act, inner, data, err := proto.DecodeAttn(b)
	if err != nil || act != proto.AttnAsynResp {
		return err // asyncms and obsolete actions carry nothing for us
	}
	sid := uint16(inner.StreamID[0])<<8 | uint16(inner.StreamID[1])
	c.mu.Lock()
	defer c.mu.Unlock()
	var cl *call
	if sid >= 1 && int(sid) <= len(c.calls) {
		cl = c.calls[sid-1]
	}
	if cl == nil {
		return nil // the request was abandoned and its id reused? ignore
	}
	if !cl.abandoned {
		switch {
		case (inner.Status == proto.StatusOK || inner.Status == proto.StatusOKSoFar) && cl.kind == kindRead:
			if len(data) > len(cl.dst)-cl.n {
				return fmt.Errorf("async read answer of %d bytes for %d wanted: %w", cl.n+len(data), len(cl.dst), proto.ErrMalformed)
			}
			cl.n += copy(cl.dst[cl.n:], data)
			if cl.progress != nil {
				cl.progress(cl.n)
			}
		case cl.kind == kindReadV && inner.Status == proto.StatusOK:
			return fmt.Errorf("async readv answer: %w", proto.ErrMalformed)
		default:
			if inner.Status != proto.StatusOK && inner.Status != proto.StatusOKSoFar {
				cl.body = cl.body[:0]
			}
			cl.body = append(cl.body, data...)
		}
	}
	if inner.Status != proto.StatusOKSoFar {
		c.completeLocked(cl, inner.Status, nil)
	}
	return nil
}

// fail marks the connection dead and fails every pending call.
func (c *conn) fail(cause error) {
	c.nc.Close()
	if c.stalled.Load() {
		cause = fmt.Errorf("%w for %v", errStalled, c.cfg.StallTimeout)
	}
	err := unavailable("connection to %s: %w", c.addr, cause)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead = err
	c.isDead.Store(true)
	for _, cl := range c.calls {
		if cl == nil {
			continue
		}
		if cl.receiving {
			cl.receiving = false
			if cl.abandoned {
				cl.chunkEnd <- struct{}{}
			}
		}
		c.completeLocked(cl, 0, err)
	}
}

// unavailable builds an error wrapping origin.ErrUnavailable.
func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %w", fmt.Errorf(format, args...), origin.ErrUnavailable)
}
