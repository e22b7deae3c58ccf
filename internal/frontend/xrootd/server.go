package xrootd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hepcache/hepcache/internal/connlimit"
)

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("xrootd: server closed")

// Stats are the server's counters. Safe for concurrent use.
type Stats struct {
	// Connections counts accepted connections.
	Connections atomic.Int64
	// Active is the number of open connections.
	Active atomic.Int64
	// Requests counts requests received.
	Requests atomic.Int64
	// Errors counts kXR_error responses sent.
	Errors atomic.Int64
	// BytesSent counts file bytes sent (read, pgread, readv), without
	// protocol overhead.
	BytesSent atomic.Int64
	// Rejected counts connections over a bound (MaxConnections, the
	// Limits shared with other front ends, MaxConnectionsPerClient): told
	// to wait (kXR_wait), or closed at once when no place was left to wait.
	Rejected atomic.Int64
	// Redirects counts kXR_redirect answers (the backend's RedirectError),
	// of which LocalRedirects sent the client to a local file.
	Redirects, LocalRedirects atomic.Int64
	// LocalFallbacks counts clients that came back after failing to open
	// the local file they were redirected to, and were served here.
	LocalFallbacks atomic.Int64
}

// Server is the root:// front end: it accepts XRootD client connections
// and serves them from a backend.Backend. See the package documentation.
type Server struct {
	cfg Config
	// cur is the configuration new connections take: cfg with the limits
	// of the last SetLimits.
	cur   atomic.Pointer[Config]
	log   *slog.Logger
	start time.Time
	// ctx is the parent of every connection's context; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	stats  Stats
	// afterWaitResp is a test seam, called after a kXR_waitresp was sent.
	afterWaitResp func()

	// mu protects the fields below.
	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	sessions  map[[16]byte]*conn
	closing   bool          // Shutdown or Close called: accept nothing new
	idle      chan struct{} // closed when closing and no connection is left

	// wg counts connection goroutines.
	wg sync.WaitGroup

	// limits are the bounds on connections (Config.Limits, else the
	// server's own from MaxConnections: ownLimits); gate adds the bound per
	// client (MaxConnectionsPerClient).
	limits    *connlimit.Limits
	ownLimits bool
	gate      *connlimit.Gate
}

// New returns a Server for cfg (which it copies, filling defaults). It does
// not listen: call Serve.
func New(cfg *Config) (*Server, error) {
	if cfg == nil {
		return nil, errors.New("xrootd front end: nil config")
	}
	c := *cfg
	c.ChecksumAlgorithms = append([]string(nil), cfg.ChecksumAlgorithms...)
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := &Server{
		cfg:       c,
		log:       c.Logger,
		start:     time.Now(),
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		sessions:  make(map[[16]byte]*conn),
		limits:    c.Limits,
	}
	if srv.limits == nil {
		srv.limits, srv.ownLimits = connlimit.New(c.MaxConnections, 0), true
	}
	srv.gate = srv.limits.Gate(max(0, c.MaxConnectionsPerClient))
	srv.cur.Store(&srv.cfg)
	if c.Metrics != nil {
		c.Metrics.Clients().Declare("root")
		if c.TLS != nil {
			c.Metrics.Clients().Declare("roots")
		}
	}
	return srv, nil
}

// Limits are the per-client bounds that SetLimits changes while the server
// runs. Zero fields take the defaults, as in Config.
type Limits struct {
	MaxConnections, MaxInFlight, MaxRequestBody int
	MaxConnectionsPerClient                     int
	MaxReadVSegments, MaxReadVSegmentSize       int
	HandshakeTimeout, IdleTimeout               time.Duration
}

// SetLimits replaces the limits (a configuration reload, SIGHUP).
// MaxConnections applies at once; the others apply to connections accepted
// afterwards (a connection keeps the limits it started with). On error
// nothing changes.
func (s *Server) SetLimits(l Limits) error {
	c := *s.cur.Load()
	c.MaxConnections, c.MaxInFlight, c.MaxRequestBody = l.MaxConnections, l.MaxInFlight, l.MaxRequestBody
	c.MaxConnectionsPerClient = l.MaxConnectionsPerClient
	c.MaxReadVSegments, c.MaxReadVSegmentSize = l.MaxReadVSegments, l.MaxReadVSegmentSize
	c.HandshakeTimeout, c.IdleTimeout = l.HandshakeTimeout, l.IdleTimeout
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return fmt.Errorf("xrootd front end limits: %w", err)
	}
	s.cur.Store(&c)
	if s.ownLimits {
		s.limits.Set(c.MaxConnections, 0)
	}
	return nil
}

// Stats returns the server's counters.
func (s *Server) Stats() *Stats { return &s.stats }

// ConnStats returns the counts of the connections over a bound: told to
// wait, admitted later, dropped.
func (s *Server) ConnStats() *connlimit.Stats { return &s.gate.Stats }

// Serve accepts connections on ln until Shutdown or Close, and serves each
// in its own goroutines. It always returns a non-nil error: ErrServerClosed
// after Shutdown or Close, else the accept error. Serve may be called for
// several listeners; it closes ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
				// Out of file descriptors or a transient error: wait a bit,
				// as net/http does, instead of spinning.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("xrootd: accept failed; retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("xrootd: accept on %s: %w", ln.Addr(), err)
		}
		backoff = 0
		s.stats.Connections.Add(1)
		c := newConn(s, nc)
		if !s.track(c) {
			nc.Close()
			continue
		}
		go c.serve()
	}
}

// track registers a new connection; false when the server is closing or
// the connection is over a bound with no place left to wait (it is then
// closed at once). A connection over a bound is served until its login,
// then told to come back (kXR_wait) until there is room: XrdCl takes no
// kXR_wait to kXR_protocol or kXR_login, and sends the request again on
// the same connection after the wait.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.gate.SetPerClient(max(0, c.cfg.MaxConnectionsPerClient))
	c.pass = s.gate.Enter(c.remote)
	if c.pass == nil || !c.pass.Admitted() {
		s.stats.Rejected.Add(1)
		if c.pass == nil {
			s.log.Warn("xrootd: over a connection bound, and no place left to wait; closing", "client", c.remote, "max", s.limits.Counts().Max, "max_per_client", s.gate.PerClient())
			return false
		}
		over := "too many connections"
		if c.pass.Over() == connlimit.OverClient {
			over = "too many connections from one client"
		}
		s.log.Warn("xrootd: "+over+"; telling the client to come back (kXR_wait)", "client", c.remote, "max", s.limits.Counts().Max, "max_per_client", s.gate.PerClient())
		c.waiting = true
	}
	s.conns[c] = struct{}{}
	s.stats.Active.Add(1)
	s.wg.Add(1)
	return true
}

// untrack forgets a finished connection.
func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	c.pass.Release()
	if c.hasSession {
		if s.sessions[c.sessID] == c {
			delete(s.sessions, c.sessID)
		}
	}
	if s.closing && len(s.conns) == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
	s.stats.Active.Add(-1)
	s.wg.Done()
}

// beginClose stops accepting and returns a channel closed when no
// connection is left.
func (s *Server) beginClose() (conns []*conn, idle <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		conns = append(conns, c)
	}
	ch := make(chan struct{})
	if len(s.conns) == 0 {
		close(ch)
	} else if s.idle == nil {
		s.idle = ch
	} else {
		ch = s.idle
	}
	return conns, ch
}

// Shutdown stops accepting connections and requests, lets the requests in
// progress finish and then closes each connection. If ctx ends first, it
// closes everything as Close does and returns ctx's error.
//
// No request is left without an answer: one that arrives while the
// requests in progress finish, and one still in progress when ctx ends,
// gets kXR_wait, which XrdCl acts on at once (it sends it again a second
// later, to the server then listening, reopening a file it held first).
func (s *Server) Shutdown(ctx context.Context) error {
	conns, idle := s.beginClose()
	for _, c := range conns {
		c.drain()
	}
	select {
	case <-idle:
		s.cancel()
		s.wg.Wait()
		return nil
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
}

// closingNow reports whether Shutdown or Close has begun.
func (s *Server) closingNow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// answerPending answers with kXR_wait every request in progress on every
// connection (the server stops before they finish).
func (s *Server) answerPending() {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	n := 0
	for _, c := range conns {
		n += c.w.answerPending(waitResponse)
	}
	if n > 0 {
		s.log.Info("xrootd: requests still in progress at the shutdown deadline answered with kXR_wait", "requests", n)
	}
}

// Close closes the listeners and every connection at once, answering the
// requests in progress with kXR_wait and cancelling them, and waits for the
// connection goroutines to end.
// It is idempotent.
func (s *Server) Close() error {
	conns, _ := s.beginClose()
	s.answerPending()
	s.cancel()
	for _, c := range conns {
		c.close()
	}
	s.wg.Wait()
	return nil
}

// registerSession records the session id of a logged-in connection.
func (s *Server) registerSession(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions[c.sessID] = c
}

// session returns the connection with session id, or nil.
func (s *Server) session(id [16]byte) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}
