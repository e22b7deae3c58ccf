package xrootd

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/connlimit"
	"github.com/hepcache/hepcache/internal/metrics"
	"github.com/hepcache/hepcache/internal/xrootd/proto"
)

// conn is one client connection. Its reader goroutine (serve) reads
// requests, handles the session-level ones (protocol, login, auth, endsess)
// itself and starts a goroutine per other request, at most MaxInFlight at
// a time; responses go through the shared respWriter.
type conn struct {
	srv    *Server
	cfg    *Config
	log    *slog.Logger
	remote string
	ctx    context.Context
	cancel context.CancelFunc
	w      *respWriter
	files  *fileTable
	sem    chan struct{} // one token per request in progress
	// handlers counts request goroutines.
	handlers sync.WaitGroup
	// inflight is the number of requests in progress (for the idle timer).
	inflight atomic.Int32
	draining atomic.Bool
	// handshaken: the client's initial handshake was read (drain).
	handshaken atomic.Bool

	// client is the connection in Config.Metrics' client list, from login
	// until finish; nil without metrics.
	client *metrics.Client

	// localMu protects local.
	localMu sync.Mutex
	// local lists the redirects to local files sent on this connection,
	// oldest first, at most maxLocalRedirects (see takeLocalFallback).
	local []localRedirect

	// ncMu protects nc, which the reader swaps for a tls.Conn.
	ncMu sync.Mutex
	nc   net.Conn

	// Owned by the reader goroutine. Handlers get what they need as
	// arguments when they are started (the go statement orders it).
	br        *bufio.Reader
	loggedIn  bool
	needAuth  bool
	tlsOn     bool
	asyncOK   bool // the client understands kXR_waitresp + kXR_attn
	loginName string
	loginPID  int // the client's pid and login CGI, for monitoring
	loginCGI  string
	ident     *Identity
	reqCtx    context.Context // ctx with the identity, for handlers
	authFails int
	// authRefused says why credentials presented on this connection were
	// refused (a ztn token before the unix fallback), for the denials.
	authRefused []string
	authState   any             // the Authenticator's handshake state (ConnInfo.AuthState)
	hsDeadline  time.Time       // login (and auth) must be done by then
	hasSession  bool            // sessID is registered with the server
	pass        *connlimit.Pass // its place under the connection bounds
	waiting     bool            // over a bound: requests get kXR_wait until pass.Admit (reader only)
	sessID      [16]byte        // written before registration, then read-only
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	cfg := s.cur.Load()
	c := &conn{
		srv:    s,
		cfg:    cfg,
		log:    s.log,
		remote: nc.RemoteAddr().String(),
		ctx:    ctx,
		cancel: cancel,
		files:  newFileTable(cfg.MaxOpenFiles),
		sem:    make(chan struct{}, cfg.MaxInFlight),
		nc:     nc,
		br:     bufio.NewReaderSize(nc, 16<<10),
	}
	c.w = newRespWriter(nc, cfg.RequestTimeout, func(err error) {
		c.log.Debug("xrootd: closing connection after a write error", "client", c.remote, "err", err)
		c.close()
	})
	c.reqCtx = ctx
	return c
}

func (c *conn) netConn() net.Conn {
	c.ncMu.Lock()
	defer c.ncMu.Unlock()
	return c.nc
}

// close closes the connection at once; requests in progress see their
// context cancelled.
func (c *conn) close() {
	c.cancel()
	c.netConn().Close()
}

// drain makes the reader stop after the requests in progress (Shutdown).
// A connection still in its handshake gets handshakeGrace to finish it:
// cut, its client would see a reset where XrdCl does not connect again.
func (c *conn) drain() {
	c.draining.Store(true)
	if c.handshaken.Load() {
		c.netConn().SetReadDeadline(time.Now())
	} else {
		c.netConn().SetReadDeadline(time.Now().Add(handshakeGrace))
	}
}

// handshakeGrace is how long a connection still in its handshake when the
// server drains may take to finish it.
const handshakeGrace = time.Second

// serve runs the connection's reader loop until the client leaves, the
// framing breaks or the server shuts down.
func (c *conn) serve() {
	defer c.finish()
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("xrootd: panic in connection reader", "client", c.remote, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	c.hsDeadline = time.Now().Add(c.cfg.HandshakeTimeout)
	c.netConn().SetReadDeadline(c.hsDeadline)
	if err := c.handshake(); err != nil {
		c.log.Debug("xrootd: handshake failed", "client", c.remote, "err", err)
		return
	}
	c.handshaken.Store(true)
	var hb [proto.RequestHeaderLen]byte
	for {
		c.setIdleDeadline()
		if c.draining.Load() {
			c.drainRequests()
			return
		}
		if n, err := io.ReadFull(c.br, hb[:]); err != nil {
			if c.draining.Load() && n > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				// Interrupted mid-header by Shutdown: the rest follows.
				c.netConn().SetReadDeadline(time.Now().Add(drainPoll))
				if _, err := io.ReadFull(c.br, hb[n:]); err == nil {
					if h, err := proto.DecodeRequestHeader(hb[:]); err == nil && c.answerDraining(h) {
						c.drainRequests()
					}
				}
				return
			}
			if c.draining.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
				c.drainRequests()
				return
			}
			if !c.draining.Load() && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.log.Debug("xrootd: read request", "client", c.remote, "err", err)
			}
			return
		}
		c.srv.stats.Requests.Add(1)
		h, err := proto.DecodeRequestHeader(hb[:])
		if err != nil {
			// A negative length: we cannot find the next request.
			c.sendError(h.StreamID, proto.ErrArgInvalid, "invalid request data length")
			return
		}
		if !c.readAndDispatch(h) {
			return
		}
	}
}

// drainPoll is how often a draining connection looks whether its last
// request was answered.
const drainPoll = 50 * time.Millisecond

// restartWait is the kXR_wait, in seconds, that answers a request a
// server going away will not serve: XrdCl sends it again after that long,
// on a new connection to the server that then listens (the same sockets,
// handed over) and, for an open file, reopens it there first.
const restartWait = 1

// waitResponse is the answer to a request the server will not serve
// because it is going away.
func waitResponse(sid proto.StreamID) []byte {
	return proto.AppendWait(nil, sid, restartWait, "server restarting, try again")
}

// drainRequests runs once Shutdown asked the connection to drain: the
// requests in progress finish; a request the client sends meanwhile is
// answered at once with kXR_wait (it is served after the restart); once
// none is left in progress, and none arrived for drainPoll (closing with
// unread requests would reset the connection, losing answers not yet
// read), the connection ends.
func (c *conn) drainRequests() {
	var hb [proto.RequestHeaderLen]byte
	for quiet := false; c.inflight.Load() > 0 || !quiet; {
		quiet = c.inflight.Load() == 0 // one more poll once none is left
		c.netConn().SetReadDeadline(time.Now().Add(drainPoll))
		if n, err := io.ReadFull(c.br, hb[:]); err != nil {
			if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			return // a header cut short: a socket error XrdCl recovers from
		}
		quiet = false
		h, err := proto.DecodeRequestHeader(hb[:])
		if err != nil || !c.answerDraining(h) {
			return
		}
	}
}

// answerDraining reads the body of request h, which arrived while the
// connection drains, and answers it: kXR_ping is answered, everything
// else gets kXR_wait. It returns false when the connection must end.
func (c *conn) answerDraining(h proto.RequestHeader) bool {
	if !c.loggedIn {
		switch h.RequestID {
		case proto.ReqProtocol, proto.ReqLogin, proto.ReqAuth:
			// XrdCl takes no kXR_wait to these ("Got invalid login
			// response", fatal), and a connection closed with them unread
			// is reset, which it does not recover from either: its
			// handshake is finished as usual; its first request then
			// gets kXR_wait, and it sends it again on a new connection,
			// to the process listening then.
			c.netConn().SetReadDeadline(time.Now().Add(c.cfg.RequestTimeout))
			return c.readAndDispatch(h)
		}
		return false
	}
	c.netConn().SetReadDeadline(time.Now().Add(c.cfg.RequestTimeout))
	if _, err := io.CopyN(io.Discard, c.br, int64(h.Dlen)); err != nil {
		return false
	}
	if h.RequestID == proto.ReqPing {
		c.sendOK(h.StreamID, nil)
		return true
	}
	c.w.writeMsg(true, waitResponse(h.StreamID))
	return true
}

// setIdleDeadline arms the idle timer while the connection has nothing to
// do: no open file and no request in progress.
func (c *conn) setIdleDeadline() {
	var d time.Time
	if !c.loggedIn || c.needAuth {
		c.netConn().SetReadDeadline(c.hsDeadline)
		return
	}
	if c.files.count() == 0 && c.inflight.Load() == 0 {
		d = time.Now().Add(c.cfg.IdleTimeout)
	}
	c.netConn().SetReadDeadline(d)
}

// finish releases everything once the reader stopped: it waits for the
// handlers, closes the files and the connection. Unless the server is
// draining (Shutdown lets requests in progress finish), the client is gone
// or broke the protocol, so the requests in progress are cancelled first.
func (c *conn) finish() {
	if !c.draining.Load() {
		c.cancel()
	}
	c.handlers.Wait()
	c.cancel()
	// What the writer still holds for the client goes out first (within
	// the write timeout): closing now would cut an answer short.
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RequestTimeout)
	c.w.waitDrained(ctx)
	cancel()
	c.netConn().Close()
	for _, of := range c.files.removeAll() {
		of.ops.Wait()
		if err := backend.CloseAtDisconnect(of.f); err != nil {
			c.log.Warn("xrootd: close file at disconnect", "client", c.remote, "path", of.req.String(), "err", err)
		}
	}
	if c.client != nil {
		c.cfg.Metrics.Clients().Remove(c.client)
	}
	c.srv.untrack(c)
}

// handshake reads the client's 20-byte handshake and answers it. A
// kXR_protocol request often arrives in the same segment; it stays in the
// buffered reader for the main loop.
func (c *conn) handshake() error {
	var hs [proto.ClientHandshakeLen]byte
	if _, err := io.ReadFull(c.br, hs[:]); err != nil {
		return fmt.Errorf("read handshake: %w", err)
	}
	if err := proto.CheckClientHandshake(hs[:]); err != nil {
		return err
	}
	return c.w.write(proto.AppendServerHandshake(nil, proto.ProtocolVersion, proto.DataServer))
}

// Request bodies come from two pools: most are short paths.
var (
	smallBodies = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
	largeBodies = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}
)

func getBody(n int) *[]byte {
	var bp *[]byte
	if n <= 1024 {
		bp = smallBodies.Get().(*[]byte)
	} else if n <= 64<<10 {
		bp = largeBodies.Get().(*[]byte)
	} else {
		b := make([]byte, 0, n)
		bp = &b
	}
	*bp = (*bp)[:n]
	return bp
}

func putBody(bp *[]byte) {
	switch cap(*bp) {
	case 1024:
		smallBodies.Put(bp)
	case 64 << 10:
		largeBodies.Put(bp)
	}
}

// isWrite reports requests whose data is a file payload.
func isWrite(id proto.RequestID) bool {
	return id == proto.ReqWrite || id == proto.ReqPgWrite || id == proto.ReqWriteV
}

// readAndDispatch reads the body of request h and handles it. It returns
// false when the connection must end.
func (c *conn) readAndDispatch(h proto.RequestHeader) bool {
	if h.Dlen > 0 && c.loggedIn && !c.needAuth {
		c.netConn().SetReadDeadline(time.Now().Add(c.cfg.RequestTimeout))
	}
	if isWrite(h.RequestID) || int(h.Dlen) > c.cfg.MaxRequestBody {
		// Skip the payload so that the next request is found.
		if _, err := io.CopyN(io.Discard, c.br, int64(h.Dlen)); err != nil {
			return false
		}
		if isWrite(h.RequestID) {
			c.sendError(h.StreamID, proto.ErrFSReadOnly, fmt.Sprintf("%v refused: hepcache serves files read-only", h.RequestID))
		} else {
			c.sendError(h.StreamID, proto.ErrArgTooLong, fmt.Sprintf("%v data of %d bytes is longer than the limit of %d", h.RequestID, h.Dlen, c.cfg.MaxRequestBody))
		}
		return true
	}
	bp := getBody(int(h.Dlen))
	if _, err := io.ReadFull(c.br, *bp); err != nil {
		putBody(bp)
		return false
	}
	body := *bp

	// Session-level requests run here, in order.
	switch h.RequestID {
	case proto.ReqProtocol:
		defer putBody(bp)
		return c.doProtocol(h, body)
	case proto.ReqLogin:
		defer putBody(bp)
		return c.doLogin(h, body)
	case proto.ReqBind:
		putBody(bp)
		c.sendError(h.StreamID, proto.ErrUnsupported, "kXR_bind is not supported: hepcache uses one connection per session")
		return true
	}
	if !c.loggedIn {
		putBody(bp)
		c.sendError(h.StreamID, proto.ErrInvalidRequest, "Invalid request; user not logged in")
		return false
	}
	switch h.RequestID {
	case proto.ReqAuth:
		defer putBody(bp)
		return c.doAuth(h, body)
	case proto.ReqPing:
		putBody(bp)
		c.sendOK(h.StreamID, nil)
		return true
	}
	if c.needAuth {
		putBody(bp)
		c.sendError(h.StreamID, proto.ErrInvalidRequest, "Invalid request; user not authenticated")
		return false
	}
	if h.RequestID == proto.ReqEndsess {
		defer putBody(bp)
		return c.doEndsess(h, body)
	}

	if c.waiting {
		if !c.pass.Admit() {
			putBody(bp)
			c.tellBusy(h.StreamID)
			return true
		}
		c.waiting = false
	}

	// Everything else runs concurrently. Acquiring a token blocks the reader
	// while MaxInFlight requests are in progress: back-pressure on the
	// client instead of unbounded memory.
	select {
	case c.sem <- struct{}{}:
	case <-c.ctx.Done():
		putBody(bp)
		return false
	}
	c.inflight.Add(1)
	c.handlers.Add(1)
	c.w.begin(h.StreamID)
	go c.handle(c.reqCtx, h, bp)
	return true
}

// handle runs one request in its own goroutine.
func (c *conn) handle(ctx context.Context, h proto.RequestHeader, bp *[]byte) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("xrootd: panic serving request", "client", c.remote, "request", h.RequestID.String(), "panic", r, "stack", string(debug.Stack()))
			c.sendError(h.StreamID, proto.ErrServerError, "internal server error")
			c.observe(h.RequestID, errPanic)
		}
		putBody(bp)
		c.inflight.Add(-1)
		<-c.sem
		c.handlers.Done()
	}()
	body := *bp
	// Every handler answers the client and returns the error it answered
	// with (nil for success), for the metrics.
	var err error
	defer func() { c.observe(h.RequestID, err) }()
	switch h.RequestID {
	case proto.ReqOpen:
		err = c.doOpen(ctx, h, body)
	case proto.ReqRead:
		err = c.doRead(ctx, h, body)
	case proto.ReqPgRead:
		err = c.doPgRead(ctx, h, body)
	case proto.ReqReadV:
		err = c.doReadV(ctx, h, body)
	case proto.ReqClose:
		err = c.doClose(ctx, h, body)
	case proto.ReqStat:
		err = c.doStat(ctx, h, body)
	case proto.ReqDirlist:
		err = c.doDirlist(ctx, h, body)
	case proto.ReqQuery:
		err = c.doQuery(ctx, h, body)
	case proto.ReqLocate:
		err = c.doLocate(ctx, h, body)
	case proto.ReqSet:
		c.sendOK(h.StreamID, nil)
	case proto.ReqSync:
		err = c.doSync(ctx, h)
	case proto.ReqPrepare:
		err = c.doPrepare(ctx, h, body)
	case proto.ReqMkdir, proto.ReqMv, proto.ReqRm, proto.ReqRmdir, proto.ReqChmod, proto.ReqTruncate:
		err = c.fail(h.StreamID, proto.ErrFSReadOnly, fmt.Sprintf("%v refused: hepcache serves files read-only", h.RequestID))
	default:
		err = c.fail(h.StreamID, proto.ErrUnsupported, fmt.Sprintf("%v is not supported by hepcache", h.RequestID))
	}
}

// errPanic is the outcome of a request whose handler panicked.
var errPanic = errors.New("xrootd: internal error")

// observe counts a finished request in Config.Metrics: protocol root or
// roots, the operation (open, read, pgread, ...; "other" for requests
// hepcache does not know) and the outcome of err.
func (c *conn) observe(id proto.RequestID, err error) {
	if c.cfg.Metrics == nil {
		return
	}
	op, ok := strings.CutPrefix(id.String(), "kXR_")
	if !ok {
		op = "other"
	}
	c.cfg.Metrics.ObserveRequest(c.protocol(), op, err)
}

// protocol is "roots" once the connection uses TLS, else "root". Called
// from the reader, or from handlers (which the reader started after any
// switch to TLS).
func (c *conn) protocol() string {
	if c.tlsOn {
		return "roots"
	}
	return "root"
}

// connInfo describes the connection to the security layer.
func (c *conn) connInfo() ConnInfo {
	nc := c.netConn()
	ci := ConnInfo{Remote: nc.RemoteAddr(), Local: nc.LocalAddr(), LoginName: c.loginName, AuthState: &c.authState}
	if tc, ok := nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		ci.TLS = &st
	}
	return ci
}

// doProtocol answers kXR_protocol and, when both sides want it, switches
// the connection to TLS right after the answer.
func (c *conn) doProtocol(h proto.RequestHeader, body []byte) bool {
	var r proto.ProtocolRequest
	if err := r.Decode(&h, body); err != nil {
		c.sendError(h.StreamID, proto.ErrArgInvalid, err.Error())
		return true
	}
	flags := proto.IsServer | proto.SupPgRW
	if c.cfg.Manager {
		flags |= proto.IsManager
	}
	wantTLS := false
	if c.cfg.TLS != nil {
		flags |= proto.HaveTLS
		if c.cfg.RequireTLS {
			flags |= proto.TLSLogin | proto.TLSData | proto.TLSSess
		}
		if !c.tlsOn && r.ClientPV != 0 {
			wantTLS = r.Flags&proto.ProtoWantTLS != 0
			able := wantTLS || r.Flags&proto.ProtoAbleTLS != 0
			if able && c.cfg.RequireTLS {
				wantTLS = true
			}
		}
	}
	if wantTLS {
		flags |= proto.GotoTLS
	}
	resp := proto.ProtocolResponse{PVal: proto.ProtocolVersion, Flags: flags}
	if err := c.w.write(proto.AppendProtocolResponse(nil, h.StreamID, &resp)); err != nil {
		return false
	}
	if wantTLS {
		if err := c.startTLS(); err != nil {
			c.log.Info("xrootd: TLS upgrade failed", "client", c.remote, "err", err)
			return false
		}
	}
	return true
}

// startTLS is the seam for TLS after kXR_protocol: it swaps the connection
// for a tls.Conn in the reader and the writer.
func (c *conn) startTLS() error {
	// Nothing may be in flight on the plain connection, and the client
	// sends nothing before the TLS handshake.
	c.handlers.Wait()
	if c.br.Buffered() > 0 {
		return errors.New("client sent data after kXR_protocol before the TLS handshake")
	}
	plain := c.netConn()
	tc := tls.Server(plain, c.cfg.TLS)
	tc.SetDeadline(time.Now().Add(c.cfg.HandshakeTimeout))
	if err := tc.HandshakeContext(c.ctx); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	tc.SetWriteDeadline(time.Time{})
	c.ncMu.Lock()
	c.nc = tc
	c.ncMu.Unlock()
	c.w.mu.Lock()
	c.w.setConnLocked(tc)
	c.w.mu.Unlock()
	c.br.Reset(tc)
	c.tlsOn = true
	return nil
}

// sanitizeName keeps a login name printable for logs and requests.
func sanitizeName(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-' || ch == '.') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "anonymous"
	}
	return string(b)
}

// doLogin answers kXR_login with a new session id and, when an
// Authenticator wants credentials, its security parameters.
func (c *conn) doLogin(h proto.RequestHeader, body []byte) bool {
	if c.loggedIn {
		c.sendError(h.StreamID, proto.ErrInvalidRequest, "duplicate login; already logged in")
		return true
	}
	var r proto.LoginRequest
	if err := r.Decode(&h, body); err != nil {
		c.sendError(h.StreamID, proto.ErrArgInvalid, err.Error())
		return true
	}
	if c.cfg.RequireTLS && !c.tlsOn {
		c.sendError(h.StreamID, proto.ErrTLSRequired, "login requires TLS (use roots://)")
		return true
	}
	c.loginName = sanitizeName(r.Username)
	c.authState = nil
	c.loginPID, c.loginCGI = int(r.PID), r.Token
	c.asyncOK = r.CapVer&proto.CapVerMask >= 2
	if _, err := rand.Read(c.sessID[:]); err != nil {
		c.sendError(h.StreamID, proto.ErrServerError, "cannot make a session id")
		return false
	}
	params := ""
	if c.cfg.Authenticator != nil {
		params = c.cfg.Authenticator.Params(c.connInfo())
	}
	// The session exists before the client hears of it: whatever the
	// client does next (or a scrape of the clients) already sees it.
	c.srv.registerSession(c)
	c.hasSession = true
	c.loggedIn = true
	if c.cfg.Metrics != nil {
		c.client = c.cfg.Metrics.Clients().Add(c.protocol(), c.remote)
	}
	c.needAuth = params != ""
	if !c.needAuth {
		c.setIdentity(&Identity{Name: c.loginName})
	}
	resp := proto.LoginResponse{SessID: c.sessID, Sec: []byte(params)}
	if err := c.w.write(proto.AppendLoginResponse(nil, h.StreamID, &resp)); err != nil {
		return false
	}
	c.log.Debug("xrootd: login", "client", c.remote, "user", c.loginName, "auth", c.needAuth, "tls", c.tlsOn)
	return true
}

func (c *conn) setIdentity(id *Identity) {
	c.ident = id
	c.reqCtx = context.WithValue(c.ctx, identityKey{}, id)
}

// maxAuthFailures ends a connection that keeps failing authentication.
const maxAuthFailures = 3

// doAuth runs one step of kXR_auth through the Authenticator.
func (c *conn) doAuth(h proto.RequestHeader, body []byte) bool {
	a := c.cfg.Authenticator
	if a == nil {
		c.sendOK(h.StreamID, nil) // no security: XRootD accepts and ignores
		return true
	}
	var r proto.AuthRequest
	if err := r.Decode(&h, body); err != nil {
		c.sendError(h.StreamID, proto.ErrArgInvalid, err.Error())
		return true
	}
	credType := strings.TrimRight(string(r.CredType[:]), "\x00")
	id, more, err := a.Authenticate(c.ctx, c.connInfo(), credType, r.Cred)
	switch {
	case err != nil:
		c.authFails++
		c.authRefused = append(c.authRefused, credType+": "+err.Error())
		c.log.Info("xrootd: authentication failed", "client", c.remote, "user", c.loginName, "protocol", credType, "err", err)
		c.sendError(h.StreamID, proto.ErrAuthFailed, err.Error())
		return c.authFails < maxAuthFailures
	case more != nil:
		out := proto.AppendResponseHeader(nil, h.StreamID, proto.StatusAuthMore, len(more))
		return c.w.write(out, more) == nil
	case id == nil:
		c.sendError(h.StreamID, proto.ErrServerError, "authenticator returned no identity")
		return false
	}
	id.Authenticated = true
	id.Refused = c.authRefused
	if id.Protocol == "" {
		id.Protocol = credType
	}
	c.setIdentity(id)
	c.needAuth = false
	c.log.Debug("xrootd: authenticated", "client", c.remote, "user", id.Name, "protocol", id.Protocol)
	return c.sendOK(h.StreamID, nil) == nil
}

// doEndsess ends another session of the same client (XrdCl sends it after
// reconnecting, so that the server drops the old connection's files), or
// this one.
func (c *conn) doEndsess(h proto.RequestHeader, body []byte) bool {
	var r proto.EndsessRequest
	if err := r.Decode(&h, body); err != nil {
		c.sendError(h.StreamID, proto.ErrArgInvalid, err.Error())
		return true
	}
	if c.hasSession && r.SessID == c.sessID {
		c.sendOK(h.StreamID, nil)
		return false
	}
	other := c.srv.session(r.SessID)
	if other == nil || other == c {
		c.sendOK(h.StreamID, nil) // unknown or already gone: nothing to do
		return true
	}
	if other.loginName != c.loginName || hostOf(other.remote) != hostOf(c.remote) {
		c.sendError(h.StreamID, proto.ErrNotAuthorized, "not session owner")
		return true
	}
	c.log.Debug("xrootd: ending old session", "client", c.remote, "old", other.remote)
	other.close()
	c.sendOK(h.StreamID, nil)
	return true
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

// request builds the backend request for a parsed path.
func (c *conn) request(ctx context.Context, pp parsedPath) backend.Request {
	req := backend.Request{
		Origin:   pp.Origin,
		Path:     pp.Path,
		Opaque:   pp.Opaque,
		Client:   c.remote,
		Protocol: c.protocol(),
		// XrdCl opens a file://localhost redirect itself
		// (XrdClLocalFileHandler).
		FollowsFileRedirect: true,
	}
	req.ClientPID, req.ClientLogin = c.loginPID, c.loginCGI
	if id := IdentityFrom(ctx); id != nil {
		req.User, req.Auth = id.Name, id.Protocol
	}
	return req
}

// pathRequest parses a request path and asks the Authorizer about op. On
// failure it answers the client and returns the error it answered with.
func (c *conn) pathRequest(ctx context.Context, sid proto.StreamID, op Op, raw string) (backend.Request, error) {
	pp, err := parsePath(raw, c.cfg.MaxPathLength)
	if err != nil {
		return backend.Request{}, c.sendErr(sid, err)
	}
	req := c.request(ctx, pp)
	if a := c.cfg.Authorizer; a != nil {
		var err error
		if ra, ok := a.(RequestAuthorizer); ok {
			err = ra.AuthorizeRequest(ctx, op, &req)
		} else {
			err = a.Authorize(ctx, op, req)
		}
		if err != nil {
			if errorCode(err) == proto.ErrServerError && !errors.Is(err, backend.ErrForbidden) {
				err = fmt.Errorf("%s %s: %w", op, req.String(), errors.Join(backend.ErrForbidden, err))
			}
			return req, c.sendErr(sid, err)
		}
	}
	return req, nil
}

// sendOK sends kXR_ok with data.
func (c *conn) sendOK(sid proto.StreamID, data []byte) error {
	if len(data) == 0 {
		return c.w.write(proto.AppendResponseHeader(nil, sid, proto.StatusOK, 0))
	}
	return c.w.write(proto.AppendResponseHeader(nil, sid, proto.StatusOK, len(data)), data)
}

// sendError sends kXR_error.
func (c *conn) sendError(sid proto.StreamID, code proto.ErrorCode, msg string) error {
	c.srv.stats.Errors.Add(1)
	return c.w.write(proto.AppendError(nil, sid, code, msg))
}

// fail answers a request with kXR_error and returns the error it sent (a
// codedError), which the request's handler returns for the metrics.
func (c *conn) fail(sid proto.StreamID, code proto.ErrorCode, msg string) error {
	c.sendError(sid, code, msg)
	return &codedError{code: code, msg: msg}
}

// sendErr answers a failed request: kXR_redirect and kXR_wait for the
// backend's RedirectError and WaitError, else kXR_error with the mapped
// code.
func (c *conn) sendErr(sid proto.StreamID, err error) error {
	c.w.write(c.errResponse(nil, sid, err))
	return err
}

// errResponse appends the response (header and body) for a failed request.
func (c *conn) errResponse(dst []byte, sid proto.StreamID, err error) []byte {
	var re *backend.RedirectError
	var we *backend.WaitError
	switch {
	case errors.As(err, &re):
		c.srv.stats.Redirects.Add(1)
		return appendRedirect(dst, sid, re)
	case errors.As(err, &we):
		return appendBusy(dst, sid, we.Seconds, we.Reason)
	}
	c.srv.stats.Errors.Add(1)
	return proto.AppendError(dst, sid, errorCode(err), errorMessage(err))
}

// appendRedirect encodes a RedirectError: host and port for a root://
// target (the path and opaque then follow the client's request), else the
// whole URL with port -1, which XrdCl follows as a URL.
func appendRedirect(dst []byte, sid proto.StreamID, re *backend.RedirectError) []byte {
	if re.Host != "" && re.Port > 0 {
		host := re.Host
		if strings.IndexByte(host, ':') >= 0 && !strings.HasPrefix(host, "[") {
			host = "[" + host + "]"
		}
		if _, q, ok := strings.Cut(re.URL, "?"); ok {
			host += "?" + q
		}
		return proto.AppendRedirect(dst, sid, int32(re.Port), host)
	}
	return proto.AppendRedirect(dst, sid, -1, re.URL)
}
