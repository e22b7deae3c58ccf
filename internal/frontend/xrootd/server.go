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
	// Rejected counts connections refused because of MaxConnections.
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
	refusing  int // conns in conns that only get refuseFull's error
	// perClient counts the connections of each client address.
	perClient *connlimit.PerAddr
	closing   bool          // Shutdown or Close called: accept nothing new
	idle      chan struct{} // closed when closing and no connection is left

	// wg counts connection goroutines.
	wg sync.WaitGroup
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
		perClient: connlimit.New(0),
	}
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
	return nil
}

// Stats returns the server's counters.
func (s *Server) Stats() *Stats { return &s.stats }

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
// full.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	if max := c.cfg.MaxConnectionsPerClient; max > 0 && !c.refuse {
		s.perClient.SetMax(max)
		if s.perClient.Acquire(c.remote) {
			c.counted = true
		} else {
			s.stats.Rejected.Add(1)
			s.log.Warn("xrootd: too many connections from one client address; refusing", "client", c.remote, "max", max)
			if s.refusing >= maxRefusing {
				return false
			}
			c.refuse, c.refuseWhy = true, fmt.Sprintf("server busy: it serves at most %d connections from one client address; retry later", max)
			s.refusing++
		}
	}
	if max := c.cfg.MaxConnections; max > 0 && !c.refuse && len(s.conns)-s.refusing >= max {
		s.stats.Rejected.Add(1)
		s.log.Warn("xrootd: too many connections; refusing", "client", c.remote, "max", max)
		if s.refusing >= maxRefusing {
			return false // too many to even explain: just close
		}
		// Served only to tell the client why (refuseFull), within the
		// handshake timeout.
		c.refuse = true
		s.refusing++
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
	if c.refuse {
		s.refusing--
	}
	if c.counted {
		s.perClient.Release(c.remote)
	}
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
